"""API-Bank spec: per-level accuracy under the official (execution) and ToolRL (name + parameters) protocols, and
environment-generated API-call tasks.

A generated task is a level-1 style sample: a dialogue in API-Bank's format and the gold call to one real API of
the level-1/2 catalogue. Admission requires (1) strict JSON ``{"dialogue", "call"}``, (2) a known API (not
ToolSearcher), (3) arguments that fit the API's description (names, required parameters, declared types), and
(4) a gold call that executes without exception on a fresh backend (`genenv.benchmarks.api_bank.apis`), and
(5) grounding: every argument value stated in the dialogue (`genenv.benchmarks.grounding`). The format's JSON
Schema names the catalogue's APIs, each with its own parameters and types (`call_schema`).
"""
from __future__ import annotations

import json
import re
from typing import Any, Sequence

from genenv.benchmarks.grounding import ungrounded_arguments
from genenv.benchmarks.spec import BenchmarkSpec, Metric
from genenv.benchmarks.task_writer import Rejection, extract_json_object
from genenv.benchmarks.bounded_schema import array, json_object, number, text
from genenv.benchmarks.api_bank.env import LEVELS, PROTOCOLS, catalogue_for, suite_of
from genenv.benchmarks.api_bank.apis import ApiError, ApiRuntime, make_runtime
from genenv.benchmarks.api_bank.apis.checks import required_missing
from genenv.benchmarks.api_bank.data import api_bank_dir
from genenv.benchmarks.api_bank.plan_env import searcher_description
from genenv.envs.task import Task

__all__ = ["APIBankPlanSpec", "APIBankResponseSpec", "APIBankSpec"]

PROTOCOL_LABELS = {
    "official": "API-Bank official: the call's execution result equals the gold call's (backends re-implemented, "
                "earlier dialogue calls replayed)",
    "toolrl": "ToolRL / GenEnv paper: a predicted call has exactly the gold name and parameters",
}
# Used when a generated task has no seed to copy the benchmark's instruction from (our wording).
INSTRUCTION = ("Generate an API request in the format of [ApiName(key1='value1', key2='value2', ...)] based on the "
               "previous dialogue context.\nThe current year is 2023.\n\nExpected output:\n"
               "API-Request: [ApiName(key1='value1', key2='value2', ...)]\n\nAPI descriptions:\n")
ASK = "Generate API Request:"


def executed_call(runtime: ApiRuntime, name: Any, arguments: Any) -> dict[str, Any] | Rejection:
    """Run a generated gold call on ``runtime``: its result record, or the `Rejection` (``unknown_api``:
    not an API of the runtime's catalogue, or ToolSearcher; ``missing_fields``: arguments not an object;
    ``bad_arguments``: they do not fit the description; ``execution_error``: the backend raised)."""
    if not isinstance(name, str) or name not in runtime.catalogue or name == "ToolSearcher":
        return Rejection("unknown_api", f"{str(name)[:60]!r} is not an API of the catalogue")
    if not isinstance(arguments, dict):
        return Rejection("missing_fields", f"the arguments of {name} must be an object")
    try:
        runtime.convert(name, arguments)
    except ApiError as exc:
        return Rejection("bad_arguments", str(exc)[:200])
    result = runtime.execute(name, arguments)
    if result["exception"] is not None:
        return Rejection("execution_error", f"{name}: {str(result['exception'])[:180]}")
    return result


# Bounds of the generation formats, from the demonstrable level-1 seeds (longest in brackets): a dialogue line
# (245 characters; 130 at the 95th percentile), lines per dialogue (10 for calls, 12 for responses), a string
# argument (88), a reply (227), a level-3 requirement (165) and plan (5 calls).
LINE_CHARS = 256
MAX_LINES = 12
ARGUMENT_CHARS = 96
RESPONSE_CHARS = 256
REQUIREMENT_CHARS = 200
MAX_PLAN_CALLS = 5
# A parameter declared "str" is a string; other declared types take a bounded JSON value (the data writes a list
# as its Python text, "[{'name': ...}]", and numbers as strings or numbers).
_SCALAR = {"anyOf": [text(ARGUMENT_CHARS), number(), {"type": "boolean"}, {"type": "null"}]}
_ANY_VALUE = {"anyOf": [_SCALAR, array({"anyOf": [text(24), number()]}, 4)]}  # level-3 lists: 3 items of 8 at most
# a required parameter is never empty (None, "" or an empty list count as left out: apis.checks.is_empty)
_GIVEN_VALUE = {"anyOf": [text(ARGUMENT_CHARS, 1), number(), {"type": "boolean"},
                          array({"anyOf": [text(24), number()]}, 4, 1)]}


def call_schema(catalogue: dict[str, dict[str, Any]], suite: str) -> dict[str, Any]:
    """JSON Schema of one call ``{"name", "arguments"}`` to an API of ``catalogue`` (ToolSearcher excluded): one
    branch per API with its parameters in the description's order (``str`` parameters bounded strings, others a
    bounded JSON value); the parameters the released ``call`` of ``suite`` (``"lv12"`` / ``"lv3"``) has no default
    for are required and non-empty (`required_missing`), the others
    optional. Execution still checks the values."""
    branches = []
    for name, desc in sorted(catalogue.items()):
        if name == "ToolSearcher":
            continue
        declared = desc.get("input_parameters", {})
        required = set(required_missing(suite, name, list(declared), {}))
        params = {p: (text(ARGUMENT_CHARS, 1 if p in required else 0) if str(d.get("type")) == "str"
                      else _GIVEN_VALUE if p in required else _ANY_VALUE) for p, d in declared.items()}
        branches.append(json_object({"name": {"const": name},
                                     "arguments": json_object(params, optional=tuple(set(params) - required))}))
    return {"anyOf": branches}


def dialogue_schema() -> dict[str, Any]:
    """A dialogue as a list of lines (``"User: ..."``, ``"AI: ..."``, ``"API-Request: [...]"``): bounded lines
    hold no newline, which a bounded JSON string cannot escape (`genenv.benchmarks.bounded_schema`)."""
    return array(text(LINE_CHARS, 1), MAX_LINES, 1)


def dialogue_text(value: Any) -> str | None:
    """The dialogue of a generation: its lines joined by newlines (a single string is taken as written);
    ``None`` when it is neither a list of strings nor a string."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "\n".join(value)
    return None


def ordered_arguments(arguments: dict[str, Any], description: dict[str, Any]) -> dict[str, Any]:
    """``arguments`` in the order of the API's ``input_parameters`` (the order the call schema generates),
    unknown names last."""
    order = list(description.get("input_parameters", {}))
    return dict(sorted(arguments.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))


def _as_list(value: Any, default: Sequence[Any]) -> list[Any]:
    if value in (None, "all"):
        return list(default)
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value) if isinstance(value, (list, tuple)) else [value]


class APIBankSpec(BenchmarkSpec):
    """API-Bank levels 1-3 (Li et al. 2023)."""

    name = "api_bank"
    baseline_column = "api_bank"
    paper_protocol = "ToolRL protocol: per-call API name + parameter match, levels 1-3 pooled"
    paper_options: dict[str, Any] = {"protocol": "toolrl"}
    seed_options: dict[str, Any] = {"level": 1, "protocol": "official"}
    rejection_reasons = ("missing_fields", "unknown_api", "bad_arguments", "execution_error", "ungrounded_value")
    grounding_reasons = ("ungrounded_value",)

    def eval_units(self, options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """One unit per (protocol, level); ``options["protocol"]`` / ``options["level"]``: a value, a comma list,
        or ``"all"`` (default: both protocols, all levels)."""
        protocols = _as_list(options.get("protocol"), PROTOCOLS)
        levels = [int(lv) for lv in _as_list(options.get("level"), LEVELS)]
        rest = {k: v for k, v in options.items() if k not in ("protocol", "level")}
        return [(f"api_bank/{p}/level-{lv}", {**rest, "protocol": p, "level": lv}) for p in protocols for lv in levels]

    def summarize(self, unit: str, trajectories: Sequence[Any]) -> list[Metric]:
        """``<unit>/accuracy`` (the protocol's verdict); official units also ``<unit>/api_match`` (name and
        arguments equal to the gold call, the ToolRL rule applied to the official samples)."""
        n = len(trajectories)
        if n == 0:
            return []
        protocol = unit.split("/")[1] if unit.count("/") >= 2 else "official"
        metrics = [Metric(f"{unit}/accuracy", sum(bool(t.success) for t in trajectories) / n, n,
                          PROTOCOL_LABELS.get(protocol, protocol))]
        if protocol == "official":
            metrics.append(Metric(f"{unit}/api_match", sum(bool(t.info.get("api_match")) for t in trajectories) / n,
                                  n, "name and arguments equal the gold call (official samples)"))
        return metrics

    def headline(self, metrics: Sequence[Metric]) -> Metric | None:
        """Accuracy pooled over the evaluated levels (micro average), ToolRL protocol if evaluated (the paper's),
        else official; labelled as the levels' metrics were (marks such as lenient parsing kept)."""
        for protocol in ("toolrl", "official"):
            accs = [m for m in metrics if m.key.startswith(f"api_bank/{protocol}/") and m.key.endswith("/accuracy")]
            if accs:
                n = sum(m.n for m in accs)
                levels = ", ".join(m.key.split("/")[2].removeprefix("level-") for m in accs)
                return Metric(f"api_bank/{protocol}/pooled_accuracy", sum(m.value * m.n for m in accs) / n, n,
                              f"{accs[0].protocol}; pooled over level(s) {levels}")
        return None

    def paper_metric(self, metrics: Sequence[Metric]) -> Metric | None:
        """The ToolRL accuracy pooled over levels 1-3 (`headline`), the paper's API-Bank number; ``None``
        unless the ToolRL protocol was evaluated on every level."""
        accs = [m for m in metrics if m.key.startswith("api_bank/toolrl/level-") and m.key.endswith("/accuracy")]
        if sorted(m.key.split("/")[2] for m in accs) != [f"level-{lv}" for lv in LEVELS]:
            return None
        return self.headline(accs)

    # ----- task generation -----
    generation_system_prompt = (
        "You write new test dialogues for an agent that calls APIs. A task is a short dialogue between a User and "
        "an AI in which the user asks for something one API can do, and the one correct API call, with every "
        "argument value stated in the dialogue. Reply with exactly one JSON object with keys \"dialogue\" (a list of "
        "lines starting with \"User:\" or \"AI:\") and \"call\" ({\"name\": ..., \"arguments\": {...}}) and "
        "nothing else.")

    def generation_schema(self, seeds: Sequence[Task]) -> dict[str, Any]:
        """``{"dialogue": [line, ...], "call": {"name", "arguments"}}`` with the call to one level-1/2 API
        (`dialogue_schema`, `call_schema`)."""
        return json_object({"dialogue": dialogue_schema(),
                            "call": call_schema(catalogue_for(1, self.data_dir), suite_of(1))})

    def demonstrable(self, task: Task) -> bool:
        """Official level-1 tasks whose call is the first of a short dialogue (no earlier state needed) and
        whose demonstration the validator admits (grounded, executes)."""
        md = task.metadata
        return (md.get("protocol") == "official" and md.get("level") == 1 and not md.get("replay")
                and len(task.prompt) < 700 and self.admits_own_demonstration(task))

    def skill_of(self, task: Task) -> str:
        """The API the gold call uses."""
        return task.gold.get("name", "") if isinstance(task.gold, dict) else ""

    def as_generation(self, task: Task) -> dict[str, Any]:
        """``{"dialogue", "call"}`` of a task: the dialogue's lines, arguments in the API description's order."""
        dialogue = task.prompt.replace(ASK, "").strip().splitlines()
        description = catalogue_for(1, self.data_dir).get(task.gold["name"], {})
        return {"dialogue": dialogue, "call": {"name": task.gold["name"],
                                               "arguments": ordered_arguments(task.gold["arguments"], description)}}

    def parse_generated(self, text: str, task_id: str, iteration: int, parent: Task | None) -> Task | Rejection:
        """Strict JSON -> known API -> arguments fit its description -> executes without exception -> `Task`."""
        obj = extract_json_object(text)
        if isinstance(obj, Rejection):
            return obj
        dialogue, call = dialogue_text(obj.get("dialogue")), obj.get("call")
        if dialogue is None or "User:" not in dialogue or not isinstance(call, dict):
            return Rejection("missing_fields", "needs a 'dialogue' (lines) with a 'User:' line and a 'call' object")
        name, arguments = call.get("name"), call.get("arguments", call.get("parameters", {}))
        result = executed_call(make_runtime(api_bank_dir(self.data_dir), suite_of(1), reading="lenient"), name, arguments)
        if isinstance(result, Rejection):
            return result
        if self.grounded:
            missing = ungrounded_arguments(arguments, dialogue)
            if missing:
                return Rejection("ungrounded_value", "not stated in the dialogue: " + "; ".join(
                    f"{p}={v!r}" for p, v in missing.items())[:200])
        catalogue = catalogue_for(1, self.data_dir)
        names = [name] + (["GetUserToken"] if "token" in catalogue[name].get("input_parameters", {}) else [])
        descriptions = [catalogue[n] for n in names if n in catalogue]
        head = INSTRUCTION
        if parent is not None and "API descriptions:" in parent.metadata.get("system", ""):
            head = parent.metadata["system"].split("API descriptions:")[0] + "API descriptions:\n"
        system = head + "\n".join(json.dumps(d, ensure_ascii=False) for d in descriptions)
        return Task(id=task_id, benchmark=self.name, split="train", prompt=f"{dialogue.strip()}\n{ASK}\n",
                    gold={"name": name, "arguments": arguments}, action_kind="structured", tools=descriptions,
                    origin="generated", parent_id=parent.id if parent else None, admitted_iteration=iteration,
                    metadata={"level": 1, "protocol": "official", "system": system, "replay": [],
                              "source": {"generated": True}})

    def dedup_text(self, task: Task) -> str:
        """API name plus dialogue: the same request to a different API is not a duplicate."""
        return f"{task.gold.get('name', '') if isinstance(task.gold, dict) else ''} {task.prompt}"


PLAN_PROTOCOL = ("API-Bank level 3 as episodes: retrieve with ToolSearcher, call; success = every gold call made "
                 "with a matching result (lv3_evaluator's sample accuracy)")


class APIBankPlanSpec(BenchmarkSpec):
    """API-Bank level 3 "Plan+Retrieve+Call" episodes (``genenv/APIBankPlan-v0``); not a column of the paper.

    A generated task is a requirement and the sequence of level-3 API calls that fulfils it; ToolSearcher calls
    (keywords = the API name) are inserted before each API's first use. Admission: strict JSON
    ``{"requirement", "calls"}``, known level-3 APIs, arguments that fit their descriptions, every call
    executing without exception, in order, on a fresh backend, and (grounded) every argument value stated in the
    requirement or in an earlier call's result.
    """

    name = "api_bank_plan"
    baseline_column = ""
    paper_protocol = ""
    seed_options: dict[str, Any] = {}
    rejection_reasons = ("missing_fields", "unknown_api", "bad_arguments", "execution_error", "ungrounded_value")
    grounding_reasons = ("ungrounded_value",)

    def summarize(self, unit: str, trajectories: Sequence[Any]) -> list[Metric]:
        """``success_rate``, ``progress`` (share of gold calls matched) and ``rouge_l`` of the final answers."""
        n = len(trajectories)
        if n == 0:
            return []

        def mean(f) -> float:
            return sum(f(t) for t in trajectories) / n

        progress = mean(lambda t: t.info.get("matched", 0) / max(1, t.info.get("gold_calls", 1)))
        return [Metric(f"{unit}/success_rate", mean(lambda t: float(bool(t.success))), n, PLAN_PROTOCOL),
                Metric(f"{unit}/progress", progress, n, "share of the gold calls made with a matching result"),
                Metric(f"{unit}/rouge_l", mean(lambda t: t.info.get("rouge_l", 0.0)), n,
                       "ROUGE-L F1 (rouge-score) of the final answer vs the reference response")]

    def headline(self, metrics: Sequence[Metric]) -> Metric | None:
        """The success rate."""
        return next((m for m in metrics if m.key.endswith("/success_rate")), None)

    generation_system_prompt = (
        "You write new tasks for an agent that plans and calls APIs. A task is a user requirement and the "
        "sequence of API calls that fulfils it. Reply with exactly one JSON object with keys \"requirement\" "
        "and \"calls\" (a list of {\"name\": ..., \"arguments\": {...}}) and nothing else.")

    def generation_schema(self, seeds: Sequence[Task]) -> dict[str, Any]:
        """``{"requirement": string, "calls": [call, ...]}``: 1 to `MAX_PLAN_CALLS` calls to level-3 APIs
        (`call_schema`)."""
        return json_object({"requirement": text(REQUIREMENT_CHARS, 1),
                            "calls": array(call_schema(catalogue_for(3, self.data_dir), suite_of(3)),
                                          MAX_PLAN_CALLS, 1)})

    def demonstrable(self, task: Task) -> bool:
        """Tasks whose demonstration the validator admits (executes, grounded)."""
        return self.admits_own_demonstration(task)

    def skill_of(self, task: Task) -> str:
        """The first API the plan calls after retrieval."""
        return next((c["name"] for c in task.gold if c["name"] != "ToolSearcher"), "")

    def as_generation(self, task: Task) -> dict[str, Any]:
        """``{"requirement", "calls"}`` (the gold calls without the ToolSearcher steps, arguments in the API
        description's order)."""
        catalogue = catalogue_for(3, self.data_dir)
        return {"requirement": task.prompt, "calls": [
            {"name": c["name"], "arguments": ordered_arguments(c["arguments"], catalogue.get(c["name"], {}))}
            for c in task.gold if c["name"] != "ToolSearcher"]}

    def parse_generated(self, text: str, task_id: str, iteration: int, parent: Task | None) -> Task | Rejection:
        """Strict JSON -> known level-3 APIs -> arguments fit -> the sequence executes -> `Task`."""
        obj = extract_json_object(text)
        if isinstance(obj, Rejection):
            return obj
        requirement, calls = obj.get("requirement"), obj.get("calls")
        if not isinstance(requirement, str) or not requirement.strip() or not isinstance(calls, list) or not calls \
                or not all(isinstance(c, dict) for c in calls):
            return Rejection("missing_fields", "needs a 'requirement' string and a non-empty 'calls' list")
        runtime = make_runtime(api_bank_dir(self.data_dir), suite_of(3), reading="lenient")
        gold: list[dict[str, Any]] = []
        observed: list[str] = []  # the requirement, then each result: what a call's arguments may come from
        for call in calls:
            name, arguments = call.get("name"), call.get("arguments", call.get("parameters", {}))
            if isinstance(name, str) and not any(g["name"] == name for g in gold):
                gold.append({"name": "ToolSearcher", "arguments": {"keywords": name}})
            result = executed_call(runtime, name, arguments)
            if isinstance(result, Rejection):
                return result
            if self.grounded:
                missing = ungrounded_arguments(arguments, "\n".join([requirement, *observed]))
                if missing:
                    return Rejection("ungrounded_value", f"{name}: stated neither in the requirement nor in earlier "
                                     "results: " + "; ".join(f"{p}={v!r}" for p, v in missing.items())[:160])
            observed.append(json.dumps(result.get("output"), ensure_ascii=False, default=str))
            gold.append({"name": name, "arguments": arguments})
        return Task(id=task_id, benchmark=self.name, split="train", prompt=requirement.strip(), gold=gold,
                    action_kind="structured", tools=[searcher_description(self.data_dir)], origin="generated",
                    parent_id=parent.id if parent else None, admitted_iteration=iteration,
                    metadata={"response": "", "sample_id": None})

    def dedup_text(self, task: Task) -> str:
        """The requirement plus the called API names."""
        return f"{' '.join(c['name'] for c in task.gold)} {task.prompt}"


RESPONSE_PROTOCOL = "API-Bank response turns: ROUGE-L F1 (rouge-score) of the AI reply vs the reference reply"
MAX_RESPONSE_WORDS = 80


class APIBankResponseSpec(BenchmarkSpec):
    """API-Bank response turns (``genenv/APIBankResponse-v0``); not a column of the paper.

    A generated task is a dialogue ending in one API request and the AI's reply to its result. The environment,
    not the generator, writes the result: the request must parse (``API-Request: [Name(k='v')]``), name a
    level-1/2 API, fit its description and execute without exception, and (grounded) its argument values must be
    stated in the dialogue before it; its result is appended as ``->result``, the benchmark's format. The reply
    must be non-empty and at most 80 words.
    """

    name = "api_bank_response"
    baseline_column = ""
    paper_protocol = ""
    seed_options: dict[str, Any] = {"level": 1}
    rejection_reasons = ("missing_fields", "no_api_request", "unknown_api", "bad_arguments", "execution_error",
                         "response_too_long", "ungrounded_value")
    grounding_reasons = ("ungrounded_value",)

    def eval_units(self, options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """One unit per level (``options["level"]``: a value, a comma list or ``"all"``; default all)."""
        levels = [int(lv) for lv in _as_list(options.get("level"), LEVELS)]
        rest = {k: v for k, v in options.items() if k != "level"}
        return [(f"api_bank_response/level-{lv}", {**rest, "level": lv}) for lv in levels]

    def summarize(self, unit: str, trajectories: Sequence[Any]) -> list[Metric]:
        """``<unit>/rouge_l``: mean ROUGE-L F1."""
        n = len(trajectories)
        if n == 0:
            return []
        return [Metric(f"{unit}/rouge_l", sum(t.info.get("rouge_l", 0.0) for t in trajectories) / n, n,
                       RESPONSE_PROTOCOL)]

    def headline(self, metrics: Sequence[Metric]) -> Metric | None:
        """ROUGE-L pooled over the evaluated levels (micro average), labelled as the levels' metrics were."""
        scores = [m for m in metrics if m.key.endswith("/rouge_l")]
        if not scores:
            return None
        n = sum(m.n for m in scores)
        return Metric("api_bank_response/pooled_rouge_l", sum(m.value * m.n for m in scores) / n, n,
                      f"{scores[0].protocol}; pooled over {len(scores)} level(s)")

    generation_system_prompt = (
        "You write new test dialogues for an assistant that uses APIs. A task is a short dialogue between a User "
        "and an AI that ends with one API request line API-Request: [ApiName(key='value', ...)], and the AI's "
        "reply after the result. Reply with exactly one JSON object with keys \"dialogue\" (a list of lines) "
        "and \"response\" and nothing else.")

    def generation_schema(self, seeds: Sequence[Task]) -> dict[str, Any]:
        """``{"dialogue": [line, ...], "response": string}`` (`dialogue_schema`; the request line is checked
        by parsing and executing)."""
        return json_object({"dialogue": dialogue_schema(), "response": text(RESPONSE_CHARS, 1)})

    def demonstrable(self, task: Task) -> bool:
        """Short level-1 samples whose demonstration the validator admits."""
        return task.metadata.get("level") == 1 and len(task.prompt) < 700 and self.admits_own_demonstration(task)

    def skill_of(self, task: Task) -> str:
        """The API whose result the reply reports (the last ``API-Request:`` of the dialogue)."""
        names = re.findall(r"API-Request: \[(\w+)\(", task.prompt)
        return names[-1] if names else ""

    def as_generation(self, task: Task) -> dict[str, Any]:
        """``{"dialogue", "response"}``: the dialogue without the API result and the closing request line."""
        lines = task.prompt.replace("Generate AI Response:", "").strip().splitlines()
        if lines and "->" in lines[-1] and lines[-1].startswith("API-Request:"):
            lines[-1] = lines[-1].split("]->", 1)[0] + "]"
        return {"dialogue": lines, "response": task.gold}

    def parse_generated(self, text: str, task_id: str, iteration: int, parent: Task | None) -> Task | Rejection:
        """Strict JSON -> the last ``API-Request:`` line executes -> its result is appended -> `Task`."""
        from genenv.envs.parsing import ActionParseError, parse_tool_calls

        obj = extract_json_object(text)
        if isinstance(obj, Rejection):
            return obj
        dialogue, response = dialogue_text(obj.get("dialogue")), obj.get("response")
        if dialogue is None or "User:" not in dialogue or not isinstance(response, str) \
                or not response.strip():
            return Rejection("missing_fields", "needs a 'dialogue' with a 'User:' line and a non-empty 'response'")
        if len(response.split()) > MAX_RESPONSE_WORDS:
            return Rejection("response_too_long", f"{len(response.split())} words")
        lines = dialogue.strip().splitlines()
        request = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("API-Request:")), None)
        if request is None:
            return Rejection("no_api_request", "the dialogue has no API-Request: line")
        try:
            calls = parse_tool_calls(lines[request].split("]->", 1)[0] + ("]" if "]->" in lines[request] else ""))
        except ActionParseError as exc:
            return Rejection("no_api_request", str(exc)[:200])
        if len(calls) != 1:
            return Rejection("no_api_request", f"{len(calls)} calls on the request line, expected 1")
        runtime = make_runtime(api_bank_dir(self.data_dir), suite_of(1), reading="lenient")
        result = executed_call(runtime, calls[0].name, calls[0].arguments)
        if isinstance(result, Rejection):
            return result
        if self.grounded:
            missing = ungrounded_arguments(calls[0].arguments, "\n".join(lines[:request]))
            if missing:
                return Rejection("ungrounded_value", "the request's arguments are not stated in the dialogue: " +
                                 "; ".join(f"{p}={v!r}" for p, v in missing.items())[:160])
        lines = lines[:request] + [f"API-Request: [{calls[0].to_python()}]->{result['output']}"]
        system = parent.metadata["system"] if parent is not None else ""
        return Task(id=task_id, benchmark=self.name, split="train",
                    prompt="\n".join(lines) + "\nGenerate AI Response:\n", gold=response.strip(),
                    action_kind="free_text", origin="generated", parent_id=parent.id if parent else None,
                    admitted_iteration=iteration, metadata={"level": 1, "system": system, "index": None})
