"""Bamboogle environment (``genenv/Bamboogle-v0``): closed-book compositional questions, free-text answers.

Data: ``<data_dir>/bamboogle/test.jsonl`` (125 records ``idx, question, answer``; Press et al. 2022 via
R1-Searcher, identical to ToolRL's ``toolrl_data.json``; see ``shared/data/SOURCES.md``). Answers are stripped
(idx 75 ends with a newline). Splits: ``"test"`` = all 125 (the reported score); ``"train"`` (idx not divisible
by 5, 100 questions) / ``"heldout"`` (idx divisible by 5, 25 questions) for co-evolution.

Scoring (the free-text branch of paper Eq. 1): ``reward = similarity(answer, gold, metric)`` with ``metric``
from :data:`genenv.rewards.text.FREE_TEXT_METRICS` (default ``"f1"``). ``info`` always carries SQuAD exact match
(``em``, the ``success`` bit) and token F1 (``f1``); the ToolRL protocol's GPT-4o judge is not reproducible
offline, so EM stands in for "answer correctness" (see README).
"""
from __future__ import annotations

from typing import Any

from genenv.benchmarks.bamboogle.data import bamboogle_dir
from genenv.envs.base import InvalidAction, TaskEnv, parse_or_invalid
from genenv.envs.data import benchmark_file, iter_jsonl, require_fields
from genenv.envs.parsing import parse_free_text
from genenv.envs.task import Task
from genenv.rewards.text import exact_match, similarity, token_f1

SPLITS = ("test", "train", "heldout")
SPLIT_OPTIONS = tuple({"split": s} for s in SPLITS)  # what genenv-envs counts; the first is the default split
SYSTEM_PROMPT = (
    "Answer the question with a short answer (a name, date, number or phrase), from your own knowledge. "
    "Give the final answer on its own line as 'Answer: <answer>'."
)
DEMO = ("Question: Who was the first president of the country whose capital is Washington, D.C.?",
        "Answer: George Washington")  # a worked turn, not a Bamboogle question


def load_bamboogle_tasks(split: str | None = "test", data_dir: str | None = None) -> list[Task]:
    """Load Bamboogle questions of ``split`` (``"test"``, ``"train"``, ``"heldout"``).

    Raises:
        ValueError: unknown split.
        DataError: missing file or malformed record (names file and line).
    """
    split = split or "test"
    if split not in SPLITS:
        raise ValueError(f"unknown Bamboogle split {split!r}; choose one of {SPLITS}")
    path = benchmark_file(bamboogle_dir(data_dir), "test.jsonl")
    tasks = []
    for lineno, rec in iter_jsonl(path):
        require_fields(rec, ("idx", "question", "answer"), f"{path} line {lineno}")
        idx = int(rec["idx"])
        in_split = "heldout" if idx % 5 == 0 else "train"
        if split != "test" and in_split != split:
            continue
        tasks.append(Task(id=f"bamboogle_{idx}", benchmark="bamboogle", split="test", prompt=rec["question"].strip(),
                          gold=str(rec["answer"]).strip(), action_kind="free_text"))
    return tasks


class BamboogleEnv(TaskEnv):
    """``genenv/Bamboogle-v0``: one question per episode, the action is the answer text.

    Constructor: ``split``, ``data_dir``, ``limit`` or ``tasks``, and ``metric`` (the reward's similarity).
    ``info``: ``success`` (= EM), ``em``, ``f1``, ``metric``, ``answer``, ``error``.
    """

    benchmark = "bamboogle"
    action_kind = "free_text"

    def __init__(self, tasks: list[Task] | None = None, split: str | None = "test", data_dir: str | None = None,
                 limit: int | None = None, metric: str = "f1", render_mode: str | None = None):
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode)
        similarity("x", "x", metric) if metric != "embedding" else None  # fail fast on an unknown metric name
        self.metric = metric

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, **_: Any) -> list[Task]:
        """See :func:`load_bamboogle_tasks`."""
        return load_bamboogle_tasks(split=split, data_dir=data_dir)

    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """System instructions, one demonstrated turn, then ``Question: ...``."""
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": DEMO[0]},
                {"role": "assistant", "content": DEMO[1]}, {"role": "user", "content": f"Question: {task.prompt}"}]

    @classmethod
    def parse_action(cls, text: str) -> str | InvalidAction:
        """The final answer (:func:`genenv.envs.parsing.parse_free_text`)."""
        return parse_or_invalid(parse_free_text, text)

    def score(self, task: Task, action: Any) -> tuple[float, dict[str, Any]]:
        """Reward = the configured similarity of the answer string to the gold answer; ``success`` = SQuAD EM.

        Raises:
            TypeError: the action is not a string (the base class scores that 0 with the reason).
        """
        if not isinstance(action, str):
            raise TypeError(f"Bamboogle actions are answer strings, got {type(action).__name__}")
        em = exact_match(action, task.gold)
        f1 = token_f1(action, task.gold)
        reward = {"exact_match": em, "f1": f1}.get(self.metric)
        if reward is None:
            reward = similarity(action, task.gold, self.metric)
        return float(reward), {"success": bool(em), "em": em, "f1": f1, "metric": self.metric, "answer": action}

    def score_invalid(self, task: Task, action: InvalidAction) -> tuple[float, dict[str, Any]]:
        """An unparseable answer: reward 0, EM and F1 0, the parser's reason in ``error``."""
        return 0.0, {"success": False, "em": 0.0, "f1": 0.0, "metric": self.metric, "answer": "",
                     "error": action.reason}

    @classmethod
    def gold_action(cls, task: Task) -> str:
        """The gold answer string."""
        return task.gold

    @classmethod
    def gold_text(cls, task: Task, turn: int = 0) -> str:
        """``Answer: <gold>``, the demonstrated answer format."""
        return f"Answer: {task.gold}"
