"""BFCL single-turn environment (``genenv/BFCL-v0``) over the real Berkeley Function Calling Leaderboard data.

Data: ``<data_dir>/bfcl/BFCL_v4_<category>.json`` (JSON Lines: ``id``, ``question`` = list of turns of chat
messages, ``function`` = schemas) and ``bfcl/possible_answer/BFCL_v4_<category>.json`` (``id``,
``ground_truth``), from ``bfcl-eval==2026.3.23`` (see ``shared/data/SOURCES.md``). Correctness is bfcl-eval's
own AST checker (`genenv.benchmarks.bfcl.checker`), so ``info["success"]`` is the official per-entry verdict.

Splits: BFCL ships only a test set. ``split="test"`` is the whole category (the official leaderboard score);
for co-evolution the category is partitioned deterministically by a hash of the id into ``"train"`` (80 %,
the seed task pool) and ``"heldout"`` (20 %, periodic evaluation during training).
"""
from __future__ import annotations

import json
from typing import Any

from genenv.envs.base import InvalidAction, TaskEnv, parse_or_invalid
from genenv.benchmarks.bfcl.checker import (IRRELEVANCE_CATEGORIES, RELEVANCE_CATEGORIES, bfcl_check, language_of,
                                           official_calls)
from genenv.benchmarks.bfcl.prompts import (DEMO_FUNCTIONS, DEMO_REPLY, DEMO_REQUEST, LANGUAGE_NOTE, SYSTEM_PROMPT,
                                           calls_text)
from genenv.benchmarks.bfcl.data import NO_ANSWER_CATEGORIES, SINGLE_TURN_CATEGORIES, bfcl_dir
from genenv.envs.data import DataError, benchmark_file, iter_jsonl, require_fields, split_of
from genenv.envs.parsing import ToolCall, parse_tool_calls
from genenv.envs.spaces import ToolCallSpace, as_tool_calls
from genenv.envs.task import Task

__all__ = ["BFCLEnv", "SINGLE_TURN_CATEGORIES", "SPLIT_OPTIONS", "gold_calls", "load_bfcl_tasks"]

SPLITS = ("test", "train", "heldout")
SPLIT_OPTIONS = tuple({"category": c, "split": s} for c in SINGLE_TURN_CATEGORIES for s in SPLITS)

def load_bfcl_tasks(category: str | list[str] | None = "simple_python", split: str | None = "test",
                    data_dir: str | None = None) -> list[Task]:
    """Load BFCL single-turn tasks.

    Args:
        category: one category, a list, or ``None`` / ``"all"`` for every single-turn category.
        split: ``"test"`` (all entries), ``"train"`` or ``"heldout"`` (see module docstring).
        data_dir: data directory (default: ``$GENENV_DATA_DIR``, else the packaged samples).
    Returns:
        tasks in file order; ``gold`` is the ground truth list (``None`` for (ir)relevance categories).
    Raises:
        ValueError: unknown category or split.
        DataError: a file is missing or a record is malformed (names file and line).
    """
    split = split or "test"
    if split not in SPLITS:
        raise ValueError(f"unknown BFCL split {split!r}; choose one of {SPLITS}")
    if category in (None, "all"):
        categories = list(SINGLE_TURN_CATEGORIES)
    else:
        categories = [category] if isinstance(category, str) else list(category)
    root = bfcl_dir(data_dir)
    tasks: list[Task] = []
    for cat in categories:
        if cat not in SINGLE_TURN_CATEGORIES:
            raise ValueError(f"unknown BFCL single-turn category {cat!r}; choose from {SINGLE_TURN_CATEGORIES}")
        qpath = benchmark_file(root, f"BFCL_v4_{cat}.json")
        answers: dict[str, Any] = {}
        if cat not in NO_ANSWER_CATEGORIES:
            apath = benchmark_file(root, "possible_answer", f"BFCL_v4_{cat}.json")
            for lineno, rec in iter_jsonl(apath):
                require_fields(rec, ("id", "ground_truth"), f"{apath} line {lineno}")
                answers[rec["id"]] = rec["ground_truth"]
        for lineno, rec in iter_jsonl(qpath):
            where = f"{qpath} line {lineno}"
            require_fields(rec, ("id", "question", "function"), where)
            if split != "test" and split_of(rec["id"]) != split:
                continue
            if cat not in NO_ANSWER_CATEGORIES and rec["id"] not in answers:
                raise DataError(f"{where}: id {rec['id']!r} has no entry in possible_answer/BFCL_v4_{cat}.json")
            turns = rec["question"]
            if not (isinstance(turns, list) and turns and isinstance(turns[0], list) and turns[0]):
                raise DataError(f"{where}: 'question' must be a non-empty list of turns of messages")
            messages = turns[0]
            user = [m.get("content", "") for m in messages if m.get("role") == "user"]
            tasks.append(Task(
                id=rec["id"], benchmark="bfcl", split=split, prompt=user[-1] if user else messages[-1].get("content", ""),
                gold=answers.get(rec["id"]), action_kind="structured", tools=rec["function"],
                metadata={"category": cat, "question_messages": messages},
            ))
    return tasks


# ---------- gold answers as model output (the gold policy) ----------
def _pick(allowed: list[Any]) -> tuple[bool, Any]:
    """First acceptable value of a possible-answer list; ``(False, None)`` when the parameter may be omitted."""
    for value in allowed:
        if value != "":
            return True, _materialise(value)
    return False, None


def _materialise(value: Any) -> Any:
    if isinstance(value, dict):  # nested possible answers: {key: [allowed values]}
        out = {}
        for k, allowed in value.items():
            ok, v = _pick(allowed) if isinstance(allowed, list) else (True, allowed)
            if ok:
                out[k] = v
        return out
    if isinstance(value, list):
        return [_materialise(v) for v in value]
    return value


def _java_literal(value: Any, type_name: str, schema: dict[str, Any]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):  # a Java expression or variable name (or a String / any value), verbatim
        return value
    if type_name == "long":
        return f"{value}L"
    if type_name == "float":
        return f"{value}f"
    if type_name in ("Array", "ArrayList"):
        item_type = schema.get("items", {}).get("type", "String")
        # ArrayList elements of type String are quoted (the checker strips the quotes); Array elements are not
        quote = type_name == "ArrayList" and item_type in ("String", "char")
        items = ", ".join(json.dumps(v) if quote else _java_literal(v, item_type, {}) for v in value)
        if type_name == "Array":
            return f"new {_JAVA_ARRAY_ELEM.get(item_type, item_type)}[]{{{items}}}"
        return f"new ArrayList<>(Arrays.asList({items}))"
    if type_name == "HashMap":
        puts = " ".join(f"put({json.dumps(k)}, {json.dumps(v)});" for k, v in value.items())
        return f"new HashMap<String, String>() {{{{ {puts} }}}}"
    return str(value)


_JAVA_ARRAY_ELEM = {"integer": "int", "String": "String", "boolean": "boolean", "double": "double",
                    "float": "float", "long": "long", "char": "char", "any": "Object"}


def _js_literal(value: Any, type_name: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):  # a JavaScript expression, variable name or String value, verbatim
        return value
    if type_name == "Bigint":
        return f"{value}n"
    if type_name in ("array", "dict"):
        return json.dumps(value)
    return str(value)


def gold_calls(task: Task) -> list[ToolCall]:
    """The calls that the BFCL checker accepts for ``task`` (first allowed value of every parameter).

    Java / JavaScript values are rendered as source strings, as the checker expects. Irrelevance tasks: ``[]``;
    live_relevance: any one call to the first function (relevance only asks that a call is made).
    """
    category = task.metadata["category"]
    if category in IRRELEVANCE_CATEGORIES:
        return []
    if category in RELEVANCE_CATEGORIES:
        return [ToolCall(task.tools[0]["name"], {})]
    language = language_of(category)
    schemas = {f["name"]: f for f in task.tools}
    calls = []
    for entry in task.gold:
        (name, params), = entry.items()
        props = schemas.get(name, {}).get("parameters", {}).get("properties", {})
        args = {}
        required = set(schemas.get(name, {}).get("parameters", {}).get("required", []))
        for param, allowed in params.items():
            if param not in props and "" in allowed:  # optional in the key and unknown to the schema: omit
                continue
            ok, value = _pick(allowed)
            if not ok:
                if param not in required or "" not in allowed:
                    continue
                value = ""  # required by the schema, yet the key only accepts the empty value
            ptype = props.get(param, {}).get("type", "any")
            if language == "java":
                value = _java_literal(value, ptype, props.get(param, {}))
            elif language == "javascript":
                value = _js_literal(value, ptype)
            args[param] = value
        calls.append(ToolCall(name, args))
    return calls


class BFCLEnv(TaskEnv):
    """``genenv/BFCL-v0``: one BFCL single-turn entry per episode, structured action (a list of tool calls).

    Constructor: ``category`` (one of `SINGLE_TURN_CATEGORIES`, a list, or ``"all"``), ``split``
    (``"test"``/``"train"``/``"heldout"``), ``data_dir``, ``limit``, or ``tasks``. Reward: 1.0 iff bfcl-eval's
    checker accepts the calls. ``info``: ``success``, ``valid``, ``error``, ``error_type``, ``category``.
    """

    extra = "bfcl"
    extra_modules = ("bfcl_eval", "tree_sitter", "soundfile")
    benchmark = "bfcl"
    action_kind = "structured"
    ability = "tool_use"
    accepts_tool_calls = True

    def __init__(self, tasks: list[Task] | None = None, category: str | list[str] | None = "simple_python",
                 split: str | None = "test", data_dir: str | None = None, limit: int | None = None,
                 render_mode: str | None = None, parsing: str = "official"):
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         parsing=parsing,
                         category=category)

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, category: Any = "simple_python",
                   **_: Any) -> list[Task]:
        """See `load_bfcl_tasks`."""
        return load_bfcl_tasks(category=category, split=split, data_dir=data_dir)

    def make_action_space(self) -> ToolCallSpace:
        """Lists of calls; ``sample()`` calls the functions of the served tasks."""
        names = sorted({f["name"] for t in self.tasks for f in t.tools})
        return ToolCallSpace(names)

    @staticmethod
    def user_turn(functions: list[dict[str, Any]], request: str) -> str:
        """The user message that presents ``functions`` (as JSON) and the ``request``."""
        return f"Functions: {json.dumps(functions, ensure_ascii=False)}\nRequest: {request}"

    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """System instructions, one demonstrated turn, then the entry's request with its function schemas.

        Extra system messages of the entry (live categories) are prepended to the system prompt; earlier
        user / assistant messages of the entry's first turn are kept in order.
        """
        language = language_of(task.metadata.get("category", "simple_python"))
        question = task.metadata.get("question_messages") or [{"role": "user", "content": task.prompt}]
        system = "\n\n".join([m.get("content", "") for m in question if m.get("role") == "system"]
                               + [SYSTEM_PROMPT, LANGUAGE_NOTE[language]]).strip()
        dialogue = [{"role": m["role"], "content": m.get("content", "")} for m in question if m.get("role") != "system"]
        if dialogue and dialogue[-1]["role"] == "user":
            dialogue[-1] = {"role": "user", "content": cls.user_turn(task.tools, dialogue[-1]["content"])}
        else:
            dialogue.append({"role": "user", "content": cls.user_turn(task.tools, task.prompt)})
        return [{"role": "system", "content": system},
                {"role": "user", "content": cls.user_turn(DEMO_FUNCTIONS, DEMO_REQUEST)},
                {"role": "assistant", "content": DEMO_REPLY}] + dialogue

    @classmethod
    def parse_lenient(cls, text: str) -> list[ToolCall] | InvalidAction:
        """Lenient reading: tool calls from model text (`genenv.envs.parsing.parse_tool_calls`)."""
        return parse_or_invalid(parse_tool_calls, text)

    @classmethod
    def parse_official(cls, text: str) -> list[ToolCall] | InvalidAction:
        """Official reading: bfcl-eval's Qwen function-calling decoder
        (`genenv.benchmarks.bfcl.checker.official_calls`)."""
        return parse_or_invalid(official_calls, text)

    def score(self, task: Task, action: Any) -> tuple[float, dict[str, Any]]:
        """1.0 iff bfcl-eval's checker accepts the calls (see `genenv.benchmarks.bfcl.checker.bfcl_check`)."""
        calls = as_tool_calls(action)
        return self._result(task, [c.to_bfcl() for c in calls], "")

    def score_invalid(self, task: Task, action: InvalidAction) -> tuple[float, dict[str, Any]]:
        """An undecodable output is "no call": correct for irrelevance, wrong elsewhere (official rule)."""
        return self._result(task, None, action.reason)

    @staticmethod
    def _result(task: Task, calls: list[dict] | None, parse_error: str) -> tuple[float, dict[str, Any]]:
        category = task.metadata["category"]
        res = bfcl_check(calls, task.tools, task.gold, category, parse_error)
        error = "" if res.valid else (res.error or res.error_type)
        if not res.valid and parse_error and calls is None:
            error = parse_error
        return float(res.valid), {"success": res.valid, "valid": res.valid, "error": error,
                                  "error_type": res.error_type, "category": category}

    @classmethod
    def gold_action(cls, task: Task) -> list[ToolCall]:
        """See `gold_calls`."""
        return gold_calls(task)

    @classmethod
    def gold_text(cls, task: Task, turn: int = 0) -> str:
        """Gold calls as ``<tool_call>`` blocks; irrelevance: a plain-text refusal."""
        calls = gold_calls(task)
        if not calls:
            return "None of the given functions can be used for this request."
        return calls_text(calls)
