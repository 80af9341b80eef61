"""API-Bank: the backends reproduce the recorded results, both protocols score real samples, bad output never
crashes, and generated tasks are admitted only when their call executes."""
from __future__ import annotations

import collections
import json
import random
from pathlib import Path

import pytest
from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.api_bank.env import APIBankEnv, execute_in_context, load_api_bank_tasks
from genenv.benchmarks.api_bank.apis import make_runtime
from genenv.benchmarks.api_bank.apis.catalogue import DIALOGUE_DIRS, dialogue
from genenv.benchmarks.api_bank.apis.searcher import found_names
from genenv.envs.data import read_json
from genenv.envs.parsing import ToolCall
from genenv.envs.wrappers import TextActionWrapper
from genenv.benchmarks.api_bank.data import api_bank_dir

from conftest import DATA_DIR, FULL_DATA

ROOT = api_bank_dir(DATA_DIR)  # the API-Bank folder the tests read

# Recorded results our backends do not reproduce, and why (docs/departures.md, "Limitations"):
# - ToolSearcher: the recorded searches came from the original embedding model over an older catalogue; ours
#   finds a different API for a few keyword phrasings ("add schedule" -> ModifyAgenda, recorded AddAgenda).
# - TimedSwitch / CancelTimedSwitch: the recorded calls pass `device_id`, which the API description in the prompt
#   (and our backend) does not have; these samples are excluded from the official sets.
# - Recorded outputs our backends reproduce only up to what the original drew at random or printed differently;
#   these outputs are compared through the reading below (both sides), everything else as the checker says.
RETRIEVAL_MIN_SHARE = 0.8
DESCRIPTION_VIOLATIONS = {"TimedSwitch", "CancelTimedSwitch"}
RECORDED_OUTPUT_READINGS = {
    # appointment ids registered earlier in the dialogue were drawn at random by the original
    "QueryRegistration": lambda out: sorted(map(json.dumps, out.values())) if isinstance(out, dict) else out,
    # the recorded results capitalise device names that the database stores in lower case
    "QueryScene": lambda out: json.dumps(out, sort_keys=True).lower(),
    # the recorded searches describe an older catalogue version: compare the API(s) found
    "ToolSearcher": found_names,
}


def _recorded_calls():
    """``(suite, source, replay, name, arguments, recorded result)`` of every recorded call in the data."""
    root = ROOT
    for level, sub in DIALOGUE_DIRS.items():
        folder = root / "lv1-lv2-samples" / sub
        for path in sorted(folder.glob("*.jsonl")):
            turns = [t for t in dialogue(root, level, path.name) if t.get("role") == "API"]
            for k, t in enumerate(turns):
                yield ("lv12", path.name, [[u["api_name"], u["param_dict"]] for u in turns[:k]], t["api_name"],
                       t["param_dict"], {**t["result"], "api_name": t["api_name"]})
    for i, task in enumerate(read_json(root / "test-data" / "level-3.json")):
        calls = task["apis"]
        for k, c in enumerate(calls):
            yield ("lv3", f"level-3 task {i}", [[u["api_name"], u["input"]] for u in calls[:k]], c["api_name"],
                   c["input"], c["output"])


RECORDED = list(_recorded_calls())
RECORDED_APIS = sorted({(suite, name) for suite, _, _, name, _, _ in RECORDED})


@pytest.fixture(scope="module")
def replayed() -> dict[tuple[str, str], list[tuple[bool, str]]]:
    """Every recorded call executed after its dialogue's earlier calls, checked against its recorded result."""
    out: dict[tuple[str, str], list[tuple[bool, str]]] = collections.defaultdict(list)
    for suite, source, replay, name, arguments, recorded in RECORDED:
        runtime = make_runtime(ROOT, suite, reading="lenient")
        for earlier, args in replay:
            runtime.execute(earlier, args)
        result = runtime.execute(name, arguments)
        if name in RECORDED_OUTPUT_READINGS:
            read = RECORDED_OUTPUT_READINGS[name]
            result = {**result, "output": read(result["output"])}
            recorded = {**recorded, "output": read(recorded["output"])}
        ok, why = runtime.check(result, recorded)
        out[(suite, name)].append((ok, f"{source}: {why}"))
    return out


@pytest.mark.parametrize("suite,api", RECORDED_APIS, ids=[f"{s}-{a}" for s, a in RECORDED_APIS])
def test_recorded_gold_calls_reproduce_recorded_results(replayed, suite, api):
    results = replayed[(suite, api)]
    failures = [why for ok, why in results if not ok]
    if api in DESCRIPTION_VIOLATIONS:
        assert failures and all("invalid parameter name" in f and "device_id" in f for f in failures), failures
    elif api == "ToolSearcher" and suite == "lv12":
        assert 1 - len(failures) / len(results) >= RETRIEVAL_MIN_SHARE, failures
    else:
        assert not failures, failures[:3]


def test_all_backends_are_exercised_by_the_data():
    names = {n for _, n in RECORDED_APIS}
    if FULL_DATA:  # the full data records a call to every API of both catalogues
        from genenv.benchmarks.api_bank.apis import API_CLASSES

        assert names == set(API_CLASSES["lv12"]) | set(API_CLASSES["lv3"])
        assert len(RECORDED) == 508 + 245
    assert {"GetUserToken", "AddAgenda", "ToolSearcher"} <= names


def test_sample_counts_and_exclusions():
    counts = {}
    for protocol in ("official", "toolrl"):
        for level in (1, 2, 3):
            report = {}
            tasks = load_api_bank_tasks(level, protocol, report=report)
            counts[(protocol, level)] = (report["loaded"], report["excluded_gold_violates_description"])
            assert all(t.metadata["level"] == level and t.metadata["protocol"] == protocol for t in tasks)
            train = load_api_bank_tasks(level, protocol, split="train")
            heldout = load_api_bank_tasks(level, protocol, split="heldout")
            assert {t.id for t in train}.isdisjoint(t.id for t in heldout)
            assert len(train) + len(heldout) == len(tasks)
    if FULL_DATA:
        assert counts == {("official", 1): (391, 8), ("official", 2): (135, 0), ("official", 3): (245, 0),
                          ("toolrl", 1): (399, 0), ("toolrl", 2): (67, 0), ("toolrl", 3): (131, 0)}


@pytest.mark.parametrize("protocol", ["official", "toolrl"])
@pytest.mark.parametrize("level", [1, 2, 3])
def test_gold_policy_solves_every_sample(level, protocol):
    tasks = load_api_bank_tasks(level, protocol)
    env = APIBankEnv(tasks=tasks)
    failures = []
    for i, task in enumerate(tasks):
        env.reset(options={"task_index": i})
        _, reward, terminated, _, info = env.step(env.parse_lenient(env.gold_text(task)))
        assert terminated
        if reward != 1.0 or not info["api_match"]:
            failures.append((task.id, info["error"]))
    assert not failures, failures[:3]


def _task(level: int, protocol: str, predicate):
    return next(t for t in load_api_bank_tasks(level, protocol) if predicate(t))


def _score(task, text: str) -> tuple[float, dict]:
    env = APIBankEnv(tasks=[task])
    env.reset(options={"task_index": 0})
    _, reward, _, _, info = env.step(env.parse_lenient(text))
    return reward, info


def test_official_protocol_executes_the_call():
    task = _task(1, "official", lambda t: t.gold["name"] == "GetUserToken")
    args = dict(task.gold["arguments"])
    # a wrong password: the backend refuses, the gold call succeeds
    reward, info = _score(task, f"API-Request: [{ToolCall('GetUserToken', {**args, 'password': 'nope'}).to_python()}]")
    assert reward == 0.0 and "The password is incorrect." in info["error"]
    # another API, and text without a call
    reward, info = _score(task, "API-Request: [GetToday()]")
    assert reward == 0.0 and "expected 'GetUserToken'" in info["error"]
    reward, info = _score(task, "I cannot help with that.")
    assert reward == 0.0 and info["error"]
    # the same call as JSON in a <tool_call> block scores like the benchmark's own format
    payload = json.dumps({"name": "GetUserToken", "arguments": args})
    assert _score(task, f"<tool_call>{payload}</tool_call>")[0] == 1.0


def test_official_protocol_compares_free_text_by_word_overlap():
    task = _task(1, "official", lambda t: t.gold["name"] == "AddAgenda")
    args = dict(task.gold["arguments"])
    words = args["content"].split(" ")
    close = " ".join(words + ["today"]) if len(words) >= 3 else args["content"]
    assert _score(task, f"API-Request: [{ToolCall('AddAgenda', {**args, 'content': close}).to_python()}]")[0] == 1.0
    unrelated = {**args, "content": "completely different words here now"}
    reward, info = _score(task, f"API-Request: [{ToolCall('AddAgenda', unrelated).to_python()}]")
    assert reward == 0.0 and "content" in info["error"]
    other_time = {**args, "time": "2023-01-01 00:00:00"}
    assert _score(task, f"API-Request: [{ToolCall('AddAgenda', other_time).to_python()}]")[0] == 0.0


def test_earlier_calls_of_the_dialogue_are_replayed():
    """Some gold calls only succeed in the state the dialogue's earlier calls leave (e.g. the second
    ForgotPassword step, a query of an appointment registered before): the gold policy wins them through replay."""
    depends = []
    for task in load_api_bank_tasks(1, "official") + load_api_bank_tasks(2, "official"):
        if not task.metadata["replay"]:
            continue
        fresh = make_runtime(ROOT, "lv12", reading="lenient").execute(task.gold["name"], task.gold["arguments"])
        predicted, gold, _ = execute_in_context(task, ToolCall(task.gold["name"], task.gold["arguments"]), ROOT)
        assert predicted == gold
        if fresh["exception"] and gold["exception"] is None:
            depends.append(task)
    assert depends
    if FULL_DATA:
        assert {t.gold["name"] for t in depends} >= {"ForgotPassword", "QueryRegistration"}
    for task in depends:
        assert _score(task, APIBankEnv.gold_text(task))[0] == 1.0


def test_level2_toolsearcher_retrieves_from_the_catalogue():
    task = _task(2, "official", lambda t: t.gold["name"] == "ToolSearcher")
    reward, info = _score(task, APIBankEnv.gold_text(task))
    assert reward == 1.0 and info["result"]["output"]
    runtime = make_runtime(ROOT, "lv12", reading="lenient")
    found = runtime.execute("ToolSearcher", {"keywords": "check the balance of my bank account"})["output"]
    assert [d["name"] for d in found] == ["GetUserToken", "QueryBalance"]  # token APIs come with GetUserToken
    assert runtime.execute("ToolSearcher", {"keywords": "  "})["exception"]


def test_official_and_lenient_readings():
    """Official: of several <tool_call> blocks only the last is read (ToolRL), each argument compared as the
    gold API's released checker compares it; lenient: every block, surrounding white space ignored."""
    task = _task(1, "toolrl", lambda t: bool(t.gold["arguments"]))
    gold = json.dumps({"name": task.gold["name"], "parameters": task.gold["arguments"]})
    other = json.dumps({"name": "ToolSearcher", "parameters": {"keywords": "nothing"}})
    for blocks, official, lenient in (([gold, other], 0.0, 1.0), ([other, gold], 1.0, 1.0)):
        text = "\n".join(f"<tool_call>\n{b}\n</tool_call>" for b in blocks)
        for parsing, want in (("official", official), ("lenient", lenient)):
            env = TextActionWrapper(APIBankEnv(tasks=[task], parsing=parsing))
            env.reset(options={"task_index": 0})
            assert env.step(text)[1] == want, (parsing, blocks[0] == gold)
    # a padded id: the released CancelRegistration checker strips it, so both readings accept it
    task = _task(1, "official", lambda t: t.gold["name"] == "CancelRegistration")
    padded = f"API-Request: [CancelRegistration(appointment_id=' {task.gold['arguments']['appointment_id']} ')]"
    # a padded alarm time: the released AddAlarm checker compares inputs raw, so only the lenient reading accepts it
    alarm = _task(1, "official", lambda t: t.gold["name"] == "AddAlarm")
    args = {**alarm.gold["arguments"], "time": f" {alarm.gold['arguments']['time']} "}
    raw = f"API-Request: [{ToolCall('AddAlarm', args).to_python()}]"
    for case, text, official, lenient in ((task, padded, 1.0, 1.0), (alarm, raw, 0.0, 1.0)):
        for parsing, want in (("official", official), ("lenient", lenient)):
            env = TextActionWrapper(APIBankEnv(tasks=[case], parsing=parsing))
            env.reset(options={"task_index": 0})
            _, reward, _, _, info = env.step(text)
            assert reward == want, (case.gold["name"], parsing, info["error"])


def test_official_reading_reads_numbers_as_the_released_tool_manager():
    """``tool_manager.py``: an int string must be ``isdigit()``, a float string after removing one dot, a bool
    string is true only as ``'True'``; the lenient reading takes what Python takes."""
    from genenv.benchmarks.api_bank.apis.base import ApiError, convert_argument

    assert convert_argument("40.7128", "float", "latitude", "official") == 40.7128
    for value, kind in ((" 40.7128 ", "float"), ("-3", "int"), (" 7", "int"), ("1e3", "float")):
        with pytest.raises(ApiError, match="released ToolManager"):
            convert_argument(value, kind, "x", "official")
        assert convert_argument(value, kind, "x", "lenient") == (float if kind == "float" else int)(value)
    assert [convert_argument(v, "bool", "on", "official") for v in ("True", "true", "yes", True)] == \
        [True, False, False, True]
    assert convert_argument(" Emily ", "str", "name", "official") == " Emily "
    assert convert_argument(" Emily ", "str", "name", "lenient") == "Emily"


AGREEMENT_FILE = Path(__file__).resolve().parents[1] / "lab" / "figures" / "api_bank_agreement.json"


def test_official_reading_agrees_with_the_released_checkers_per_api():
    """Per API and per perturbation (padded, re-cased, spaces removed or added, replaced): our official verdict
    (`genenv.benchmarks.api_bank.agreement`) equals the released evaluator's recorded in the shipped agreement
    study (``lab/benches/api_bank_agreement.py``), one case per (API, perturbation, verdict); the only
    disagreements are the study's listed ones, each on a task whose dialogue's earlier calls we replay and the
    released evaluator does not."""
    from genenv.benchmarks.api_bank.agreement import ARGUMENT_CASES, case_reward, case_text

    study = json.loads(AGREEMENT_FILE.read_text())
    assert {lv: f["agreement/official"] >= f["agreement/lenient"] for lv, f in study["figures"].items()} == \
        {"level-1": True, "level-2": True, "level-3": True}
    tasks = {t.id: t for level in (1, 2, 3) for t in load_api_bank_tasks(level, "official")}
    known = {(d["task_id"], d["variant"]) for d in study["disagreements"]}
    assert all(tasks[t].metadata["replay"] for t, _ in known if t in tasks)
    picked: dict[tuple, tuple] = {}
    for task_id, verdicts in study["cases"].items():
        for variant, verdict in verdicts.items():
            if task_id in tasks:
                kind = variant.split(":")[0]  # an argument left out or emptied: one case per API and argument
                key = (tasks[task_id].gold["name"], variant if kind in ARGUMENT_CASES else kind, verdict)
                picked.setdefault(key, (task_id, variant, verdict))
    assert len(picked) >= (200 if FULL_DATA else 10)
    wrong = []
    for task_id, variant, verdict in picked.values():
        got = case_reward(tasks[task_id], case_text(tasks[task_id], variant), "official") == 1.0
        if got != (verdict != ((task_id, variant) in known)):
            wrong.append((task_id, variant, verdict, got))
    assert not wrong, wrong[:5]
    kinds = collections.Counter(k[1].split(":")[0] for k in picked)
    assert {"gold", "pad", "upper", "lower", "nospace", "wrong", "omit", "empty"} <= set(kinds), kinds


def test_a_required_argument_left_out_or_empty_scores_0_under_both_readings():
    """The released ``DeleteAgenda.call(token, content, time, location)`` has no defaults: without ``location``, or
    with it empty (the released parser drops ``''``), the call raises TypeError there (MISS_INPUT_ARGUMENT); it
    scores 0 here under both readings, with that reason. An argument the released ``call`` gives a default
    (ModifyRegistration's new date or doctor) may be left out."""
    task = _task(1, "official", lambda t: t.gold["name"] == "DeleteAgenda")
    gold = task.gold["arguments"]
    without = {k: v for k, v in gold.items() if k != "location"}
    texts = {"gold": ToolCall("DeleteAgenda", gold), "left out": ToolCall("DeleteAgenda", without),
             "empty": ToolCall("DeleteAgenda", {**without, "location": ""})}
    for parsing in ("official", "lenient"):
        for case, call in texts.items():
            env = TextActionWrapper(APIBankEnv(tasks=[task], parsing=parsing))
            env.reset(options={"task_index": 0})
            _, reward, _, _, info = env.step(f"API-Request: [{call.to_python()}]")
            assert reward == (1.0 if case == "gold" else 0.0), (parsing, case, info["error"])
            if case != "gold":
                assert info["error"].startswith("MISS_INPUT_ARGUMENT") and "'location'" in info["error"]
    blank = ToolCall("DeleteAgenda", {**without, "location": "  "})  # white space only: lenient empties it
    errors = []
    for parsing in ("official", "lenient"):
        env = APIBankEnv(tasks=[task], parsing=parsing)
        env.reset(options={"task_index": 0})
        errors.append(env.step([blank])[4]["error"])
    assert [e.startswith("MISS_INPUT_ARGUMENT") for e in errors] == [False, True], errors
    runtime = make_runtime(ROOT, "lv12", reading="lenient")
    record = runtime.execute("ModifyRegistration", {"appointment_id": "90123456"})
    assert not str(record["exception"] or "").startswith("MISS_INPUT_ARGUMENT")


@pytest.mark.parametrize("suite", ["lv12", "lv3"])
def test_every_backend_runs_on_the_required_arguments_alone(suite):
    """Our backends take what the released classes take: every argument the released ``call`` may go without
    (``checks.CHECKS``' ``optional``) has a default in our ``run``, every parameter of ``run`` without one is a
    declared input parameter, and every API has a table entry."""
    import inspect

    from genenv.benchmarks.api_bank.apis.base import API_CLASSES
    from genenv.benchmarks.api_bank.apis.checks import CHECKS

    runtime = make_runtime(ROOT, suite, reading="lenient")
    for name, cls in API_CLASSES[suite].items():
        assert name in CHECKS[suite], name
        declared = list(runtime.catalogue.get(name, {}).get("input_parameters", {}))
        params = list(inspect.signature(cls.run).parameters.values())[2:]  # after self, rt
        no_default = {p.name for p in params if p.default is inspect.Parameter.empty}
        assert not no_default & set(CHECKS[suite][name].optional), (name, no_default)
        if declared:  # the packaged sample's catalogue describes only the APIs its tasks call
            assert no_default <= set(declared) and set(CHECKS[suite][name].optional) <= set(declared), name


def test_toolrl_protocol_is_exact_match():
    task = _task(3, "toolrl", lambda t: any(isinstance(v, str) and v.isdigit() for v in t.gold["arguments"].values()))
    name, args = task.gold["name"], dict(task.gold["arguments"])
    key = next(k for k, v in args.items() if isinstance(v, str) and v.isdigit())
    typed = {**args, key: int(args[key])}  # ToolRL's gold holds the string: an int is a different parameter value
    line = json.dumps({"name": name, "parameters": typed})
    assert _score(task, f"<tool_call>\n{line}\n</tool_call>")[0] == 0.0
    other = json.dumps({"name": "Other", "parameters": {}})
    both = f"<tool_call>\n{other}\n{json.dumps({'name': name, 'parameters': args})}\n</tool_call>"
    assert _score(task, both)[0] == 1.0  # any predicted call may match (ToolRL's soft rule)


def test_fuzzed_api_calls_never_raise():
    rng = random.Random(0)
    tasks = (load_api_bank_tasks(1, "official")[:12] + load_api_bank_tasks(2, "official")[:6]
             + load_api_bank_tasks(3, "official")[:6] + load_api_bank_tasks(1, "toolrl")[:6])
    envs = {t.id: APIBankEnv(tasks=[t]) for t in tasks}
    noise = ["'", '"', "(", ")", "[", "]", "=", ",", "\\", "\x00", "{", "}", "__import__('os')", "1e999",
             "9" * 400, "None", "True", "[[[[", "-", "**", "lambda: 0", "\n"]
    texts = []
    for i in range(1200):
        task = tasks[i % len(tasks)]
        gold = APIBankEnv.gold_text(task)
        kind = i % 6
        if kind == 0:
            text = gold[: rng.randrange(len(gold) + 1)]
        elif kind == 1:
            pos = rng.randrange(len(gold) + 1)
            text = gold[:pos] + rng.choice(noise) + gold[pos:]
        elif kind == 2:
            text = gold.replace("'", rng.choice(['"', "", "''", "`"]))
        elif kind == 3:
            name = task.gold["name"]
            text = f"API-Request: [{name}({rng.choice(noise)}={rng.choice(noise)!r}, x={rng.randint(-9, 9)})]"
        elif kind == 4:
            text = "".join(rng.choice(noise) for _ in range(rng.randint(1, 30)))
        else:
            args = {k: rng.choice([None, [], {}, 3.5, -1, True, "", "x" * 300]) for k in task.gold["arguments"]}
            text = json.dumps({"name": task.gold["name"], "arguments": args})
        texts.append((task, text))
    for task, text in texts:
        env = envs[task.id]
        env.reset(options={"task_index": 0})
        _, reward, terminated, _, info = env.step(env.parse_lenient(text))
        assert terminated and reward in (0.0, 1.0)
        assert reward == 1.0 or info["error"], text


def test_generated_tasks_are_admitted_only_when_the_call_executes():
    spec = get_benchmark("api_bank", DATA_DIR)
    parent = _task(1, "official", lambda t: spec.demonstrable(t))
    ok = {"dialogue": "User: What is the price of AAPL stock on 2022-01-05?\nAI: Let me check.",
          "call": {"name": "QueryStock", "arguments": {"stock_code": "AAPL", "date": "2022-01-05"}}}
    task = spec.parse_generated(json.dumps(ok), "gen-0-0", 0, parent)
    assert task.origin == "generated" and task.gold["name"] == "QueryStock"
    assert "QueryStock" in task.metadata["system"] and task.metadata["system"].startswith(
        parent.metadata["system"].split("API descriptions:")[0])
    assert _score(task, APIBankEnv.gold_text(task))[0] == 1.0  # its gold wins through the env
    cases = {
        "missing_fields": {"dialogue": "no user line", "call": ok["call"]},
        "unknown_api": {**ok, "call": {"name": "LaunchRocket", "arguments": {}}},
        "bad_arguments": {**ok, "call": {"name": "QueryStock", "arguments": {"ticker": "AAPL"}}},
        "execution_error": {**ok, "call": {"name": "QueryStock", "arguments": {"stock_code": "AAPL",
                                                                             "date": "1999-01-01"}}},
    }
    for reason, obj in cases.items():
        rejection = spec.parse_generated(json.dumps(obj), "gen-0-1", 0, parent)
        assert getattr(rejection, "reason", None) == reason, (reason, rejection)
        assert reason in spec.all_rejection_reasons


def test_metrics_units_and_headline():
    spec = get_benchmark("api_bank", DATA_DIR)
    units = spec.eval_units({})
    assert [u for u, _ in units] == [f"api_bank/{p}/level-{lv}" for p in ("official", "toolrl") for lv in (1, 2, 3)]
    assert spec.eval_units({"protocol": "toolrl", "level": "1,3"})[1][1] == {"protocol": "toolrl", "level": 3}
    from genenv.benchmarks.spec import Metric

    metrics = [Metric("api_bank/toolrl/level-1/accuracy", 0.5, 10, ""), Metric("api_bank/toolrl/level-2/accuracy",
                                                                                1.0, 30, "")]
    head = spec.headline(metrics)
    assert head.key == "api_bank/toolrl/pooled_accuracy" and head.value == pytest.approx(35 / 40) and head.n == 40
    assert spec.paper_metric(metrics) is None  # the paper pools levels 1-3
    full = spec.paper_metric(metrics + [Metric("api_bank/toolrl/level-3/accuracy", 0.0, 10, "")])
    assert full.key == head.key and full.value == pytest.approx(35 / 50)


# ---------- level 3 as episodes (genenv/APIBankPlan-v0) ----------
def _play(env, task, texts):
    env.reset(options={"task_id": task.id})
    info, reward = {}, 0.0
    for text in texts:
        obs, reward, terminated, truncated, info = env.step(env.parse_lenient(text))
        if terminated or truncated:
            return reward, info, obs
    return reward, info, obs


def test_plan_gold_policy_wins_every_episode():
    from genenv.benchmarks.api_bank.plan_env import APIBankPlanEnv

    env = APIBankPlanEnv(max_steps=12)
    for task in env.tasks:
        reward, info, _ = _play(env, task, APIBankPlanEnv.gold_action(task))
        assert reward == 1.0 and info["matched"] == info["gold_calls"] > 0, (task.id, info)
        assert info["rouge_l"] == pytest.approx(1.0)  # the reference response as the answer
    if FULL_DATA:
        assert len(env.tasks) == 50


def test_plan_episode_rules():
    from genenv.benchmarks.api_bank.plan_env import APIBankPlanEnv

    env = APIBankPlanEnv(max_steps=12)
    task = env.tasks[0]
    gold = APIBankPlanEnv.gold_action(task)
    first_api = next(c for c in task.gold if c["name"] != "ToolSearcher")
    direct = f"API-Request: [{ToolCall(first_api['name'], first_api['arguments']).to_python()}]"
    env.reset(options={"task_id": task.id})
    obs, reward, terminated, _, info = env.step(env.parse_lenient(direct))  # not retrieved yet: refused
    assert "find it with ToolSearcher first" in obs and info["matched"] == 0 and not terminated
    # answering before the calls are made ends the episode unsolved, with a ROUGE-L for the answer
    obs, reward, terminated, _, info = env.step(env.parse_lenient("I could not do it."))
    assert terminated and reward == 0.0 and info["matched"] == 0 and 0.0 <= info["rouge_l"] < 0.5
    # all calls but the last, then the step limit: truncated and scored as unsolved
    short = APIBankPlanEnv(max_steps=len(task.gold) - 1)
    reward, info, _ = _play(short, task, gold[: len(task.gold) - 1])
    assert reward == 0.0 and info["matched"] < info["gold_calls"] and info["steps"] == len(task.gold) - 1


def test_plan_generation_executes_the_sequence():
    spec = get_benchmark("api_bank_plan", DATA_DIR)
    ok = {"requirement": "Find the weather in Paris.", "calls": [
        {"name": "Geocoding", "arguments": {"address": "Paris"}},
        {"name": "GetWeatherForCoordinates", "arguments": {"latitude": 48.8566, "longitude": 2.3522}}]}
    task = spec.parse_generated(json.dumps(ok), "gen-0-0", 0, None)
    assert [c["name"] for c in task.gold] == ["ToolSearcher", "Geocoding", "ToolSearcher", "GetWeatherForCoordinates"]
    from genenv.benchmarks.api_bank.plan_env import APIBankPlanEnv

    reward, info, _ = _play(APIBankPlanEnv(tasks=[task]), task, APIBankPlanEnv.gold_action(task))
    assert reward == 1.0 and info["matched"] == 2
    bad = {**ok, "calls": [{"name": "Geocoding", "arguments": {"address": "Atlantis"}}]}
    assert spec.parse_generated(json.dumps(bad), "gen-0-1", 0, None).reason == "execution_error"
    assert spec.parse_generated(json.dumps({**ok, "calls": [{"name": "Nope", "arguments": {}}]}), "g", 0,
                                None).reason == "unknown_api"


# ---------- response turns (genenv/APIBankResponse-v0) ----------
def test_response_turns_score_rouge_l():
    from genenv.benchmarks.api_bank.response_env import APIBankResponseEnv, load_response_tasks

    counts = {lv: len(load_response_tasks(lv)) for lv in (1, 2, 3)}
    if FULL_DATA:
        assert counts == {1: 375, 2: 103, 3: 50}
    env = APIBankResponseEnv(level=1)
    for i, task in enumerate(env.tasks):
        env.reset(options={"task_index": i})
        _, reward, _, _, info = env.step(env.parse_lenient(env.gold_text(task)))
        assert reward == pytest.approx(1.0) and info["success"]
    task = env.tasks[0]
    env.reset(options={"task_index": 0})
    half = " ".join(task.gold.split()[: max(1, len(task.gold.split()) // 2)])
    _, reward, _, _, info = env.step(env.parse_lenient(f"AI: {half}"))  # the "AI:" prefix is not part of the reply
    assert 0.0 < reward < 1.0 and reward == info["rouge_l"]
    env.reset(options={"task_index": 0})
    _, reward, _, _, info = env.step(env.parse_lenient("AI: ..."))
    assert reward == 0.0 and info["error"]
    f1_env = APIBankResponseEnv(tasks=[task], metric="f1")  # the trainer's configured free-text metric
    f1_env.reset(options={"task_index": 0})
    _, reward, _, _, info = f1_env.step(half)
    assert 0.0 < reward < 1.0 and info["rouge_l"] > 0.0


def test_response_generation_runs_the_request_on_the_backend():
    spec = get_benchmark("api_bank_response", DATA_DIR)
    ok = {"dialogue": "User: What was AAPL worth on 2022-01-05?\nAI: Let me check.\n"
                      "API-Request: [QueryStock(stock_code='AAPL', date='2022-01-05')]",
          "response": "AAPL closed at 182.6 on January 5th, 2022."}
    task = spec.parse_generated(json.dumps(ok), "gen-0-0", 0, None)
    assert task.prompt.splitlines()[-2].endswith("]->182.6")  # the result comes from the backend
    assert task.gold == ok["response"] and task.action_kind == "free_text"
    bad = {**ok, "dialogue": ok["dialogue"].replace("2022-01-05')", "1999-01-01')")}
    assert spec.parse_generated(json.dumps(bad), "g", 0, None).reason == "execution_error"
    assert spec.parse_generated(json.dumps({**ok, "dialogue": "User: hi"}), "g", 0, None).reason == "no_api_request"
    long = {**ok, "response": "word " * 100}
    assert spec.parse_generated(json.dumps(long), "g", 0, None).reason == "response_too_long"
