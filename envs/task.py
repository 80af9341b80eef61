"""The one task record shared by every benchmark, the task pool, the trainer and the leaderboard.

A :class:`Task` is what an environment episode is about: the user-facing prompt, the tools (function schemas)
when the action space is structured, and the gold answer the reward compares against. It serialises to JSON
(lossless round trip) and to a veRL parquet row (``data_source``, ``prompt`` chat messages, ``ability``,
``reward_model.{style,ground_truth}``, ``extra_info``), the format of veRL's ``RLHFDataset``.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

ActionKind = Literal["structured", "free_text"]
Origin = Literal["seed", "generated"]


@dataclass
class Task:
    """One benchmark task.

    Attributes:
        id: unique id (the benchmark's own id for seed tasks, ``gen-<step>-<n>`` for generated ones).
        benchmark: registry name (``"bfcl"``, ``"bamboogle"``, ...).
        split: data split or category the task comes from (e.g. ``"simple_python"``, ``"test"``).
        prompt: the user request shown to the agent.
        gold: the gold answer in the benchmark's own form (BFCL: ``possible_answer`` ground truth list;
            Bamboogle: the answer string).
        action_kind: ``"structured"`` (tool/API calls, exact match) or ``"free_text"`` (soft similarity).
        tools: function schemas offered to the agent (BFCL ``function`` list), empty for free text.
        origin: ``"seed"`` (from the data) or ``"generated"`` (written by the environment policy).
        parent_id: for generated tasks, the seed task shown in the generation prompt that it derives from.
        generation_step: training iteration at which a generated task was admitted (``None`` for seeds).
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
    generation_step: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible dict of every field."""
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        """One-line JSON string; :meth:`from_json` inverts it exactly."""
        return json.dumps(self.to_dict(), ensure_ascii=False)  # key order kept: prompts render dicts in order

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Task":
        """Build a task from :meth:`to_dict` output; raises ``ValueError`` naming unknown or missing keys."""
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
        """Inverse of :meth:`to_json`."""
        return cls.from_dict(json.loads(text))

    def to_verl_row(self) -> dict[str, Any]:
        """The task as one row of veRL's RL parquet format.

        ``prompt`` holds the chat messages the environment renders for the agent, ``reward_model.ground_truth``
        the gold answer as a JSON string (veRL passes it untouched to ``compute_score``), ``extra_info`` the
        whole task as JSON so that the row converts back with :meth:`from_verl_row`.
        """
        from genenv.envs.registry import render_messages

        return {
            "data_source": f"genenv/{self.benchmark}",
            "prompt": render_messages(self),
            "ability": "tool_use" if self.action_kind == "structured" else "qa",
            "reward_model": {"style": "rule", "ground_truth": json.dumps(self.gold, ensure_ascii=False)},
            "extra_info": {"task_id": self.id, "split": self.split, "task_json": self.to_json()},
        }

    @classmethod
    def from_verl_row(cls, row: dict[str, Any]) -> "Task":
        """Inverse of :meth:`to_verl_row` (reads ``extra_info.task_json``)."""
        return cls.from_json(row["extra_info"]["task_json"])


def write_verl_parquet(tasks: list[Task], path) -> None:
    """Write ``tasks`` as a veRL RL parquet file (one :meth:`Task.to_verl_row` per row; pandas + pyarrow)."""
    import pandas as pd

    pd.DataFrame([t.to_verl_row() for t in tasks]).to_parquet(path)


def read_verl_parquet(path) -> list[Task]:
    """The tasks of a parquet file written by :func:`write_verl_parquet` (or any veRL file whose rows carry
    ``extra_info.task_json``).

    Raises:
        ValueError: a row has no ``extra_info.task_json``.
    """
    import pandas as pd

    tasks = []
    for i, row in enumerate(pd.read_parquet(path).to_dict("records")):
        info = row.get("extra_info")
        if not isinstance(info, dict) or "task_json" not in info:
            raise ValueError(f"{path}: row {i} has no extra_info.task_json (not written by genenv)")
        tasks.append(Task.from_verl_row(row))
    return tasks
