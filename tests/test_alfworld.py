"""ALFWorld: the real games through alfworld + textworld, both protocols, goal progress, generated goals, episodes
in worker processes, the prompt window. Runs on ``$GENENV_DATA_DIR`` (CI: the full data) or the packaged games.
The whole-split gold-policy runs (all 274 validation games) are ``slow``; the closing note reports them."""
from __future__ import annotations

import json
import os
import re

import pytest
from alfworld.gen.goal_library import gdict

from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.task_writer import Rejection
from genenv.envs import TextActionWrapper
from genenv.benchmarks.alfworld.env import SPLITS, ALFWorldEnv, load_alfworld_tasks
from genenv.benchmarks.alfworld.files import TASK_TYPES, folder_goal, read_game, task_sentence
from genenv.benchmarks.alfworld.game import PARSERS, game_record
from genenv.benchmarks.alfworld.feasible import feasible_goals, translator_verdict
from genenv.benchmarks.alfworld.goals import GOAL_SLOTS, goal_pddl, goal_sentence, scene_inventory, with_goal
from genenv.envs.workers import LocalEpisodes, ProcessEpisodes
from genenv.envs.text_games import admissible_commands
from genenv.envs.wrappers import make_text_env
from genenv.runtime.episodes import RolloutSpec, play_episodes
from genenv.runtime.policies import GoldPolicy

from conftest import DATA_DIR

SPEC = get_benchmark("alfworld", DATA_DIR)


def one_per_type(split: str, protocol: str = "episodic"):
    return load_alfworld_tasks(split, data_dir=DATA_DIR, protocol=protocol, per_type=1)


def play(env, task, commands):
    obs, info = env.reset(options={"task_id": task.id})
    out = []
    for command in commands:
        out.append(env.step(command))
        if out[-1][2] or out[-1][3]:
            break
    return obs, out


def test_goal_grammar_reproduces_every_real_goal():
    """ALFWorld's goal library, filled from the folder name, gives each game's own PDDL goal and sentence."""
    norm = " ".join
    n = 0
    for split in SPLITS:
        for task in load_alfworld_tasks(split, data_dir=DATA_DIR):
            data, goal = read_game(task.metadata["game_file"]), task.metadata["goal"]
            own = data["pddl_problem"][data["pddl_problem"].index("(:goal"):]
            assert norm(own.lower().split()) == norm(goal_pddl(goal).lower().split()), task.id
            fill = {"obj": goal["object"].lower(), "recep": goal["receptacle"].lower(),
                    "toggle": goal["toggle"].lower(), "mrecep": ""}
            assert task_sentence(data["grammar"]) in {t.format(**fill) + "." for t in gdict[goal["task_type"]]["templates"]}
            n += 1
    assert n >= 24


def test_loader_splits_protocols_and_errors():
    episodic = load_alfworld_tasks("valid_unseen", data_dir=DATA_DIR)
    assert load_alfworld_tasks("test", data_dir=DATA_DIR) == episodic  # alias
    assert {t.metadata["task_type"] for t in episodic} == set(TASK_TYPES)
    steps = load_alfworld_tasks("valid_unseen", data_dir=DATA_DIR, protocol="single_step")
    assert len(steps) == sum(len(t.gold) for t in episodic)
    assert [s.gold for s in steps if s.id.startswith(episodic[0].id + "#")] == episodic[0].gold
    assert all(t.metadata["task_type"] == "pick_two_obj_and_place"
               for t in load_alfworld_tasks("valid_seen", data_dir=DATA_DIR, task_types="pick_two_obj_and_place"))
    for bad in ({"split": "dev"}, {"protocol": "chat"}, {"task_types": "fly"}):
        with pytest.raises(ValueError):
            load_alfworld_tasks(**{"split": "valid_unseen", "data_dir": DATA_DIR, **bad})
    with pytest.raises(Exception, match="not <task_type>"):
        folder_goal("not-a-game")


def test_walkthrough_never_shown_and_gold_policy_wins_every_task_type():
    env = TextActionWrapper(ALFWorldEnv(tasks=one_per_type("valid_unseen") + one_per_type("valid_seen")))
    for task in env.unwrapped.tasks:
        obs, steps = play(env, task, task.gold)
        prompt = " ".join(m["content"] for m in ALFWorldEnv.render_messages(task))
        assert "Your task is to:" in obs and "Valid actions:" in obs
        assert not all(c in prompt for c in task.gold[1:])  # the later expert commands are not revealed
        _, reward, terminated, truncated, info = steps[-1]
        assert reward == 1.0 and terminated and not truncated and info["won"] and info["success"], task.id
        assert info["steps"] == len(task.gold) and info["goal_progress"] == 1.0
        assert info["task_type"] == task.metadata["task_type"]


def test_bad_commands_get_an_observation_and_truncation_reports_progress():
    task = one_per_type("valid_unseen")[0]
    env = TextActionWrapper(ALFWorldEnv(tasks=[task], max_steps=3, parsing="lenient"))
    obs, steps = play(env, task, ["fly to the moon", "", "look"])
    (o1, r1, t1, tr1, i1), (o2, r2, t2, tr2, i2), (o3, r3, t3, tr3, i3) = steps
    assert "is not a valid action here" in o1 and "Valid actions:" in o1 and "not an admissible" in i1["error"]
    assert "Invalid action" in o2 and i2["error"]
    assert (r1, r2, r3) == (0.0, 0.0, 0.0) and not (t1 or t2 or tr1 or tr2)
    assert tr3 and not t3 and i3["steps"] == 3 and 0.0 <= i3["goal_progress"] < 1.0


def loose_forms(command: str) -> list[str]:
    """The loosely written forms of ``command`` that ALFWorld's own game answers with "Nothing happens."."""
    return [command.capitalize() + ".", "> " + command, f'"{command}"', f"`{command}`", f"ACTION: {command}",
            f"Think: I should move.\nAction: {command}", f"<answer>{command}</answer>",
            f"{command}\nI go there because the task needs it."]


def test_official_reading_sends_the_raw_text_to_the_game():
    """parsing=official: loose forms are not executed (the game's own "Nothing happens.", state unchanged);
    surrounding white space is fine (TextWorld strips). parsing=lenient executes every form."""
    task = one_per_type("valid_unseen")[0]
    command = task.gold[0]
    for parsing in ("official", "lenient"):
        env = TextActionWrapper(ALFWorldEnv(tasks=[task], parsing=parsing))
        executed = []
        for text in loose_forms(command) + [f"  {command}\n"]:
            start, _ = env.reset(options={"task_id": task.id})
            obs, reward, terminated, truncated, info = env.step(text)
            if parsing == "official" and text.strip() != command:
                assert obs.startswith("Nothing happens.") and info["executed"] == 0, text
                assert "not exactly an admissible command" in info["error"], text
                assert env.unwrapped.admissible == admissible_commands(start), text  # the state did not change
            else:
                assert not obs.startswith("Nothing happens.") and not info["error"], (parsing, text)
                assert info["command"] == command and info["executed"] == 1
            executed.append(info["executed"])
        assert executed == ([0] * 8 + [1] if parsing == "official" else [1] * 9)
        env.close()


def test_goal_progress_counts_met_conditions():
    """A clean-and-place task: cleaning the object meets one of its two fluent conditions."""
    task = next(t for t in load_alfworld_tasks("valid_unseen", data_dir=DATA_DIR)
                if t.metadata["task_type"] == "pick_clean_then_place_in_recep")
    clean_at = next(i for i, c in enumerate(task.gold) if c.startswith("clean "))
    env = TextActionWrapper(ALFWorldEnv(tasks=[task], max_steps=clean_at + 1))
    _, steps = play(env, task, task.gold[:clean_at + 1])
    assert steps[-1][3] and steps[-1][4]["goal_progress"] == 0.5
    for parsing in ("official", "lenient"):  # an episode that ends on text the game does not play still reports it
        for last in ("dance", ""):
            env = TextActionWrapper(ALFWorldEnv(tasks=[task], max_steps=clean_at + 2, parsing=parsing))
            _, steps = play(env, task, task.gold[:clean_at + 1] + [last])
            assert steps[-1][3] and steps[-1][4]["error"] and steps[-1][4]["goal_progress"] == 0.5, (parsing, last)


def test_single_step_protocol_exact_match():
    tasks = one_per_type("valid_seen", "single_step")
    env = TextActionWrapper(ALFWorldEnv(tasks=tasks))
    for task in tasks[:12]:
        obs, info = env.reset(options={"task_id": task.id})
        step = task.metadata["step"]
        record = game_record(task)
        assert obs.startswith(record["feedback"][step - 1].strip() if step else record["intro"].strip())
        assert [m["content"] for m in info["messages"] if m["role"] == "assistant"][1:] == \
            task.metadata["walkthrough"][:step]  # the trajectory so far (after the demonstrated turn)
        _, reward, terminated, truncated, info2 = env.step(task.gold)
        assert reward == 1.0 and info2["success"] and (terminated or truncated)
        wrong = next(c for c in record["admissible"][step] if c != task.gold)
        env.reset(options={"task_id": task.id})
        _, reward, *_, info3 = env.step(wrong)
        assert reward == 0.0 and not info3["success"] and info3["error"] == ""
        env.reset(options={"task_id": task.id})
        _, reward, _, truncated, info4 = env.step("dance")
        assert reward == 0.0 and truncated and "not exactly an admissible" in info4["error"]
        lenient = TextActionWrapper(ALFWorldEnv(tasks=[task], parsing="lenient"))
        for text in loose_forms(task.gold):  # read by the lenient parser, never by the official harness
            for reader, want in ((env, 0.0), (lenient, 1.0)):
                reader.reset(options={"task_id": task.id})
                assert reader.step(text)[1] == want, (want, text)


def parent_with_goal(task_type: str = "pick_and_place_simple"):
    return next(t for t in load_alfworld_tasks("train", data_dir=DATA_DIR) if t.metadata["task_type"] == task_type)


def initial_placement(game_file: str) -> tuple[str, str]:
    """An (object type, receptacle type) pair the scene's initial state already satisfies."""
    problem = read_game(game_file)["pddl_problem"]
    types = dict(re.findall(r"\((?:objectType|receptacleType)\s+(\S+)\s+(\w+?)Type\)", problem))
    obj, recep = re.search(r"\(inReceptacle\s+(\S+)\s+(\S+)\)", problem).groups()
    return types[obj], types[recep]


def test_generated_goals_are_validated_by_the_planner():
    parent = parent_with_goal()
    inv = scene_inventory(read_game(parent.metadata["game_file"]))
    gen = lambda obj: SPEC.parse_generated(json.dumps(obj), "gen-t", 3, parent)  # noqa: E731
    assert gen({"task_type": "fly", "object": "Mug"}).reason == "unknown_task_type"
    assert gen({"task_type": "pick_and_place_simple", "object": "Unicorn", "receptacle": inv["receptacles"][0]}
               ).reason == "object_not_in_scene"
    assert gen({"task_type": "pick_and_place_simple", "object": inv["objects"][0]}).reason == "missing_fields"
    obj, recep = initial_placement(parent.metadata["game_file"])
    assert gen({"task_type": "pick_and_place_simple", "object": obj, "receptacle": recep}).reason == \
        "already_satisfied"
    own = parent.metadata["goal"]
    admitted = None
    for recep in inv["receptacles"]:  # the parent's own object into another receptacle type
        if recep == own["receptacle"]:
            continue
        out = gen({"task_type": "pick_and_place_simple", "object": own["object"], "receptacle": recep})
        assert isinstance(out, Rejection) and out.reason in SPEC.all_rejection_reasons or not isinstance(out, Rejection)
        if not isinstance(out, Rejection):
            admitted = out
            break
    assert admitted is not None, "no receptacle of the scene admitted the parent's object"
    assert admitted.origin == "generated" and admitted.parent_id == parent.id and admitted.admitted_iteration == 3
    assert admitted.prompt == f"Your task is to: {goal_sentence(admitted.metadata['goal_override'])}"
    env = TextActionWrapper(ALFWorldEnv(tasks=[admitted]))  # the planner's walkthrough wins in the env
    obs, steps = play(env, admitted, admitted.gold)
    assert admitted.prompt in obs and steps[-1][1] == 1.0 and steps[-1][4]["won"]
    assert SPEC.near_duplicate(admitted, [admitted]).reason == "near_duplicate"
    assert SPEC.near_duplicate(admitted, [parent]) is None


def test_the_grammar_offers_the_feasible_goals_of_the_scene_and_the_planner_agrees():
    """Every real training goal is feasible in its own scene (the grammar leaves none out); goals outside the
    feasible set are ones the planner refuses; a goal the translator proves unreachable (no ``canContain`` for the
    pair, where TextWorld fails with ``KeyError 'val1'``) is ``unsolvable``, not an engine failure."""
    seeds = [t for tt in TASK_TYPES for t in load_alfworld_tasks("train", data_dir=DATA_DIR, per_type=2)
             if t.metadata["task_type"] == tt]
    assert len(seeds) == 12
    for seed in seeds:
        goal = SPEC.as_generation(seed)
        slot = GOAL_SLOTS[goal["task_type"]][1]
        assert goal[slot] in feasible_goals(seed.metadata["game_file"])[goal["task_type"]][goal["object"]], goal
    parent = parent_with_goal()
    data = read_game(parent.metadata["game_file"])
    inv, feasible = scene_inventory(data), feasible_goals(parent.metadata["game_file"])
    placed = feasible["pick_and_place_simple"]
    gen = lambda obj, recep: SPEC.parse_generated(json.dumps(  # noqa: E731
        {"task_type": "pick_and_place_simple", "object": obj, "receptacle": recep}), "gen-t", 1, parent)
    obj, recep = initial_placement(parent.metadata["game_file"])
    assert recep not in placed.get(obj, ()) and gen(obj, recep).reason == "already_satisfied"
    pickupable = {o for o in inv["objects"] if re.search(rf"\(pickupable {o.lower()}_", data["pddl_problem"].lower())}
    never = [(o, r) for o in sorted(pickupable) for r in inv["receptacles"]
             if f"(canContain {r}Type {o}Type)" not in data["pddl_problem"]]
    assert never and all(r not in placed.get(o, ()) for o, r in never)
    refused = gen(*never[0])
    assert refused.reason == "unsolvable" and "translator" in refused.detail, refused
    assert translator_verdict(with_goal(data, {"task_type": "pick_and_place_simple", "object": never[0][0],
                                               "receptacle": never[0][1]}))[0] == "unsolvable"
    assert translator_verdict(data) is None  # the game's own goal: a real planning task
    schema = SPEC.generation_schema([parent])
    offered = {(b["properties"]["object"]["const"], r) for b in schema["anyOf"]
               if b["properties"]["task_type"]["const"] == "pick_and_place_simple"
               for r in b["properties"]["receptacle"]["enum"]}
    assert offered == {(o, r) for o, rs in placed.items() for r in rs} - {(parent.metadata["goal"]["object"],
                                                                           parent.metadata["goal"]["receptacle"])}


def test_generation_prompt_names_the_parent_scene():
    seeds = load_alfworld_tasks("train", data_dir=DATA_DIR)[:2]
    messages = SPEC.generation_messages(seeds, 0.25, 0.5)
    assert messages[-1]["content"].count("Scene: objects") == 1
    assert SPEC.describe_scene(seeds[0]) in messages[-1]["content"]
    assert json.loads(messages[2]["content"]) == SPEC.as_generation(seeds[0])


def test_worker_processes_match_in_process_and_respect_the_budget():
    tasks = one_per_type("valid_unseen")[:4]
    items = [(i, t, {"max_steps": 6}) for i, t in enumerate(tasks)]
    local, procs = LocalEpisodes(), ProcessEpisodes(workers=2)
    try:
        assert len(procs.processes()) <= 2
        assert [o for o, _ in local.open(items)] == [o for o, _ in procs.open(items)]
        for turn in range(3):
            actions = [(i, t.gold[turn] if turn < len(t.gold) else "look") for i, t in enumerate(tasks)]
            a, b = local.step(actions), procs.step(actions)
            assert [(o, r, te, tr, i["success"]) for o, r, te, tr, i in a] == \
                [(o, r, te, tr, i["success"]) for o, r, te, tr, i in b]
        assert len(procs.processes()) <= 2
    finally:
        local.shutdown()
        procs.shutdown()
    trajs = play_episodes(tasks, GoldPolicy(), RolloutSpec(env_workers=2)).trajectories
    assert [t.success for t in trajs] == [True] * len(tasks)


def test_worker_processes_serve_many_threads_and_survive_a_dead_worker():
    """Threads that open and step their own episodes at once (the session server's sessions) get the episodes
    they get alone; a killed worker fails its episodes with ``WorkerDied`` and is replaced."""
    import concurrent.futures
    import os
    import signal

    from genenv.envs.workers import WorkerDied

    tasks = one_per_type("valid_unseen")[:4]
    local = LocalEpisodes()
    alone = {}
    for i, t in enumerate(tasks):
        alone[i] = [local.open([(i, t, {"max_steps": 6})])[0][0]] + [
            o for o, *_ in (local.step([(i, c)])[0] for c in t.gold[:2])]
    local.shutdown()
    procs = ProcessEpisodes(workers=2)
    try:
        def play(i):
            first = procs.open([(i, tasks[i], {"max_steps": 6}, 0)])[0][0]
            return [first] + [procs.step([(i, c)])[0][0] for c in tasks[i].gold[:2]]

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            together = dict(zip(range(4), pool.map(play, range(4))))
        assert together == alone
        victim = procs.processes()[0]
        on_victim = [i for i, w in procs._where.items() if procs._workers[w]["proc"] is victim]
        assert on_victim
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(10)
        with pytest.raises(WorkerDied, match="died"):
            procs.step([(on_victim[0], "look")])
        assert len(procs.processes()) == 2 and victim not in procs.processes()
        for i in on_victim[1:]:
            with pytest.raises(WorkerDied):
                procs.step([(i, "look")])
        survivors = [i for i in range(4) if i not in on_victim]
        assert all(isinstance(procs.step([(i, "look")])[0][0], str) for i in survivors)
        assert procs.open([(9, tasks[0], {"max_steps": 6})])[0][0] == alone[0][0]  # a fresh worker plays
    finally:
        procs.shutdown()


def test_memoised_parsers_and_shallow_context_copies_give_textworld_s_episodes():
    """Gold episodes played with TextWorld's parses memoised (`_memoise_parsers`) and its text-grammar
    contexts copied shallowly (`_copy_contexts_shallowly`) give the observations and rewards that TextWorld's
    own parsers and deep copies give: one game of each of the six task types, the whole walkthrough."""
    import importlib

    import textworld.envs.pddl.textgen as textgen

    tasks = one_per_type("valid_unseen")

    def episodes():
        out = []
        for t in tasks:
            env = make_text_env([t], {"data_dir": DATA_DIR})
            out.append(env.reset(options={"task_id": t.id})[0])
            out += [env.step(c)[:2] for c in t.gold]
            env.close()
        return out

    ours = episodes()
    modules = [importlib.import_module(name) for name, _ in PARSERS]
    parsers, copy_context = [m._parse_and_convert for m in modules], textgen.copy_context
    assert all(p.memoised.cache_info().misses > 0 for p in parsers) and hasattr(copy_context, "deep")  # all used
    assert len(tasks) == len(TASK_TYPES) and ours[-1][1] == 1.0  # the last walkthrough wins
    for m, p in zip(modules, parsers):
        m._parse_and_convert = p.parse
    textgen.copy_context = copy_context.deep
    try:
        assert episodes() == ours
    finally:
        for m, p in zip(modules, parsers):
            m._parse_and_convert = p
        textgen.copy_context = copy_context


def test_translation_cache_on_disk_gives_the_same_episodes_in_another_process(tmp_path):
    """A game translated once (`translation_cache`, ``$GENENV_CACHE/alfworld/sas``) is read from disk by
    another process, one whose ``sys.argv`` holds arguments fast-downward's option parser does not know (a
    server's), and the gold episode's observations and rewards are the ones a fresh translation gives."""
    import subprocess
    import sys

    task = one_per_type("valid_unseen")[0]
    script = (
        "import json, sys\n"
        "from genenv.envs.wrappers import make_text_env\n"
        "from genenv.benchmarks.alfworld.env import load_alfworld_tasks\n"
        f"task = next(t for t in load_alfworld_tasks('valid_unseen', {str(DATA_DIR)!r}) if t.id == {task.id!r})\n"
        f"env = make_text_env([task], {{'data_dir': {str(DATA_DIR)!r}}})\n"
        "out = [env.reset(options={'task_id': task.id})[0]] + [list(env.step(c)[:2]) for c in task.gold[:5]]\n"
        "print(json.dumps(out))\n")
    env = {**os.environ, "GENENV_CACHE": str(tmp_path)}

    def play() -> list:
        run = subprocess.run([sys.executable, "-c", script, "--port", "8011", "--max-sessions", "4"], env=env,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        return json.loads(run.stdout.splitlines()[-1])

    cold = play()
    written = sorted((tmp_path / "alfworld" / "sas").glob("*.pkl.z"))
    assert len(written) == 2  # the plain and the optimised translation of the one game
    stamps = [p.stat().st_mtime_ns for p in written]
    assert play() == cold
    assert [p.stat().st_mtime_ns for p in written] == stamps  # read, not rewritten
    written[0].write_bytes(b"not a pickle")  # an unreadable file is translated again and rewritten
    assert play() == cold and written[0].read_bytes() != b"not a pickle"


def test_cache_files_are_written_whole_or_not_at_all(tmp_path):
    """`write_atomically` replaces a file in one rename, leaving no temporary file, and reports a folder it
    cannot write (here a path under a plain file) with ``False`` instead of raising."""
    from genenv.benchmarks.alfworld.game import write_atomically

    target = tmp_path / "alfworld" / "x.json"
    assert write_atomically(target, b"one") and write_atomically(target, b"two")
    assert target.read_bytes() == b"two" and [p.name for p in target.parent.iterdir()] == ["x.json"]
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    assert write_atomically(blocked / "y.json", b"z") is False and blocked.read_text() == "not a folder"


def test_prompt_window_keeps_the_goal_and_recent_turns():
    task = one_per_type("valid_unseen")[0]
    env = make_text_env([task])
    head = env.reset()[1]["messages"]
    assert head == ALFWorldEnv.render_messages(task) and env.keep_turns == ALFWorldEnv.prompt_window == 4
    messages = list(head)
    for k in range(6):
        messages += [{"role": "assistant", "content": f"go to shelf {k}"},
                     {"role": "user", "content": f"You arrive at shelf {k}.\n\nValid actions: look, go to bed 1"}]
    env.conversation = messages  # the conversation after six exchanges
    shown = env.prompt()
    assert shown[:len(head) - 1] == head[:-1]
    assert "Your task is to:" in shown[len(head) - 1]["content"] and "Valid actions" not in shown[len(head) - 1]["content"]
    assert [m["content"] for m in shown if m["role"] == "assistant"][1:] == [f"go to shelf {k}" for k in range(2, 6)]
    assert shown[-1] == messages[-1] and all("Valid actions" not in m["content"] for m in shown[len(head):-1])
    assert [m["role"] for m in shown[len(head) - 1:]] == ["user", "assistant"] * 4 + ["user"]


def test_units_metrics_and_headline():
    units = SPEC.eval_units({})
    assert [u for u, _ in units] == ["alfworld/valid_unseen/episodic", "alfworld/valid_unseen/single_step",
                                     "alfworld/valid_seen/episodic", "alfworld/valid_seen/single_step"]
    tasks = one_per_type("valid_unseen", "single_step")
    trajs = play_episodes(tasks, GoldPolicy()).trajectories
    metrics = SPEC.summarize("alfworld/valid_unseen/single_step", trajs)
    assert {m.key for m in metrics} >= {f"alfworld/valid_unseen/single_step/{t}/accuracy" for t in TASK_TYPES}
    head = SPEC.headline(metrics)
    assert head.key == "alfworld/valid_unseen/single_step/accuracy" and head.value == 1.0
    assert "GenEnv paper protocol" in head.protocol


@pytest.mark.slow
@pytest.mark.parametrize("split", ["valid_unseen", "valid_seen"])
def test_gold_policy_wins_every_validation_game(split):
    """Acceptance: the expert walkthrough wins 100 % of the split's games through the env (both protocols)."""
    for protocol in ("episodic", "single_step"):
        tasks = load_alfworld_tasks(split, data_dir=DATA_DIR, protocol=protocol)
        trajs = play_episodes(tasks, GoldPolicy(), RolloutSpec(env_workers=2)).trajectories
        assert all(t.success for t in trajs), [t.task.id for t in trajs if not t.success]


def test_random_admissible_policy_only_plays_listed_commands():
    from genenv.envs.text_games import admissible_commands
    from genenv.runtime.policies import make_policy

    tasks = one_per_type("valid_unseen")[:3]
    policy = make_policy("random:7")
    trajs = play_episodes(tasks, policy, RolloutSpec(env_kwargs={"alfworld": {"max_steps": 5}})).trajectories
    assert all(t.info["turns"] == 5 or t.success for t in trajs)
    for t in trajs:
        observations = [m["content"] for m in t.messages if m["role"] == "user"][1:]  # after the demo turn
        commands = [m["content"] for m in t.messages if m["role"] == "assistant"][1:]
        assert all(c in admissible_commands(o) for o, c in zip(observations, commands))
        assert t.info["error"] == ""
    again = play_episodes(tasks, make_policy("random:7"),
                          RolloutSpec(env_kwargs={"alfworld": {"max_steps": 5}})).trajectories
    assert [t.text for t in again] == [t.text for t in trajs]  # seeded
