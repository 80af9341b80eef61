"""Checkpoints of a co-evolution run: both policies (the engine's ``save``), the task pool, the loop's counters and
every RNG state, written atomically, so a killed run resumes exactly from its last completed iteration.

Layout: ``<run_dir>/checkpoints/iter-<NNNNN>/`` (``<role>/`` from the engine, ``pool.jsonl``, ``state.json``,
``rng.pt``) and ``<run_dir>/checkpoints/latest`` naming the newest complete one; the last ``keep`` are kept.
"""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from genenv.trainer.task_pool import TaskPool

__all__ = ["latest_checkpoint", "load_checkpoint", "save_checkpoint"]


def latest_checkpoint(ckpt_dir: Path) -> Path | None:
    """The checkpoint named in ``ckpt_dir/latest``, if it exists."""
    pointer = Path(ckpt_dir) / "latest"
    if not pointer.is_file():
        return None
    path = Path(ckpt_dir) / pointer.read_text().strip()
    return path if path.is_dir() else None


def save_checkpoint(ckpt_dir: Path, iteration: int, backend, pool: TaskPool, state: dict[str, Any],
                    rng: random.Random, keep: int) -> Path:
    """Write ``iter-<iteration>`` (the engine's policies, the pool, ``state`` plus the Python RNG, torch and numpy
    RNG states) through a temporary folder, point ``latest`` at it, and delete all but the last ``keep`` (the run's
    ``keep_checkpoints``; no default here). The engine may hard-link a role's files from the latest checkpoint when
    the role was not updated since (the deletion of the old folder leaves linked files in place)."""
    path = Path(ckpt_dir) / f"iter-{iteration:05d}"
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():  # left by a run killed while saving
        shutil.rmtree(tmp)
    backend.save(tmp, previous=latest_checkpoint(ckpt_dir))
    pool.save(tmp / "pool.jsonl")
    (tmp / "state.json").write_text(json.dumps({**state, "iteration": iteration,
                                                "python_rng": _jsonable(rng.getstate())}))
    torch.save({"torch": torch.get_rng_state(), "numpy": np.random.get_state()}, tmp / "rng.pt")
    if path.exists():
        shutil.rmtree(path)
    tmp.rename(path)
    (Path(ckpt_dir) / "latest.tmp").write_text(path.name)
    (Path(ckpt_dir) / "latest.tmp").replace(Path(ckpt_dir) / "latest")
    old = sorted(p for p in Path(ckpt_dir).glob("iter-*") if p.is_dir() and not p.name.endswith(".tmp"))
    for p in old[:-max(1, int(keep))]:
        shutil.rmtree(p)
    return path


def load_checkpoint(path: Path, backend, rng: random.Random) -> tuple[TaskPool, dict[str, Any]]:
    """Restore the engine's policies, the RNG states (``rng``, torch, numpy) from ``path``; returns the pool and
    the saved state (``iteration`` and the loop's own entries)."""
    backend.load(path)
    pool = TaskPool.load(path / "pool.jsonl")
    state = json.loads((path / "state.json").read_text())
    rng.setstate(_tupled(state.pop("python_rng")))
    saved = torch.load(path / "rng.pt", weights_only=False)
    torch.set_rng_state(saved["torch"])
    np.random.set_state(saved["numpy"])
    return pool, state


def _jsonable(state):
    return [list(x) if isinstance(x, tuple) else x for x in state]


def _tupled(state):
    return tuple(tuple(x) if isinstance(x, list) else x for x in state)
