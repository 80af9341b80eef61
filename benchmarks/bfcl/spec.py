"""BFCL spec: per-category official AST accuracy, and environment-generated function-calling tasks.

Generated tasks follow BFCL's ``simple_python`` format: one function schema (BFCL's ``"type": "dict"``
parameters with Python type names), a user request, and one gold call. Admission requires (1) strict JSON with
those fields, (2) a well-formed schema, (3) gold argument values of the schema's types, (4) the gold call, turned into a
BFCL possible-answer entry, passing bfcl-eval's own AST checker against that schema (names, required parameters,
types), (5) grounding: every gold argument value stated in the request (`genenv.benchmarks.grounding`;
schema defaults and enums excepted), and (6) no near-duplicate in the pool.

The format's JSON Schema (`BFCLSpec.generation_schema`) is what structured decoding samples under; the
demonstrations are written in it (parameter keys in the order type, description, items, enum, default; the
minimal gold call: parameters the answer key lets one omit are omitted).
"""
from __future__ import annotations

import json
import re
from typing import Any, Sequence

from genenv.benchmarks.grounding import ungrounded_arguments
from genenv.benchmarks.spec import BenchmarkSpec, Metric
from genenv.benchmarks.task_writer import Rejection, extract_json_object
from genenv.benchmarks.bounded_schema import array, json_object, number, text
from genenv.benchmarks.bfcl.data import SINGLE_TURN_CATEGORIES
from genenv.envs.task import Task
from genenv.benchmarks.bfcl.checker import bfcl_check

__all__ = ["BFCLSpec"]

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
# Bounds of the generation format, from the train pool's demonstrations (simple_python, 287 tasks; longest in
# brackets): names (42 characters), descriptions (function 201, parameter 221), the request (220), enum values
# (21; at most 7 per parameter), argument strings (37; arrays of at most 7 items of at most 21).
GENERATED_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,47}(\.[A-Za-z_][A-Za-z0-9_]{0,47})?$"
PARAM_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,31}$"
DESCRIPTION_CHARS = 240  # the function's
PARAM_DESCRIPTION_CHARS = 160  # a parameter's (93 at the 95th percentile)
QUESTION_CHARS = 240
VALUE_CHARS = 48  # a scalar argument or default
ITEM_CHARS = 24  # an enum value or a list item
MAX_VALUES = 8
PARAM_KEYS = ("type", "description", "items", "enum", "default")  # a generated parameter's keys, in this order
MAX_PARAMS = 4  # parameters of a generated function (the seeds: 3 median, 4 at the 95th percentile, 6 at most)
# EnvGen's skills for BFCL: the function's domain, read from words of its name and description (the first domain
# with a matching word, in this order). BFCL labels no domains; this table is ours, written from the
# simple_python function names.
DOMAINS = (
    ("math", ("math", "area", "circle", "triangle", "factorial", "gcd", "hcf", "lcm", "prime", "quadratic",
              "derivative", "integral", "integrate", "calculus", "algebra", "geometry", "equation", "matrix",
              "probability", "statistic", "mean", "median", "permutation", "combination", "fibonacci", "sqrt",
              "root", "polynomial", "vector", "circumference", "hypot", "number")),
    ("physics", ("velocity", "speed", "force", "electric", "magnetic", "energy", "pressure", "temperature",
                 "acceleration", "displacement", "momentum", "gravity", "wave", "frequency", "charge", "physics")),
    ("chemistry_biology", ("molecular", "density", "chemical", "compound", "element", "dna", "cell", "protein",
                           "gene", "genetic", "genotype", "species", "biology", "ecology", "bird", "population",
                           "evolution", "enzyme", "chemistry")),
    ("finance", ("stock", "interest", "loan", "investment", "finance", "price", "tax", "mortgage", "currency",
                 "profit", "return", "dividend", "salary", "bank", "budget", "market")),
    ("travel_places", ("route", "distance", "city", "hotel", "flight", "direction", "travel", "map", "restaurant",
                       "weather", "location", "country", "traffic")),
    ("culture_history", ("history", "historical", "music", "movie", "film", "concert", "game", "sport", "art",
                         "book", "lawyer", "law", "court", "recipe", "religion", "imdb", "player", "team")),
)
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


class BFCLSpec(BenchmarkSpec):
    """BFCL single-turn (AST) categories."""

    name = "bfcl"
    baseline_column = "bfcl"
    paper_protocol = "BFCL multi-turn long-context subset, each turn scored independently"
    seed_options: dict[str, Any] = {"category": "simple_python"}
    rejection_reasons = ("missing_fields", "bad_schema", "bad_answer", "gold_type_mismatch", "gold_fails_checker",
                         "ungrounded_value")
    grounding_reasons = ("ungrounded_value",)

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
        """Unweighted mean of the evaluated categories' accuracies (labelled as they are). Not the paper's BFCL
        protocol (multi-turn long-context, per turn: ``bfcl_multi_turn``), so `paper_metric` is ``None``."""
        accs = [m for m in metrics if m.key.endswith("/ast_accuracy")]
        if not accs:
            return None
        return Metric("bfcl/ast_accuracy_mean", sum(m.value for m in accs) / len(accs), sum(m.n for m in accs),
                      f"{accs[0].protocol}, unweighted mean over {len(accs)} categories")

    # ----- task generation -----
    generation_system_prompt = (
        "You write new function-calling tasks for a tool-use agent. A task is one function schema, a user request, "
        "and the one correct call. Parameter types are string, integer, float, boolean, array or dict. Reply with "
        'exactly one JSON object with keys "function", "question" and "answer" '
        '(answer = {"arguments": {...}}, the call of the function) and nothing else.')

    def generation_schema(self, seeds: Sequence[Task]) -> dict[str, Any]:
        """``{"function": {name, description, parameters: {type: "dict", properties, required}}, "question",
        "answer": {arguments}}`` (the call of the function): types from `PYTHON_TYPES`, at most
        `MAX_PARAMS` parameters, each with the keys of `PARAM_KEYS` in that order (``items`` with its
        type only); every string, list and object bounded (`genenv.benchmarks.bounded_schema`; the bounds
        above `MAX_PARAMS`). A demonstration outside these bounds is not shown (`demonstrable`)."""
        values = array(text(ITEM_CHARS), MAX_VALUES)
        scalar = {"anyOf": [text(VALUE_CHARS), number(), {"type": "boolean"}]}
        item = {"anyOf": [text(ITEM_CHARS), number(), {"type": "boolean"}]}
        param = json_object({"type": {"enum": list(PYTHON_TYPES)}, "description": text(PARAM_DESCRIPTION_CHARS),
                             "items": json_object({"type": {"enum": list(PYTHON_TYPES)}}), "enum": values,
                             "default": {"anyOf": [scalar, {"type": "null"}]}},
                            optional=("items", "enum", "default"))
        name = {"type": "string", "pattern": GENERATED_NAME}
        function = json_object({
            "name": name, "description": text(DESCRIPTION_CHARS),
            "parameters": json_object({"type": {"const": "dict"},
                                       "properties": {"type": "object", "additionalProperties": param,
                                                      "propertyNames": {"pattern": PARAM_NAME},
                                                      "minProperties": 1, "maxProperties": MAX_PARAMS},
                                       "required": array({"type": "string", "pattern": PARAM_NAME}, MAX_PARAMS)})})
        arguments = {"type": "object", "propertyNames": {"pattern": PARAM_NAME}, "maxProperties": MAX_PARAMS,
                     "additionalProperties": {"anyOf": [scalar, array(item, MAX_VALUES)]}}
        answer = json_object({"arguments": arguments})  # the call of the function: its name is not written again
        return json_object({"function": function, "question": text(QUESTION_CHARS, 1), "answer": answer})

    def demonstrable(self, task: Task) -> bool:
        """Single-function, single-call tasks whose function fits the generation format (parameters with
        `PARAM_KEYS` only, at most `MAX_PARAMS`) and whose demonstration the validator admits
        (grounded, accepted by the checker): no demonstration teaches a rejected task. Cached per task id."""
        if len(task.tools) != 1 or not task.gold or len(task.gold) != 1:
            return False
        props = task.tools[0].get("parameters", {}).get("properties", {})
        if not props or len(props) > MAX_PARAMS or any(
                set(p) - set(PARAM_KEYS) - {"optional"} or set(p.get("items", {})) - {"type", "enum"}
                for p in props.values()):
            return False
        return self.admits_own_demonstration(task)

    @staticmethod
    def demonstration_call(task: Task) -> dict[str, Any]:
        """The minimal gold call of a single-call task: optional parameters the answer key lets one omit are
        omitted; of several allowed values, the first one the request states (else the first)."""
        from genenv.benchmarks.bfcl.env import gold_calls

        (name, allowed), = task.gold[0].items()
        props = task.tools[0]["parameters"]["properties"]
        required = set(task.tools[0]["parameters"].get("required", []))
        full = gold_calls(task)[0].arguments
        args = {}
        for param, values in allowed.items():
            if ("" in values and param not in required) or param not in full:
                continue
            stated = [v for v in values if not ungrounded_arguments({param: v}, task.prompt, props)]
            args[param] = stated[0] if stated and not isinstance(stated[0], dict) else full[param]
        return {"name": name, "arguments": args}

    def skill_of(self, task: Task) -> str:
        """The function's domain (`DOMAINS`; ``other`` when no word matches)."""
        fn = task.tools[0] if task.tools else {}
        words = set(re.findall(r"[a-z]+", f"{fn.get('name', '')} {fn.get('description', '')}".lower().replace(
            "_", " ")))
        return next((domain for domain, keys in DOMAINS if words & set(keys)), "other")

    def as_generation(self, task: Task) -> dict[str, Any]:
        """``{"function", "question", "answer"}`` of a single-function, single-call task, in the format of
        `generation_schema` (see the module docstring). Raises ``ValueError`` for other tasks."""
        if len(task.tools) != 1 or not task.gold or len(task.gold) != 1:
            raise ValueError(f"{task.id}: only single-function, single-call tasks are generation examples")
        fn = task.tools[0]
        params = fn["parameters"]
        props = {}
        for pname, p in params["properties"].items():
            canonical = {k: p[k] for k in PARAM_KEYS if k in p}
            if "items" in canonical:
                canonical["items"] = {k: p["items"][k] for k in ("type", "enum") if k in p["items"]}
            canonical.setdefault("description", "")
            props[pname] = {k: canonical[k] for k in PARAM_KEYS if k in canonical}
        function = {"name": fn["name"], "description": fn.get("description", ""),
                    "parameters": {"type": "dict", "properties": props, "required": list(params.get("required", []))}}
        return {"function": function, "question": task.prompt,
                "answer": {"arguments": self.demonstration_call(task)["arguments"]}}

    def parse_generated(self, text: str, task_id: str, iteration: int, parent: Task | None) -> Task | Rejection:
        """Strict JSON → schema check → gold call through bfcl-eval's checker → `Task`."""
        obj = extract_json_object(text)
        if isinstance(obj, Rejection):
            return obj
        fn, question, answer = obj.get("function"), obj.get("question"), obj.get("answer")
        if not isinstance(question, str) or not question.strip() or not isinstance(answer, dict):
            return Rejection("missing_fields", "needs 'function', a non-empty 'question' and an 'answer' object")
        problem = schema_problem(fn)
        if problem:
            return Rejection("bad_schema", problem)
        name, args = answer.get("name", fn["name"]), answer.get("arguments", answer.get("parameters"))
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
        if self.grounded:
            missing = ungrounded_arguments(args, question, props)
            if missing:
                return Rejection("ungrounded_value", "not stated in the question: " + "; ".join(
                    f"{p}={v!r}" for p, v in missing.items())[:200])
        return Task(id=task_id, benchmark=self.name, split="train", prompt=question.strip(), gold=ground_truth,
                    action_kind="structured", tools=[fn], origin="generated",
                    parent_id=parent.id if parent else None, admitted_iteration=iteration,
                    metadata={"category": "simple_python",
                              "question_messages": [{"role": "user", "content": question.strip()}]})

    def dedup_text(self, task: Task) -> str:
        """Function name plus request: the same request against a different function is not a duplicate."""
        return f"{task.tools[0]['name'] if task.tools else ''} {task.prompt}"

    def gold_key(self, task: Task) -> str:
        """The minimal gold call (`demonstration_call`; a seed's answer key lists several allowed values,
        a generated task's one), so that a copy of a seed with the seed's call is the same task."""
        try:
            call = self.demonstration_call(task)
        except (ValueError, KeyError, TypeError, IndexError):
            return super().gold_key(task)
        return json.dumps(call, sort_keys=True, ensure_ascii=False, default=str)
