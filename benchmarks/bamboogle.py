"""Bamboogle spec: closed-book QA evaluation (EM / F1) and environment-generated question-answer pairs."""
from __future__ import annotations

from typing import Any, Sequence

from genenv.benchmarks.registry import register_benchmark
from genenv.benchmarks.spec import BenchmarkSpec, Metric, Rejection, extract_json_object
from genenv.envs.task import Task

MAX_ANSWER_WORDS = 12  # "a short answer": longer answers are rejected as not_short


@register_benchmark
class BamboogleSpec(BenchmarkSpec):
    """Bamboogle: 125 two-hop questions with short answers (Press et al. 2022)."""

    name = "bamboogle"
    baseline_column = "bamboogle"
    paper_protocol = "ToolRL: multi-round Google search tool, answers judged by GPT-4o"
    seed_options: dict[str, Any] = {}
    rejection_reasons = ("missing_fields", "empty_field", "answer_not_short", "answer_in_question")
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
        """Exact match (the number placed beside the paper's Bamboogle column)."""
        return next((m for m in metrics if m.key == "bamboogle/em"), None)

    generation_system_prompt = (
        "You write new quiz questions for a question-answering agent. Each question combines two facts "
        "(a two-hop question) and has one short answer. Reply with exactly one JSON object "
        '{"question": "...", "answer": "..."} and nothing else.')

    def as_generation(self, task: Task) -> dict[str, Any]:
        """``{"question", "answer"}``."""
        return {"question": task.prompt, "answer": task.gold}

    def parse_generated(self, text: str, task_id: str, step: int, parent: Task | None) -> Task | Rejection:
        """Strict JSON ``{"question", "answer"}``; both non-empty strings, the answer at most 12 words."""
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
        if answer.lower() in question.lower():
            return Rejection("answer_in_question", answer)
        return Task(id=task_id, benchmark=self.name, split="generated", prompt=question, gold=answer,
                    action_kind="free_text", origin="generated", parent_id=parent.id if parent else None,
                    generation_step=step)
