"""Tasks as rows of veRL's RL parquet format (the input of veRL's ``RLHFDataset``) and back.

A row: ``data_source`` (``genenv/<benchmark>``), ``prompt`` (the chat messages the task's env renders),
``ability`` (the env class's ``ability``: ``tool_use``, ``qa``, ``planning``, ...; the benchmark name when it sets
none), ``reward_model.{style, ground_truth}`` (the gold answer as JSON text; veRL passes it untouched to
``compute_score``) and ``extra_info`` (``task_id``, ``split``, ``task_json``: the whole task, so that a row
converts back exactly).
"""
from __future__ import annotations

import json
from typing import Any

from genenv.envs.registry import env_entry
from genenv.envs.task import Task

__all__ = ["read_verl_parquet", "task_extra_info", "to_verl_row", "write_verl_parquet"]


def to_verl_row(task: Task) -> dict[str, Any]:
    """``task`` as one row of veRL's RL parquet format (see the module docstring)."""
    env_class = env_entry(task.benchmark).env_class
    return {
        "data_source": f"genenv/{task.benchmark}",
        "prompt": env_class.render_messages(task),
        "ability": env_class.ability or task.benchmark,
        "reward_model": {"style": "rule", "ground_truth": json.dumps(task.gold, ensure_ascii=False)},
        "extra_info": task_extra_info(task),
    }


def task_extra_info(task: Task) -> dict[str, Any]:
    """The ``extra_info`` of ``task``'s row: ``task_id``, ``split`` and ``task_json`` (no rendering needed)."""
    return {"task_id": task.id, "split": task.split, "task_json": task.to_json()}


def from_verl_row(row: dict[str, Any]) -> Task:
    """Inverse of `to_verl_row` (reads ``extra_info.task_json``).

    Raises:
        ValueError: the row has no ``extra_info.task_json`` (not written by genenv).
    """
    info = row.get("extra_info")
    if not isinstance(info, dict) or "task_json" not in info:
        raise ValueError("row has no extra_info.task_json (not written by genenv)")
    return Task.from_json(info["task_json"])


def write_verl_parquet(tasks: list[Task], path) -> None:
    """Write ``tasks`` as a veRL RL parquet file (one `to_verl_row` per row; pandas + pyarrow)."""
    import pandas as pd

    pd.DataFrame([to_verl_row(t) for t in tasks]).to_parquet(path)


def read_verl_parquet(path) -> list[Task]:
    """The tasks of a parquet file written by `write_verl_parquet` (or any veRL file whose rows carry
    ``extra_info.task_json``).

    Raises:
        ValueError: a row has no ``extra_info.task_json`` (names the row).
    """
    import pandas as pd

    tasks = []
    for i, row in enumerate(pd.read_parquet(path).to_dict("records")):
        try:
            tasks.append(from_verl_row(row))
        except ValueError as exc:
            raise ValueError(f"{path}: row {i}: {exc}") from None
    return tasks
