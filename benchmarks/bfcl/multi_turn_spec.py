"""BFCL multi-turn spec: the official multi-turn accuracy and the paper's per-turn protocol, labelled, and
environment-generated multi-turn tasks validated by executing them on bfcl-eval's backends.

The environment policy writes a new user request and its gold calls for a real initial state (the state of the
seed entry shown first in its prompt). A proposal is admitted only if every call parses, names a function of
that entry's backends, executes without an error result, and changes the backends' state or returns data; and,
grounded, if the request names what the calls change: every argument value of every call is stated in the
request (`genenv.benchmarks.grounding`; the parameter's default and enum excepted).
"""
from __future__ import annotations

import copy
import json
import uuid
from typing import Any, Sequence

from genenv.benchmarks.grounding import ungrounded_arguments
from genenv.benchmarks.spec import BenchmarkSpec, Metric
from genenv.benchmarks.task_writer import Rejection, extract_json_object
from genenv.benchmarks.bounded_schema import TEXT_CLASS, array, json_object, text
from genenv.benchmarks.bfcl.multi_turn_env import (
    MULTI_TURN_CATEGORIES,
    all_functions,
    call_string,
    free_instances,
    gold_call,
    run_calls,
)
from genenv.envs.parsing import ActionParseError, parse_tool_calls
from genenv.envs.task import Task

__all__ = ["BFCLMultiTurnSpec"]

CHECKER = "bfcl-eval 2026.3.23 multi_turn_checker (state + response checks after every turn)"
PROTOCOLS = {
    "official": f"BFCL multi-turn accuracy, whole entry, {CHECKER}, greedy, 1 episode per entry",
    "per_turn": "paper protocol: each turn alone after the gold history, calls equal to the gold calls as a "
                f"multiset and the {CHECKER.split(' (')[0]} state/response checks, greedy",
}
MAX_GENERATED_CALLS = 8
# Bounds of a generated request and call's arguments (the 101 demonstrable seeds: 932 and 190 characters at
# most, 346 and 123 at the 95th percentile).
QUESTION_CHARS = 640
CALL_ARGUMENT_CHARS = 200
PAPER_KEY = "bfcl_mt/multi_turn_long_context/per_turn/accuracy"  # the metric beside the paper's BFCL column


class BFCLMultiTurnSpec(BenchmarkSpec):
    """BFCL multi-turn: base, miss_func, miss_param, long_context (200 entries each)."""

    name = "bfcl_multi_turn"
    baseline_column = "bfcl"
    paper_protocol = "BFCL multi-turn long-context subset, each turn scored independently"
    paper_options: dict[str, Any] = {"category": "multi_turn_long_context", "protocol": "per_turn"}
    seed_options: dict[str, Any] = {"category": "multi_turn_base"}
    rejection_reasons = ("missing_fields", "no_parent", "bad_call", "unknown_function", "too_many_calls",
                         "execution_error", "no_effect", "ungrounded_value")
    grounding_reasons = ("ungrounded_value",)

    def eval_units(self, options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """One official unit per category (``options["category"]``: name, comma list or ``all``, the default)
        plus the paper's per-turn unit on long_context; ``options["protocol"]`` keeps only that protocol."""
        cats = options.get("category") or "all"
        if isinstance(cats, str):
            cats = list(MULTI_TURN_CATEGORIES) if cats == "all" else [c.strip() for c in cats.split(",")]
        rest = {k: v for k, v in options.items() if k not in ("category", "protocol")}
        protocol = options.get("protocol")
        if protocol is None:  # the official accuracy of each category, plus the paper's protocol
            pairs = [(c, "official") for c in cats] + [("multi_turn_long_context", "per_turn")]
        else:
            pairs = [(c, protocol) for c in cats]
        return [(f"bfcl_mt/{c}/{p}", {**rest, "category": c, "protocol": p}) for c, p in pairs]

    def summarize(self, unit: str, trajectories: Sequence[Any]) -> list[Metric]:
        """``<unit>/accuracy``: share of episodes the checker accepts."""
        if not trajectories:
            return []
        protocol = trajectories[0].task.metadata["protocol"]
        limit = trajectories[0].info.get("max_steps")
        label = PROTOCOLS[protocol] + (f", episode cut at {limit} steps" if limit else "")
        value = sum(t.success for t in trajectories) / len(trajectories)
        return [Metric(f"{unit}/accuracy", value, len(trajectories), label)]

    def headline(self, metrics: Sequence[Metric]) -> Metric | None:
        """The paper's protocol (per-turn long_context) when evaluated, else the mean official accuracy."""
        paper = self.paper_metric(metrics)
        if paper:
            return paper
        official = [m for m in metrics if m.key.startswith("bfcl_mt/") and "/official/" in m.key]
        if not official:
            return metrics[0] if metrics else None
        return Metric("bfcl_mt/official/mean_accuracy", sum(m.value for m in official) / len(official),
                      sum(m.n for m in official), "unweighted mean over categories of " + official[0].protocol)

    def paper_metric(self, metrics: Sequence[Metric]) -> Metric | None:
        """``bfcl_mt/multi_turn_long_context/per_turn/accuracy``: the paper's BFCL protocol (long-context subset,
        each turn scored alone), run by ``paper_options``."""
        return next((m for m in metrics if m.key == PAPER_KEY), None)

    generation_system_prompt = (
        "You write new requests for a function-calling agent that works on a computer system (files, messages, "
        "posts, tickets, trading, travel booking, vehicle control, maths). Each request comes with the exact "
        "function calls that fulfil it, in Python syntax with keyword arguments. Reply with exactly one JSON "
        'object {"question": "...", "calls": ["f(a=1)", ...]} and nothing else.')

    def generation_schema(self, seeds: Sequence[Task]) -> dict[str, Any]:
        """``{"question": string, "calls": [call string, ...]}``: 1 to `MAX_GENERATED_CALLS` calls, each
        ``name(...)`` with ``name`` a function of the first seed's backends (the state the task runs on); the
        question and the arguments are bounded text (`QUESTION_CHARS`, `CALL_ARGUMENT_CHARS`)."""
        names = sorted({f["name"] for f in all_functions(seeds[0])}) if seeds else []
        head = "(" + "|".join(names) + ")" if names else "[A-Za-z_][A-Za-z0-9_.]{0,47}"
        call = {"type": "string", "pattern": rf"^{head}\({TEXT_CLASS}{{0,{CALL_ARGUMENT_CHARS}}}\)$"}
        return json_object({"question": text(QUESTION_CHARS, 1),
                            "calls": array(call, MAX_GENERATED_CALLS, 1)})

    def demonstrable(self, task: Task) -> bool:
        """Seeds whose first turn has gold calls and whose demonstration the validator admits (it executes,
        grounded)."""
        return bool(task.gold and task.gold[task.metadata["start_turn"]]) and self.admits_own_demonstration(task)

    def skill_of(self, task: Task) -> str:
        """The backend classes the entry involves (``GorillaFileSystem+MathAPI``)."""
        return "+".join(sorted(task.metadata.get("involved_classes") or [])) or "none"

    def as_generation(self, task: Task) -> dict[str, Any]:
        """The task's first scored turn as ``{"question", "calls"}`` (keyword-argument call strings)."""
        turn = task.metadata["start_turn"]
        functions = all_functions(task)
        return {"question": task.metadata["turns"][turn][0]["content"] if task.metadata["turns"][turn] else "",
                "calls": [call_string(gold_call(c, functions)) for c in task.gold[turn]]}

    def parse_generated(self, text: str, task_id: str, iteration: int, parent: Task | None) -> Task | Rejection:
        """Strict JSON ``{"question", "calls"}``, validated by execution on the parent entry's initial state."""
        obj = extract_json_object(text)
        if isinstance(obj, Rejection):
            return obj
        question, calls = obj.get("question"), obj.get("calls")
        if not (isinstance(question, str) and question.strip() and isinstance(calls, list) and calls
                and all(isinstance(c, str) for c in calls)):
            return Rejection("missing_fields", "needs a non-empty 'question' and a list of call strings 'calls'")
        if parent is None:
            return Rejection("no_parent", "a generated request needs the seed entry whose state it runs on")
        if len(calls) > MAX_GENERATED_CALLS:
            return Rejection("too_many_calls", f"{len(calls)} > {MAX_GENERATED_CALLS}")
        parsed = []
        for c in calls:
            try:
                parsed += parse_tool_calls(c)
            except ActionParseError as exc:
                return Rejection("bad_call", f"{c[:80]}: {exc}")
        functions = {f["name"] for f in all_functions(parent)}
        unknown = [c.name for c in parsed if c.name not in functions]
        if unknown:
            return Rejection("unknown_function", ", ".join(unknown[:3]))
        strings = [call_string(c) for c in parsed]
        meta = {**copy.deepcopy(parent.metadata), "entry_id": task_id, "category": "generated",
                "turns": [[{"role": "user", "content": question.strip()}]], "missed_function": {},
                "long_context": False, "protocol": "official", "start_turn": 0, "end_turn": 0}
        task = Task(id=task_id, benchmark=self.name, split="train", prompt=question.strip(), gold=[strings],
                    action_kind="structured", tools=all_functions(parent), origin="generated",
                    parent_id=parent.id, admitted_iteration=iteration, metadata=meta)
        problem, results = execution_problem(task)
        if problem is None and self.grounded:
            problem = grounding_problem(parsed, question.strip(), results, all_functions(parent))
        return problem or task

    def dedup_text(self, task: Task) -> str:
        """The first scored turn's request."""
        turn = task.metadata["start_turn"]
        return task.metadata["turns"][turn][0]["content"] if task.metadata["turns"][turn] else task.prompt

    def gold_key(self, task: Task) -> str:
        """The first scored turn's gold calls (a seed's gold covers every turn, a generated task's one)."""
        turn = task.metadata["start_turn"]
        return json.dumps(task.gold[turn] if len(task.gold) > turn else task.gold, sort_keys=True, default=str)


def execution_problem(task: Task) -> tuple[Rejection | None, list[str]]:
    """Execute ``task``'s gold calls on fresh backends in its initial state, exactly as the env will. Returns the
    problem (``execution_error`` when a result is an error, ``no_effect`` when the state is unchanged and no call
    returned data, else ``None``) and the calls' results (text, one per call)."""
    name = f"genenv_gen_{uuid.uuid4().hex}"
    try:
        _, before = run_calls([], task, name + "_before")
        results, after = run_calls(task.gold[0], task, name)
        errors = [r for r in results if r.startswith("Error during execution") or '"error"' in r[:40]]
        if errors:
            return Rejection("execution_error", errors[0][:200]), results
        changed = any(_public_state(before[c]) != _public_state(after[c]) for c in after)
        returned = any(r not in ("None", "{}", "[]", "") for r in results)
        problem = None if changed or returned else Rejection("no_effect", "no state change and no data returned")
        return problem, results
    finally:
        free_instances(name)


def grounding_problem(calls: Sequence[Any], question: str, results: Sequence[str],
                      functions: Sequence[dict[str, Any]]) -> Rejection | None:
    """``ungrounded_value`` when an argument of a call is stated neither in ``question`` nor in the results of
    the calls before it (what the agent observes on its way: a file that ``ls`` listed), else ``None``. The
    parameter's default and enum are exempt (`ungrounded_arguments`)."""
    schemas = {f["name"]: f.get("parameters", {}).get("properties", {}) for f in functions}
    for i, call in enumerate(calls):
        context = "\n".join([question, *results[:i]])
        missing = ungrounded_arguments(call.arguments, context, schemas.get(call.name))
        if missing:
            return Rejection("ungrounded_value", f"{call.name}: stated neither in the question nor in earlier "
                                                 "results: " + "; ".join(f"{p}={v!r}" for p, v in missing.items())
                             )
    return None


def _public_state(instance: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(instance).items() if not k.startswith("_")}
