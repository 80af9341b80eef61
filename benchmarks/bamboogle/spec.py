"""Bamboogle spec: closed-book QA evaluation (EM / F1) and environment-generated question-answer pairs.

The paper's Bamboogle column follows ToolRL (a live Google search tool, answers judged by GPT-4o), which an
offline run cannot reproduce: no metric of this spec stands beside it (``paper_unavailable`` says why).

What an offline validator can and cannot check about a generated two-hop question. It cannot check that the
answer is *true* or that the question really takes two hops: that needs the world's facts (a search engine or a
knowledge base), which a run does not have. It can check the form of a question a closed-book agent can be scored
on, each failure a counted rejection reason (rules calibrated so that all 125 Bamboogle questions pass):

- ``not_a_question``: the question ends with ``?``;
- ``answer_not_short``: the answer has at most 12 words (Bamboogle's longest: 10);
- ``answer_is_sentence``: the answer is a name, date, number or phrase, not a clause (no finite verb such as
  "is" / "was" / "have", no pronoun subject) and does not end with a sentence's full stop (``Sr.`` is fine);
- ``answer_not_entity``: the answer does not open with an indefinite article ("A mix of people") and holds no
  code or template characters (``{5}``, ``<name>``);
- ``answer_type_mismatch``: the answer has the type the question asks for: a yes/no question ("Can ...?",
  "Is ...?") is answered yes or no and only it is; "How many / much / large / long ..." asks for a quantity
  (a number in digits or words); "When ...?" and "In what year ...?" ask for a date (a year in digits);
- ``answer_in_question``: the answer cannot be read off the question: it does not occur in it as whole words,
  and not all of its content words occur in it.

Duplicates are the shared near-duplicate rule on the question text. With ``grounded = False`` only the format,
shortness and whole-word rules apply.
"""
from __future__ import annotations

import re
from typing import Any, Sequence

from genenv.benchmarks.grounding import normalise, stated_numbers
from genenv.benchmarks.spec import BenchmarkSpec, Metric
from genenv.benchmarks.task_writer import Rejection, extract_json_object
from genenv.benchmarks.bounded_schema import json_object, text
from genenv.envs.task import Task
from genenv.rewards.text import first_alias

__all__ = ["BamboogleSpec"]

QUESTION_CHARS = 160  # a generated question, before its '?' (the 125 questions: 131 characters at most)
ANSWER_CHARS = 64  # a generated answer (60 at most; answer_not_short allows 12 words)

MAX_ANSWER_WORDS = 12  # "a short answer": longer answers are rejected as not_short
_AUX = {"is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "will", "would", "should", "has",
        "have", "had", "may", "might", "must", "shall"}
_CLAUSE = {"is", "are", "was", "were", "am", "be", "been", "being", "has", "have", "had", "does", "did", "because",
           "i", "you", "he", "she", "it", "we", "they", "there"}  # words a name or date does not contain
_STOP = {"the", "a", "an", "of", "in", "on", "at", "to", "for", "and", "or", "by", "with", "from", "de"}
_MARKUP = re.compile(r"[{}\[\]<>|\\=*#@_~^`]")  # code or template characters: no name, date or number has them
_QUANTITY = re.compile(r"\bhow (many|much|large|long|old|tall|far|big|high|deep|wide|heavy)\b", re.I)


def question_type(question: str) -> str:
    """``yes_no`` (opens with an auxiliary verb), ``quantity`` ("how many / much / large ..."), ``date``
    ("When ...", "in what year", "what date"), ``person`` ("who"), ``place`` ("where", "in what country /
    city"), else ``other``. The answer-type rule checks the first three; all six are EnvGen's skills."""
    words = question.strip().lower().split()
    if not words:
        return "other"
    if words[0] in _AUX:
        return "yes_no"
    if _QUANTITY.search(question):
        return "quantity"
    if words[0] == "when" or re.search(r"\b(what|which) (year|date)\b", question, re.I):
        return "date"
    if re.search(r"\bwho(m|se)?\b", question, re.I):
        return "person"
    if re.search(r"\bwhere\b|\b(what|which) (country|city|state|place)\b", question, re.I):
        return "place"
    return "other"


def answer_problem(question: str, answer: str) -> Rejection | None:
    """The first grounded-validation rule (module docstring) that ``answer`` to ``question`` breaks, or ``None``."""
    words = answer.split()
    if not question.rstrip().endswith("?"):
        return Rejection("not_a_question", "the question does not end with '?'")
    lower = [w.strip(",.;:!\"'()").lower() for w in words]
    if any(w in _CLAUSE for w in lower) or re.search(r"[a-z]{4,}\.$", answer) or answer.endswith(("!", "?")):
        return Rejection("answer_is_sentence", answer[:80])
    if (lower and lower[0] in ("a", "an") and len(words) > 1) or _MARKUP.search(answer):
        return Rejection("answer_not_entity", answer[:80])
    kind = question_type(question)
    yes_no = lower in (["yes"], ["no"])
    has_number = bool(stated_numbers(answer))
    if (kind == "yes_no") != yes_no:
        return Rejection("answer_type_mismatch", f"a {kind.replace('_', '/')} question answered {answer[:40]!r}")
    if kind == "quantity" and not has_number:
        return Rejection("answer_type_mismatch", f"a quantity question answered {answer[:40]!r}")
    if kind == "date" and not re.search(r"\d", answer):
        return Rejection("answer_type_mismatch", f"a date question answered {answer[:40]!r}")
    content = [w for w in normalise(answer).split() if w not in _STOP]
    asked = set(normalise(question).split())
    if not yes_no and content and all(w in asked for w in content):
        return Rejection("answer_in_question", answer[:80])
    return None


class BamboogleSpec(BenchmarkSpec):
    """Bamboogle: 125 two-hop questions with short answers (Press et al. 2022)."""

    name = "bamboogle"
    baseline_column = "bamboogle"
    paper_protocol = "ToolRL: multi-round Google search tool, answers judged by GPT-4o"
    paper_options: dict[str, Any] = {}  # closed-book EM / F1 only: the paper's protocol cannot run offline
    paper_unavailable = "needs a live Google search tool and a GPT-4o judge"
    seed_options: dict[str, Any] = {}
    rejection_reasons = ("missing_fields", "empty_field", "answer_not_short", "answer_in_question", "not_a_question",
                         "answer_is_sentence", "answer_not_entity", "answer_type_mismatch")
    grounding_reasons = ("not_a_question", "answer_is_sentence", "answer_not_entity", "answer_type_mismatch",
                         "answer_in_question")
    PROTOCOL = "closed-book, SQuAD-normalised (no search tool, no LLM judge)"

    def summarize(self, unit: str, trajectories: Sequence[Any]) -> list[Metric]:
        """``bamboogle/em``, ``bamboogle/f1`` (SQuAD normalisation) and ``bamboogle/reward`` (the training reward)."""
        n = len(trajectories)
        if n == 0:
            return []
        em = sum(t.info.get("em", 0.0) for t in trajectories) / n
        f1 = sum(t.info.get("f1", 0.0) for t in trajectories) / n
        reward = sum(t.reward for t in trajectories) / n
        return [Metric("bamboogle/em", em, n, f"exact match, {self.PROTOCOL}"),
                Metric("bamboogle/f1", f1, n, f"token F1, {self.PROTOCOL}"),
                Metric("bamboogle/reward", reward, n, "mean agent reward (configured free-text similarity)")]

    def headline(self, metrics: Sequence[Metric]) -> Metric | None:
        """Exact match, closed-book. Not the paper's protocol (search tool, GPT-4o judge: ``paper_unavailable``),
        so `paper_metric` is ``None``."""
        return next((m for m in metrics if m.key == "bamboogle/em"), None)

    generation_system_prompt = (
        "You write new quiz questions for a question-answering agent. Each question combines two facts "
        "(a two-hop question) and has one short answer: a name, a date, a number or yes/no, never a sentence. "
        'Reply with exactly one JSON object {"question": "...", "answer": "..."} and nothing else.')

    def generation_schema(self, seeds: Sequence[Task]) -> dict[str, Any]:
        """``{"question": up to QUESTION_CHARS characters then "?", "answer": up to ANSWER_CHARS}``, bounded text
        without ``"`` or backslash (`text`; the grammar enforces
        ``not_a_question``)."""
        return json_object({"question": text(QUESTION_CHARS, 1, suffix="?"), "answer": text(ANSWER_CHARS, 1)})

    def demonstrable(self, task: Task) -> bool:
        """Tasks whose own demonstration the validator admits and the schema fits (97 of the 100 train
        questions: the others hold a ``"`` or a non-ASCII character)."""
        return self.admits_own_demonstration(task)

    def skill_of(self, task: Task) -> str:
        """The question type (`question_type`)."""
        return question_type(task.prompt)

    def as_generation(self, task: Task) -> dict[str, Any]:
        """``{"question", "answer"}``."""
        return {"question": task.prompt, "answer": first_alias(task.gold)}

    def parse_generated(self, text: str, task_id: str, iteration: int, parent: Task | None) -> Task | Rejection:
        """Strict JSON ``{"question", "answer"}``; both non-empty strings, the answer at most 12 words and not in
        the question as whole words; with `grounded`, the rules of the module docstring."""
        obj = extract_json_object(text)
        if isinstance(obj, Rejection):
            return obj
        question, answer = obj.get("question"), obj.get("answer")
        if not isinstance(question, str) or not isinstance(answer, (str, int, float)) or isinstance(answer, bool):
            return Rejection("missing_fields", "needs string 'question' and 'answer'")
        question, answer = question.strip(), str(answer).strip()
        if not question or not answer:
            return Rejection("empty_field", "question or answer is empty")
        if len(answer.split()) > MAX_ANSWER_WORDS:
            return Rejection("answer_not_short", f"{len(answer.split())} words")
        if re.search(rf"(?<!\w){re.escape(answer.lower())}(?!\w)", question.lower()):
            return Rejection("answer_in_question", answer)
        problem = answer_problem(question, answer) if self.grounded else None
        if problem is not None:
            return problem
        return Task(id=task_id, benchmark=self.name, split="train", prompt=question, gold=answer,
                    action_kind="free_text", origin="generated", parent_id=parent.id if parent else None,
                    admitted_iteration=iteration)
