"""BFCL multi-turn environment (``genenv/BFCLMultiTurn-v0``; also ``gymnasium.make("genenv/BFCL-v0",
category="multi_turn_base")``): executable episodes on bfcl-eval's stateful backends.

Data: ``<data_dir>/bfcl/BFCL_v4_multi_turn_{base,miss_func,miss_param,long_context}.json`` (200 entries each:
``question`` = user turns, ``initial_config`` = backend states, ``involved_classes``, ``missed_function``) and
their ``possible_answer`` files (gold call strings per turn). Function docs are assembled by bfcl-eval's own
``populate_test_cases_with_predefined_functions`` and ``add_language_specific_hint_to_function_doc``
(``bfcl_eval/utils.py``), which also move miss_func's held-out docs to the turn that reveals them.

Episode (``bfcl_eval/model_handler/base_handler.py`` semantics): the agent sees the user turn; each step it
either makes calls, which execute on the backends (file system, messaging, posting, ticketing, trading, travel
booking, vehicle control, math) through bfcl-eval's ``execute_multi_turn_func_call``, and sees their results;
or replies without a decodable call, which ends the turn. More than 20 steps in one turn (bfcl-eval's
``MAXIMUM_STEP_LIMIT``) force-terminates the episode as failed. At a miss_func reveal turn the held-out
functions become callable and the user says so. The episode's reward is bfcl-eval's ``multi_turn_checker``
verdict (state check + response check after every turn), 1 or 0.

Protocols (loader option ``protocol``):
- ``"official"``: one task per entry, all turns; the checker over the whole episode (BFCL's multi-turn
  accuracy).
- ``"per_turn"``: the paper's protocol (GenEnv Table 1, BFCL column: long-context subset, each turn scored
  independently). One task per (entry, turn): the gold calls of the earlier turns are executed first and shown
  as history; the task is the one turn, correct iff its calls equal the gold calls as a multiset (order-free)
  and the checker's state and response checks pass on the gold prefix plus this turn.

Where our verdict can differ from bfcl-eval's on plausible model output:

- decoding: bfcl-eval's prompt-mode handlers decode one Python-syntax list ``[f(a=1), g(b=2)]``; we also accept
  ``<tool_call>`` JSON, a JSON list and ``API-Request:`` forms (`parse_tool_calls`),
  so a reply in those forms makes calls here but would end the turn in a prompt-mode run (function-calling
  handlers accept JSON). Numeric literals over 100 characters and nesting over 32 levels are parse errors here;
- ``per_turn`` adds the multiset check of the calls to the checker's state and response checks, so a turn that
  reaches the gold state with other calls (an extra ``ls``, a different but equivalent path) passes the
  official checker and fails here; ``official`` uses the checker alone;
- a turn's 21st step force-terminates the episode as failed, as bfcl-eval's ``MAXIMUM_STEP_LIMIT`` does.

Safety: model text is parsed by `genenv.envs.parsing.parse_tool_calls` (``ast`` + ``literal_eval``);
only calls to functions of the entry's backends, with literal values re-rendered by us, reach bfcl-eval's
executor. A call to any other name is an error observation and never executes. As in bfcl-eval's runner, a
held-out miss_func function executes if called before its reveal (the answer key of
``multi_turn_miss_func_49`` calls ``tail`` at turn 1, two turns before it is revealed).
"""
from __future__ import annotations

import ast
import copy
import json
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from genenv.benchmarks.bfcl.checker import official_calls
from genenv.benchmarks.bfcl.data import MULTI_TURN_CATEGORIES, bfcl_dir
from genenv.benchmarks.bfcl.prompts import DEMO_FUNCTIONS, DEMO_REPLY, DEMO_REQUEST, calls_text
from genenv.envs.base import InvalidAction, MultiStepTaskEnv
from genenv.envs.data import DataError, benchmark_file, iter_jsonl, require_fields, split_of
from genenv.envs.parsing import ActionParseError, ToolCall, parse_free_text, parse_tool_calls
from genenv.envs.task import Task

__all__ = [
    "BFCLMultiTurnEnv", "DEMO", "MULTI_TURN_CATEGORIES", "REVEAL_MESSAGE", "SPLIT_OPTIONS", "TURN_STEP_LIMIT",
    "all_functions", "call_string", "free_instances", "gold_call", "load_multi_turn_tasks", "run_calls",
]

PROTOCOLS = ("official", "per_turn")
SPLITS = ("test", "train", "heldout")
SPLIT_OPTIONS = tuple({"category": c, "split": s, "protocol": p} for p in PROTOCOLS for c in MULTI_TURN_CATEGORIES
                      for s in SPLITS)
TURN_STEP_LIMIT = 20  # bfcl-eval constants: MAXIMUM_STEP_LIMIT (a turn's 21st step force-terminates)
REVEAL_MESSAGE = "I have updated some more functions you can choose from. What about now?"  # bfcl-eval's text
END_OF_TURN = "Done."
# One demonstrated request (calls, results, end of turn) with its own function, not from BFCL: small models
# follow a demonstrated protocol far better than a described one (SmolLM2 answered in prose without it).
DEMO = [{"role": "user", "content": f"(Example, with its own function {json.dumps(DEMO_FUNCTIONS)})\n{DEMO_REQUEST}"},
        {"role": "assistant", "content": DEMO_REPLY},
        {"role": "user", "content": "Results:\nget_weather(city='Paris', unit='celsius') -> {\"temperature\": 18}"},
        {"role": "assistant", "content": "It is 18 degrees celsius in Paris. " + END_OF_TURN}]
SYSTEM_PROMPT = (
    "You are an expert in composing functions. You work for a user over several requests, on a system with the "
    "functions below (JSON). For each request, make the calls it needs, each as "
    '<tool_call>\n{"name": <function name>, "arguments": <JSON object>}\n</tool_call>; several calls may go in one '
    "reply. After each reply you see the results. When the request is done, or no function applies, reply in "
    "plain text without any call: that ends the request.\n\nFunctions: ")


@dataclass(frozen=True)
class EndTurn:
    """The agent's reply without a decodable call: it ends the current turn. ``error`` is set when the reply
    looked like a malformed call rather than a plain-text answer."""

    text: str
    error: str = ""


def _bfcl_utils():
    import bfcl_eval.utils as utils  # creates result/score dirs under $BFCL_PROJECT_ROOT on import

    return utils


def _executor():
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    return multi_turn_utils


def free_instances(prefix: str) -> None:
    """Drop the backend instances bfcl-eval cached for model names starting with ``prefix`` (it keeps them in
    its module globals for ever)."""
    module_globals = vars(_executor())
    for key in [k for k in module_globals if k.startswith(prefix) and k.endswith("_instance")]:
        del module_globals[key]


def run_calls(calls: list[str], task: Task, model_name: str) -> tuple[list[str], dict[str, Any]]:
    """Execute call strings on the task's backends under ``model_name`` (bfcl-eval's
    ``execute_multi_turn_func_call``; instances are created from ``initial_config`` on first use and keep their
    state per name). Returns one result string per call and the backend instances by class name."""
    meta = task.metadata
    return _executor().execute_multi_turn_func_call(
        calls, meta["initial_config"], meta["involved_classes"], model_name, meta["entry_id"],
        long_context=meta["long_context"])


def execute_calls(calls: list[str], task: Task, model_name: str) -> list[str]:
    """The result strings of `run_calls`."""
    return run_calls(calls, task, model_name)[0]


def call_string(call: ToolCall) -> str:
    """``name(k=<repr>, ...)``: the executable form of a parsed call (values are literals re-rendered here)."""
    return f"{call.name}({', '.join(f'{k}={v!r}' for k, v in call.arguments.items())})"


def gold_call(text: str, functions: list[dict[str, Any]]) -> ToolCall:
    """A gold call string of the answer key as a `ToolCall`; positional arguments (a few single-argument
    gold calls, e.g. ``sort('report.pdf')``) are named after the function doc's parameters, in order.

    Raises:
        DataError: not a call of literals, or an unknown function.
    """
    try:
        node = ast.parse(text, mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError("not a call")
        doc = next((f for f in functions if f["name"] == node.func.id), None)
        if doc is None:
            raise ValueError(f"unknown function {node.func.id}")
        names = list(doc["parameters"].get("properties", {}))
        args = {names[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
        args.update({kw.arg: ast.literal_eval(kw.value) for kw in node.keywords})
    except (SyntaxError, ValueError, IndexError) as exc:
        raise DataError(f"gold call {text!r}: {exc}") from None
    return ToolCall(node.func.id, args)


def canonical(call: ToolCall) -> str:
    """Order-free comparison key of a call (name + arguments as sorted JSON)."""
    return json.dumps([call.name, call.arguments], sort_keys=True, default=str)


def all_functions(task: Task) -> list[dict[str, Any]]:
    """Every function doc of the task, held-out ones included."""
    held = [f for docs in task.metadata["missed_function"].values() for f in docs]
    return list(task.tools) + held


def load_multi_turn_tasks(category: str = "multi_turn_base", split: str | None = "test",
                          data_dir: str | None = None, protocol: str = "official") -> list[Task]:
    """Load BFCL multi-turn tasks.

    Args:
        category: one of `MULTI_TURN_CATEGORIES`, a comma list, or ``"all"``.
        split: ``"test"`` (every entry) or the co-evolution ``"train"`` / ``"heldout"`` (hash of the id, as
            single-turn BFCL).
        protocol: ``"official"`` (one task per entry) or ``"per_turn"`` (one task per entry and turn).
    Returns:
        tasks with ``gold`` = the gold call strings per turn, ``tools`` = the functions available at turn 0,
        ``metadata``: entry_id, category, turns (user messages per turn), initial_config, involved_classes,
        missed_function (turn → docs), long_context, protocol, start_turn, end_turn.
    Raises:
        ValueError: unknown category, split or protocol.
        DataError: missing file, malformed record, or an entry without answers.
    """
    split = split or "test"
    if split not in SPLITS:
        raise ValueError(f"unknown BFCL split {split!r}; choose one of {SPLITS}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; choose one of {PROTOCOLS}")
    cats = list(MULTI_TURN_CATEGORIES) if category in (None, "all") else (
        [c.strip() for c in category.split(",")] if isinstance(category, str) else list(category))
    root = bfcl_dir(data_dir)
    utils = _bfcl_utils()
    tasks: list[Task] = []
    for cat in cats:
        if cat not in MULTI_TURN_CATEGORIES:
            raise ValueError(f"unknown BFCL multi-turn category {cat!r}; choose from {MULTI_TURN_CATEGORIES}")
        qpath = benchmark_file(root, f"BFCL_v4_{cat}.json")
        apath = benchmark_file(root, "possible_answer", f"BFCL_v4_{cat}.json")
        answers = {}
        for lineno, rec in iter_jsonl(apath):
            require_fields(rec, ("id", "ground_truth"), f"{apath} line {lineno}")
            answers[rec["id"]] = rec["ground_truth"]
        entries = []
        for lineno, rec in iter_jsonl(qpath):
            require_fields(rec, ("id", "question", "initial_config", "involved_classes"), f"{qpath} line {lineno}")
            if rec["id"] not in answers or len(answers[rec["id"]]) != len(rec["question"]):
                raise DataError(f"{qpath} line {lineno}: no answer with one gold list per turn for {rec['id']!r}")
            if split == "test" or split_of(rec["id"]) == split:
                entries.append(rec)
        utils.populate_test_cases_with_predefined_functions(entries)  # official doc assembly (mutates)
        utils.add_language_specific_hint_to_function_doc(entries)
        for rec in entries:
            tasks += _entry_tasks(rec, answers[rec["id"]], cat, protocol)
    return tasks


def _entry_tasks(rec: dict[str, Any], gold: list[list[str]], category: str, protocol: str) -> list[Task]:
    meta = {"entry_id": rec["id"], "category": category, "turns": rec["question"],
            "initial_config": rec["initial_config"], "involved_classes": rec["involved_classes"],
            "missed_function": dict(rec.get("missed_function") or {}), "long_context": "long_context" in category,
            "protocol": protocol, "start_turn": 0, "end_turn": len(gold) - 1}
    split = split_of(rec["id"])
    base = dict(benchmark="bfcl_multi_turn", split=split, gold=gold, action_kind="structured",
                tools=rec["function"])
    if protocol == "official":
        return [Task(id=rec["id"], prompt=_user_text(rec["question"][0]), metadata=meta, **base)]
    out = []
    for k in range(len(gold)):
        if not gold[k]:  # turns whose correct behaviour is no call are not scored alone (as the checker)
            continue
        out.append(Task(id=f"{rec['id']}@turn{k}", prompt=_user_text(rec["question"][k]) or REVEAL_MESSAGE,
                        metadata={**meta, "start_turn": k, "end_turn": k}, **base))
    return out


def _user_text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m.get("content", "") for m in messages if m.get("role") == "user")


def functions_json(functions: list[dict[str, Any]]) -> str:
    """The function docs shown to the agent (name, description, parameters), compact JSON."""
    return json.dumps([{k: f[k] for k in ("name", "description", "parameters") if k in f} for f in functions],
                      ensure_ascii=False)


def results_text(calls: list[str], results: list[str]) -> str:
    """The observation after a step: one ``call -> result`` line per call."""
    return "Results:\n" + "\n".join(f"{c} -> {r}" for c, r in zip(calls, results))


def turn_message(task: Task, turn: int) -> str:
    """The user message opening ``turn`` (the reveal message with the new functions at a miss_func turn)."""
    revealed = task.metadata["missed_function"].get(str(turn))
    text = _user_text(task.metadata["turns"][turn])
    if revealed:
        text = f"{REVEAL_MESSAGE}\nNew functions: {functions_json(revealed)}" + (f"\n{text}" if text else "")
    return text


def gold_steps(task: Task) -> list[str]:
    """The gold policy's replies, turn by turn from ``start_turn`` to ``end_turn``: the turn's gold calls in one
    reply (if any), then the end-of-turn text."""
    functions = all_functions(task)
    steps = []
    for turn in range(task.metadata["start_turn"], task.metadata["end_turn"] + 1):
        if task.gold[turn]:
            steps.append(calls_text([gold_call(c, functions) for c in task.gold[turn]]))
        steps.append(END_OF_TURN)
    return steps


class BFCLMultiTurnEnv(MultiStepTaskEnv):
    """``genenv/BFCLMultiTurn-v0`` (see module docstring). Constructor: ``category``, ``split``, ``protocol``,
    ``data_dir``, ``limit`` or ``tasks``; ``max_steps`` (all turns together, default 200).

    ``info`` at the end of an episode: ``success`` (the checker's verdict), ``error_type`` (the checker's, or
    ``multi_turn:force_terminated``), ``error``; after every step: ``turn``, ``turn_steps``.
    """

    extra = "bfcl"
    extra_modules = ("bfcl_eval", "tree_sitter", "soundfile")
    benchmark = "bfcl_multi_turn"
    action_kind = "structured"
    ability = "tool_use"
    accepts_tool_calls = True
    idle_text = END_OF_TURN
    default_max_steps = 200

    def __init__(self, tasks: list[Task] | None = None, category: str = "multi_turn_base",
                 split: str | None = "test", data_dir: str | None = None, protocol: str = "official",
                 limit: int | None = None, render_mode: str | None = None, max_steps: int | None = None,
                 parsing: str = "official"):
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         parsing=parsing,
                         max_steps=max_steps, category=category, protocol=protocol)
        self.model_name = ""

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, category: str = "multi_turn_base",
                   protocol: str = "official", **_: Any) -> list[Task]:
        """See `load_multi_turn_tasks`."""
        return load_multi_turn_tasks(category=category, split=split, data_dir=data_dir, protocol=protocol)

    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """System instructions with the function docs, one demonstrated example request (`DEMO`), then
        (per-turn protocol) the gold history of the earlier turns with its real execution results, then the
        current user turn."""
        start = task.metadata["start_turn"]
        functions = all_functions(task)
        messages = [{"role": "system", "content": SYSTEM_PROMPT + functions_json(task.tools)}, *DEMO]
        if start:
            name = f"genenv_render_{uuid.uuid4().hex}"
            try:
                for turn in range(start):
                    messages.append({"role": "user", "content": turn_message(task, turn)})
                    if task.gold[turn]:
                        calls = [gold_call(c, functions) for c in task.gold[turn]]
                        strings = [call_string(c) for c in calls]
                        messages += [{"role": "assistant", "content": calls_text(calls)},
                                     {"role": "user", "content": results_text(strings,
                                                                             execute_calls(strings, task, name))}]
                    messages.append({"role": "assistant", "content": END_OF_TURN})
            finally:
                free_instances(name)
        messages.append({"role": "user", "content": turn_message(task, start)})
        return messages

    @classmethod
    def parse_lenient(cls, text: str) -> list[ToolCall] | EndTurn | InvalidAction:
        """Calls (`parse_tool_calls`), or `EndTurn` for a reply without a decodable call (with the
        parser's reason as ``error`` when the reply looks like a malformed call or has no words)."""
        if not isinstance(text, str):
            return InvalidAction(f"expected model text (str), got {type(text).__name__}")
        try:
            return parse_tool_calls(text)
        except ActionParseError as exc:
            try:  # a plain-text reply (bounded length, has words, no call markup) ends the turn without error
                parse_free_text(text)
                plain = "<tool_call>" not in text and "{" not in text
            except ActionParseError:
                plain = False
            return EndTurn(text[:2000], "" if plain else str(exc))

    @classmethod
    def parse_official(cls, text: str) -> list[ToolCall] | EndTurn | InvalidAction:
        """Official reading: the calls bfcl-eval's Qwen function-calling decoder reads
        (`genenv.benchmarks.bfcl.checker.official_calls`); a reply where it reads none ends the turn, as
        bfcl-eval's multi-turn inference loop ends a turn when decoding yields no call (``error`` set when the
        reply has no words either, as for the lenient reading)."""
        try:
            calls = official_calls(text)
            if not calls:
                parse_free_text(text)  # a reply with words ends the turn without error
        except ActionParseError as exc:
            return EndTurn(text[:2000] if isinstance(text, str) else "", str(exc))
        return calls or EndTurn(text[:2000], "")

    # ----- episode -----
    def start(self, task: Task) -> None:
        """Fresh backend instances (a unique bfcl-eval model name); the per-turn protocol executes the gold
        calls of the earlier turns first."""
        self.close()
        self.model_name = f"genenv_{uuid.uuid4().hex}"
        meta = task.metadata
        self.turn, self.turn_steps = meta["start_turn"], 0
        self.functions = all_functions(task)
        self.available = {f["name"] for f in self.functions}  # bfcl-eval executes any backend function
        self.decoded: list[list[list[str]]] = []  # [turn][step][call string], from turn 0 (gold prefix)
        for turn in range(self.turn):
            strings = [call_string(gold_call(c, self.functions)) for c in task.gold[turn]]
            if strings:
                execute_calls(strings, task, self.model_name)
            self.decoded.append([strings] if strings else [])
        self.decoded.append([])

    def transition(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        """Execute calls (an error observation for unknown functions) or end the turn; score at the end."""
        info: dict[str, Any] = {"turn": self.turn}
        if isinstance(action, EndTurn):
            return self._end_turn(action, info)
        calls = action if isinstance(action, list) else None
        if not calls or not all(isinstance(c, ToolCall) for c in calls):
            return "Invalid action: expected a list of calls.", 0.0, False, {
                **info, "success": False, "error": f"expected a list of ToolCall, got {type(action).__name__}"}
        strings = [call_string(c) for c in calls if c.name in self.available]
        executed = iter(execute_calls(strings, self.task, self.model_name) if strings else [])
        shown, outcomes, errors = [], [], []
        for call in calls:
            if call.name in self.available:
                shown.append(call_string(call))
                outcomes.append(next(executed))
            else:  # never executed
                shown.append(f"{call.name}(...)")
                outcomes.append(f"Error: no function named '{call.name}'")
                errors.append(f"{call.name} is not a function of this system")
        if strings:
            self.decoded[-1].append(strings)
        self.turn_steps += 1
        info.update(turn_steps=self.turn_steps, error="; ".join(errors))
        if self.turn_steps > TURN_STEP_LIMIT:
            return self._finish({**info, "error": "step limit of the turn exceeded"}, forced=True)
        return results_text(shown, outcomes), 0.0, False, {**info, "success": False}

    def _end_turn(self, action: EndTurn, info: dict[str, Any]) -> tuple[str, float, bool, dict[str, Any]]:
        info["error"] = action.error
        if self.turn >= self.task.metadata["end_turn"]:
            return self._finish(info)
        self.turn += 1
        self.turn_steps = 0
        self.decoded.append([])
        return turn_message(self.task, self.turn), 0.0, False, {**info, "success": False, "turn": self.turn}

    def _finish(self, info: dict[str, Any], forced: bool = False) -> tuple[str, float, bool, dict[str, Any]]:
        verdict = {"valid": False, "error_type": "multi_turn:force_terminated"} if forced else self.check()
        success = bool(verdict["valid"])
        info.update(success=success, error_type=verdict.get("error_type", ""),
                    checker_message=str(verdict.get("error_message", ""))[:300])
        self.close()
        return "The episode is over.", float(success), True, info

    def check(self) -> dict[str, Any]:
        """bfcl-eval's ``multi_turn_checker`` on this episode's calls (official: all turns; per-turn: the gold
        prefix plus this turn, and the turn's calls must equal the gold calls as a multiset)."""
        from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

        meta = self.task.metadata
        end = meta["end_turn"]
        entry = {"id": meta["entry_id"], "initial_config": meta["initial_config"],
                 "involved_classes": meta["involved_classes"]}
        name = f"{self.model_name}_check"
        try:
            verdict = multi_turn_checker(copy.deepcopy(self.decoded[:end + 1]), self.task.gold[:end + 1], entry,
                                         meta["category"], name)
        finally:
            free_instances(name)
        if verdict["valid"] and meta["protocol"] == "per_turn":
            made = Counter(canonical(gold_call(c, self.functions)) for step in self.decoded[end] for c in step)
            want = Counter(canonical(gold_call(c, self.functions)) for c in self.task.gold[end])
            if made != want:
                return {"valid": False, "error_type": "per_turn:calls_mismatch",
                        "error_message": f"calls differ from the gold calls of turn {end}"}
        return verdict

    def close(self) -> None:
        """Free this episode's backend instances."""
        if self.model_name:
            free_instances(self.model_name)
        super().close()

    @classmethod
    def gold_action(cls, task: Task) -> list[str]:
        """The gold policy's replies (`gold_steps`)."""
        return gold_steps(task)
