"""BFCL spec: per-category official AST accuracy, and environment-generated function-calling tasks.

Generated tasks follow BFCL's ``simple_python`` format: one function schema (BFCL's ``"type": "dict"``
parameters with Python type names), a user request, and one gold call. Admission requires (1) strict JSON with
those fields, (2) a well-formed schema, (3) gold argument values of the schema's types, (4) the gold call, turned into a
BFCL possible-answer entry, passing bfcl-eval's own AST checker against that schema (names, required parameters,
types), and (5) no near-duplicate in the pool.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from genenv.benchmarks.registry import register_benchmark
from genenv.benchmarks.spec import BenchmarkSpec, Metric, Rejection, extract_json_object
from genenv.envs.bfcl import SINGLE_TURN_CATEGORIES
from genenv.envs.task import Task
from genenv.rewards.bfcl import bfcl_check

PYTHON_TYPES = ("string", "integer", "float", "boolean", "array", "dict", "tuple", "any")
# Python value types per schema type. bfcl-eval's checker accepts a string for any type when the key holds a
# string (it reads it as a variable name), so a self-made key cannot catch e.g. "lots" for a float: we check.
_VALUE_TYPES = {"string": (str,), "integer": (int,), "float": (int, float), "boolean": (bool,),
                "array": (list,), "tuple": (list,), "dict": (dict,)}


def value_type_problem(value: Any, type_name: str) -> str | None:
    """Why ``value`` does not have schema type ``type_name`` (bool is not a number), or ``None``."""
    allowed = _VALUE_TYPES.get(type_name)
    if allowed is None:
        return None
    if isinstance(value, bool) and bool not in allowed:
        return f"boolean given for {type_name}"
    if not isinstance(value, allowed):
        return f"{type(value).__name__} given for {type_name}"
    return None
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
OFFICIAL = "BFCL official AST checker (bfcl-eval 2026.3.23), single-turn"


def schema_problem(fn: Any) -> str | None:
    """Why ``fn`` is not a well-formed BFCL function schema, or ``None`` if it is.

    Rules (BFCL's data format): ``name`` a (dotted) identifier; ``description`` a string; ``parameters`` =
    ``{"type": "dict", "properties": {name: {"type": one of PYTHON_TYPES, ...}}, "required": [...]}`` with every
    required name among the properties, at least one property, array types with an ``items`` type.
    """
    if not isinstance(fn, dict):
        return "function is not an object"
    if not isinstance(fn.get("name"), str) or not _NAME_RE.match(fn["name"]):
        return "name is not an identifier"
    if not isinstance(fn.get("description", ""), str):
        return "description is not a string"
    params = fn.get("parameters")
    if not isinstance(params, dict) or params.get("type") != "dict":
        return "parameters must be {\"type\": \"dict\", ...}"
    props = params.get("properties")
    if not isinstance(props, dict) or not props:
        return "parameters.properties must be a non-empty object"
    for pname, p in props.items():
        if not _NAME_RE.match(pname) or "." in pname:
            return f"parameter name {pname!r} is not an identifier"
        if not isinstance(p, dict) or p.get("type") not in PYTHON_TYPES:
            return f"parameter {pname!r} has no valid type (one of {PYTHON_TYPES})"
        if p["type"] == "array" and not (isinstance(p.get("items"), dict) and p["items"].get("type") in PYTHON_TYPES):
            return f"array parameter {pname!r} needs items.type"
    required = params.get("required", [])
    if not isinstance(required, list) or any(r not in props for r in required):
        return "required must list property names"
    return None


@register_benchmark
class BFCLSpec(BenchmarkSpec):
    """BFCL single-turn (AST) categories."""

    name = "bfcl"
    baseline_column = "bfcl"
    paper_protocol = "BFCL multi-turn long-context subset, each turn scored independently"
    seed_options: dict[str, Any] = {"category": "simple_python"}
    rejection_reasons = ("missing_fields", "bad_schema", "bad_answer", "gold_type_mismatch", "gold_fails_checker")

    def eval_units(self, options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """One unit per category (``options["category"]``: a name, a comma list, or ``"all"``)."""
        cats = options.get("category") or "all"
        if isinstance(cats, str):
            cats = list(SINGLE_TURN_CATEGORIES) if cats == "all" else [c.strip() for c in cats.split(",")]
        rest = {k: v for k, v in options.items() if k != "category"}
        return [(f"bfcl/{c}", {**rest, "category": c}) for c in cats]

    def summarize(self, unit: str, trajectories: Sequence[Any]) -> list[Metric]:
        """``bfcl/<category>/ast_accuracy``: share of entries the official checker accepts."""
        if not trajectories:
            return []
        acc = sum(bool(t.success) for t in trajectories) / len(trajectories)
        return [Metric(f"{unit}/ast_accuracy", acc, len(trajectories), OFFICIAL)]

    def headline(self, metrics: Sequence[Metric]) -> Metric | None:
        """Unweighted mean of the evaluated categories' accuracies."""
        accs = [m for m in metrics if m.key.endswith("/ast_accuracy")]
        if not accs:
            return None
        return Metric("bfcl/ast_accuracy_mean", sum(m.value for m in accs) / len(accs), sum(m.n for m in accs),
                      f"{OFFICIAL}, unweighted mean over {len(accs)} categories")

    # ----- task generation -----
    generation_system_prompt = (
        "You write new function-calling tasks for a tool-use agent. A task is one function schema, a user request, "
        "and the one correct call. Parameter types are string, integer, float, boolean, array or dict. Reply with "
        'exactly one JSON object with keys "function", "question" and "answer" '
        '(answer = {"name": ..., "arguments": {...}}) and nothing else.')

    def demonstrable(self, task: Task) -> bool:
        """Single-function tasks with one gold call (the format generated tasks have)."""
        return len(task.tools) == 1 and bool(task.gold) and len(task.gold) == 1

    def as_generation(self, task: Task) -> dict[str, Any]:
        """``{"function", "question", "answer"}`` of a single-function, single-call task."""
        from genenv.envs.bfcl import gold_calls

        calls = gold_calls(task)
        if len(task.tools) != 1 or len(calls) != 1:
            raise ValueError(f"{task.id}: only single-function, single-call tasks are generation examples")
        return {"function": task.tools[0], "question": task.prompt, "answer": calls[0].to_json()}

    def parse_generated(self, text: str, task_id: str, step: int, parent: Task | None) -> Task | Rejection:
        """Strict JSON → schema check → gold call through bfcl-eval's checker → :class:`Task`."""
        obj = extract_json_object(text)
        if isinstance(obj, Rejection):
            return obj
        fn, question, answer = obj.get("function"), obj.get("question"), obj.get("answer")
        if not isinstance(question, str) or not question.strip() or not isinstance(answer, dict):
            return Rejection("missing_fields", "needs 'function', a non-empty 'question' and an 'answer' object")
        problem = schema_problem(fn)
        if problem:
            return Rejection("bad_schema", problem)
        name, args = answer.get("name"), answer.get("arguments", answer.get("parameters"))
        if not isinstance(args, dict):
            return Rejection("bad_answer", "answer.arguments must be an object")
        if name != fn["name"]:
            return Rejection("bad_answer", f"answer calls {name!r}, schema defines {fn['name']!r}")
        fn = {"name": fn["name"], "description": fn.get("description", ""), "parameters": {
            "type": "dict", "properties": fn["parameters"]["properties"],
            "required": list(fn["parameters"].get("required", []))}}
        props = fn["parameters"]["properties"]
        ground_truth = [{name: {p: ([args[p]] if p in args else [""]) for p in props}}]
        unknown = set(args) - set(props)
        if unknown:
            return Rejection("gold_fails_checker", f"arguments not in schema: {sorted(unknown)}")
        for p, v in args.items():
            problem = value_type_problem(v, props[p]["type"])
            if problem:
                return Rejection("gold_type_mismatch", f"{p}: {problem}")
        check = bfcl_check([{name: args}], [fn], ground_truth, "simple_python")
        if not check.valid:
            return Rejection("gold_fails_checker", check.error[:200])
        return Task(id=task_id, benchmark=self.name, split="generated", prompt=question.strip(), gold=ground_truth,
                    action_kind="structured", tools=[fn], origin="generated",
                    parent_id=parent.id if parent else None, generation_step=step,
                    metadata={"category": "simple_python",
                              "question_messages": [{"role": "user", "content": question.strip()}]})

    def dedup_text(self, task: Task) -> str:
        """Function name plus request: the same request against a different function is not a duplicate."""
        return f"{task.tools[0]['name'] if task.tools else ''} {task.prompt}"
