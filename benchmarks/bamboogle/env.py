"""Bamboogle environment (``genenv/Bamboogle-v0``): closed-book compositional questions, free-text answers.

Data: ``<data_dir>/bamboogle/test.jsonl`` (125 records ``idx, question, answer``; Press et al. 2022 via
R1-Searcher, identical to ToolRL's ``toolrl_data.json``; see ``shared/data/SOURCES.md``). Answers are stripped
(idx 75 ends with a newline). Splits: ``"test"`` = all 125 (the reported score); ``"train"`` (idx not divisible
by 5, 100 questions) / ``"heldout"`` (idx divisible by 5, 25 questions) for co-evolution.

A gold answer is a string or, where the data gives several, a list of aliases (kept a list; every metric takes
the best alias, `genenv.rewards.text.aliases`).

Scoring (the free-text branch of paper Eq. 1): ``reward = similarity(answer, gold, metric)`` with ``metric``
from `genenv.rewards.text.FREE_TEXT_METRICS` (default ``"f1"``). ``info`` always carries SQuAD exact match
(``em``, the ``success`` bit) and token F1 (``f1``); the ToolRL protocol's GPT-4o judge is not reproducible
offline, so EM stands in for "answer correctness" (see README).

Reading the answer (the env's ``parsing`` option):

- ``official`` (default): Search-R1's rule (``verl/utils/reward_score/qa_em.py: extract_solution`` in
  PeterGriffinJin/Search-R1, the reference for EM on Bamboogle with ``<answer>`` tags): the content of the
  *last* closed ``<answer>...</answer>`` block, stripped; no closed block, no answer (score 0). Search-R1 applies
  it to prompt + response and so skips the prompt's own example block; we apply it to the response alone.
- ``lenient``: `genenv.envs.parsing.parse_free_text`: ``<think>`` blocks removed; the *first*
  ``<answer>`` block, closed or not; else the text after the last ``Answer:``; else the first non-empty line;
  its first line, stripped.
"""
from __future__ import annotations

import re
from typing import Any

from genenv.benchmarks.bamboogle.data import bamboogle_dir
from genenv.envs.base import InvalidAction, TaskEnv, parse_or_invalid
from genenv.envs.data import benchmark_file, iter_jsonl, require_fields
from genenv.envs.parsing import ActionParseError, parse_free_text, raw_text
from genenv.envs.task import Task
from genenv.rewards.text import exact_match, first_alias, similarity, token_f1

__all__ = ["BamboogleEnv", "SPLIT_OPTIONS", "load_bamboogle_tasks"]

SPLITS = ("test", "train", "heldout")
SPLIT_OPTIONS = tuple({"split": s} for s in SPLITS)  # what genenv-envs counts; the first is the default split
SYSTEM_PROMPT = (
    "Answer the question with a short answer (a name, date, number or phrase), from your own knowledge. "
    "Give the final answer inside <answer> and </answer>, for example <answer> Beijing </answer>."
)
DEMO = ("Question: Who was the first president of the country whose capital is Washington, D.C.?",
        "<answer>George Washington</answer>")  # a worked turn, not a Bamboogle question
_CLOSED_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def last_answer_block(text: str) -> str:
    """The official reading of a Bamboogle answer: the content of the last closed ``<answer>...</answer>``
    block, stripped (Search-R1's ``extract_solution``; see the module docstring).

    Raises:
        ActionParseError: not a string, longer than `MAX_ACTION_CHARS`, or no closed
            ``<answer>`` block.
    """
    blocks = _CLOSED_ANSWER_RE.findall(raw_text(text))
    if not blocks:
        raise ActionParseError("no closed <answer>...</answer> block (official reading: Search-R1's rule)")
    return blocks[-1].strip()


def gold_answer(value: Any) -> str | list[str]:
    """A record's ``answer`` as a task's gold: a list of aliases stays a list (each stripped), anything else
    becomes its stripped string (idx 75 of the data ends with a newline)."""
    if isinstance(value, (list, tuple)):
        return [str(a).strip() for a in value]
    return str(value).strip()


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
        tasks.append(Task(id=f"bamboogle_{idx}", benchmark="bamboogle", split=split, prompt=rec["question"].strip(),
                          gold=gold_answer(rec["answer"]), action_kind="free_text"))
    return tasks


class BamboogleEnv(TaskEnv):
    """``genenv/Bamboogle-v0``: one question per episode, the action is the answer text.

    Constructor: ``split``, ``data_dir``, ``limit`` or ``tasks``, ``metric`` (the reward's similarity) and
    ``parsing`` (``"official"``: Search-R1's last ``<answer>`` block; ``"lenient"``: see the module docstring).
    ``info``: ``success`` (= EM), ``em``, ``f1``, ``metric``, ``answer``, ``error``.
    """

    benchmark = "bamboogle"
    action_kind = "free_text"
    ability = "qa"

    def __init__(self, tasks: list[Task] | None = None, split: str | None = "test", data_dir: str | None = None,
                 limit: int | None = None, metric: str = "f1", render_mode: str | None = None,
                 parsing: str = "official"):
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         parsing=parsing)
        similarity("x", "x", metric) if metric != "embedding" else None  # fail fast on an unknown metric name
        self.metric = metric

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, **_: Any) -> list[Task]:
        """See `load_bamboogle_tasks`."""
        return load_bamboogle_tasks(split=split, data_dir=data_dir)

    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """System instructions, one demonstrated turn, then ``Question: ...``."""
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": DEMO[0]},
                {"role": "assistant", "content": DEMO[1]}, {"role": "user", "content": f"Question: {task.prompt}"}]

    @classmethod
    def parse_lenient(cls, text: str) -> str | InvalidAction:
        """Lenient reading: the final answer (`genenv.envs.parsing.parse_free_text`)."""
        return parse_or_invalid(parse_free_text, text)

    @classmethod
    def parse_official(cls, text: str) -> str | InvalidAction:
        """Official reading: the last closed ``<answer>`` block (`last_answer_block`)."""
        return parse_or_invalid(last_answer_block, text)

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
        """The gold answer string (the first alias of a list)."""
        return first_alias(task.gold)

    @classmethod
    def gold_text(cls, task: Task, turn: int = 0) -> str:
        """``<answer>gold</answer>``, the demonstrated answer format (read alike by both parsing settings)."""
        return f"<answer>{first_alias(task.gold)}</answer>"
