"""The one task record shared by every benchmark, the task pool, the trainer and the leaderboard.

A `Task` is what an environment episode is about: the user-facing prompt, the tools (function schemas)
when the action space is structured, and the gold answer the reward compares against. It serialises to JSON
(lossless round trip); `genenv.envs.verl_rows` writes it as a veRL parquet row.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Task"]

ActionKind = Literal["structured", "free_text"]
Origin = Literal["seed", "generated"]


@dataclass
class Task:
    """One benchmark task.

    Attributes:
        id: unique id (the benchmark's own id for seed tasks, ``gen-<iteration>-<prompt>-<k>`` for generated ones).
        benchmark: registry name (``"bfcl"``, ``"bamboogle"``, ...).
        split: the data split the task comes from (``"test"``, ``"train"``, ``"heldout"``, ALFWorld's
            ``"valid_unseen"``, ...); generated tasks are ``"train"`` (they join the training pool). A benchmark's
            categories and levels are in ``metadata`` (BFCL ``category``, API-Bank ``level``), never here.
        prompt: the user request shown to the agent.
        gold: the gold answer in the benchmark's own form (BFCL: ``possible_answer`` ground truth list;
            Bamboogle: the answer string).
        action_kind: ``"structured"`` (tool/API calls, exact match) or ``"free_text"`` (soft similarity).
        tools: function schemas offered to the agent (BFCL ``function`` list), empty for free text.
        origin: ``"seed"`` (from the data) or ``"generated"`` (written by the environment policy).
        parent_id: for generated tasks, the seed task shown in the generation prompt that it derives from.
        admitted_iteration: the training iteration that wrote and admitted a generated task (``None`` for seeds).
        metadata: benchmark-specific extras (e.g. BFCL ``category``, language).
    """

    id: str
    benchmark: str
    split: str
    prompt: str
    gold: Any
    action_kind: ActionKind
    tools: list[dict[str, Any]] = field(default_factory=list)
    origin: Origin = "seed"
    parent_id: str | None = None
    admitted_iteration: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible dict of every field."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """One-line JSON string; `from_json` inverts it exactly."""
        return json.dumps(self.to_dict(), ensure_ascii=False)  # key order kept: prompts render dicts in order

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Task":
        """Build a task from `to_dict` output; raises ``ValueError`` naming unknown or missing keys."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"Task.from_dict: unknown keys {sorted(unknown)}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise ValueError(f"Task.from_dict: {exc}") from exc

    @classmethod
    def from_json(cls, text: str) -> "Task":
        """Inverse of `to_json`."""
        return cls.from_dict(json.loads(text))
