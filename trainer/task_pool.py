"""The task pool D_t: seed tasks plus admitted generated tasks, with each task's success-rate history, and the two
ways the agent batch draws from it: uniformly (`TaskPool.sample`, the ``uniform`` agent batch) and by learnability
(`TaskPool.sample_replay`, curated replay: Prioritized Level Replay with the learnability score of p̂).

Training data grows over iterations as in the paper: admitted tasks are kept for all later iterations (the
public GenEnv code drops earlier epochs' tasks; we follow the paper). The pool is saved with every checkpoint
as JSON Lines, one entry per task: the `Task` (with its origin, parent id and
generation step) and ``p_hat_history`` = ``[[iteration, p̂], ...]``.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from genenv.envs.task import Task
from genenv.rewards.env_policy_reward import learnability_reward

__all__ = ["TaskPool", "replay_probabilities"]


def replay_probabilities(scores: Sequence[float], last_seen: Sequence[int], iteration: int, temperature: float,
                         staleness: float) -> np.ndarray:
    """Prioritized Level Replay's replay distribution over seen tasks (Jiang et al. 2021, "Prioritized Level
    Replay", Eq. 1-2): ``P = (1 - ρ) P_S + ρ P_C`` with the rank prioritization ``P_S(i) ∝ (1 / rank(S_i))^(1/β)``
    (rank 1 = the highest score; tied scores share their mean rank) and the staleness ``P_C(i) ∝ c - C_i`` (``c``
    the current iteration, ``C_i`` the last iteration task i was rolled out; uniform when every task is equally
    fresh).

    Args:
        scores: S_i per task (here the learnability of the latest p̂), shape ``[N]``, N ≥ 1.
        last_seen: C_i per task, shape ``[N]``.
        iteration: c.
        temperature: β > 0 (PLR's default 0.1: nearly greedy on the rank).
        staleness: ρ in [0, 1] (PLR's default 0.1).
    Returns:
        probabilities, shape ``[N]``, summing to 1.
    Raises:
        ValueError: ``scores`` empty or of another length than ``last_seen``.
    """
    import pandas as pd

    s = np.asarray(scores, dtype=float)
    if s.size == 0 or s.shape != np.shape(last_seen):
        raise ValueError(f"need one score and one last iteration per task, got {s.shape} and {np.shape(last_seen)}")
    ranks = pd.Series(-s).rank(method="average").to_numpy()
    h = (1.0 / ranks) ** (1.0 / temperature)
    p_score = h / h.sum()
    age = np.maximum(float(iteration) - np.asarray(last_seen, dtype=float), 0.0)
    p_stale = age / age.sum() if age.sum() > 0 else np.full(s.size, 1.0 / s.size)
    p = (1.0 - staleness) * p_score + staleness * p_stale
    return p / p.sum()


@dataclass
class PoolEntry:
    """A task in the pool and the agent's success rate on it at each iteration it was rolled out."""

    task: Task
    p_hat_history: list[tuple[int, float]] = field(default_factory=list)

    @property
    def last_p_hat(self) -> float | None:
        """Most recent p̂, or ``None`` if never rolled out."""
        return self.p_hat_history[-1][1] if self.p_hat_history else None


class TaskPool:
    """Ordered collection of `PoolEntry` keyed by task id.

    Raises:
        ValueError: adding a task whose id is already in the pool.
    """

    def __init__(self, tasks: Iterable[Task] = ()):
        self.entries: dict[str, PoolEntry] = {}
        for t in tasks:
            self.add(t)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, task_id: str) -> bool:
        return task_id in self.entries

    def add(self, task: Task) -> None:
        """Add one task (seed or admitted generated task)."""
        if task.id in self.entries:
            raise ValueError(f"task {task.id!r} is already in the pool")
        self.entries[task.id] = PoolEntry(task)

    def remove(self, task_ids: Iterable[str]) -> list[Task]:
        """Take the tasks with ``task_ids`` out of the pool, with their p̂ history (ids not in the pool are
        skipped); returns the removed tasks in pool order. Used by task sources whose training set is not
        cumulative (``genenv_released`` keeps only its latest write; ``grounded`` holds its probe set apart)."""
        drop = set(task_ids)
        removed = [e.task for i, e in self.entries.items() if i in drop]
        for t in removed:
            del self.entries[t.id]
        return removed

    @property
    def tasks(self) -> list[Task]:
        """All tasks in insertion order."""
        return [e.task for e in self.entries.values()]

    def counts(self) -> dict[str, int]:
        """``{"seed": n, "generated": m}``."""
        out = {"seed": 0, "generated": 0}
        for e in self.entries.values():
            out[e.task.origin] = out.get(e.task.origin, 0) + 1
        return out

    def sample(self, k: int, rng: random.Random, exclude: Sequence[str] = (), origin: str | None = None
               ) -> list[Task]:
        """``k`` distinct tasks uniformly at random (fewer if the pool is smaller), skipping ``exclude`` ids; only
        tasks of ``origin`` (``"seed"`` / ``"generated"``) when given."""
        ids = self._candidates(exclude, origin)
        return [self.entries[i].task for i in rng.sample(ids, min(k, len(ids)))]

    def _candidates(self, exclude: Sequence[str], origin: str | None) -> list[str]:
        """Ids of the pool's tasks not in ``exclude`` and, when given, of ``origin``, in insertion order."""
        skip = set(exclude)
        return [i for i, e in self.entries.items() if i not in skip and (origin is None or e.task.origin == origin)]

    def sample_replay(self, k: int, rng: random.Random, iteration: int, temperature: float, staleness: float,
                      exclude: Sequence[str] = (), origin: str | None = None) -> list[Task]:
        """``k`` distinct tasks by curated replay (fewer if the pool is smaller), skipping ``exclude`` ids; only
        tasks of ``origin`` when given. Each draw follows Prioritized Level Replay over a finite task set (Jiang et
        al. 2021, §3, the "proportional" replay schedule): with probability |seen| / |candidates| it replays a
        task already rolled out, drawn by `replay_probabilities` of its learnability 4 p̂ (1 - p̂)
        (`learnability_reward` of its latest p̂; the rank prioritization makes the
        scale irrelevant; Rutherford et al. 2024, "No Regrets", use p̂(1-p̂)) and its staleness at ``iteration``;
        otherwise it draws a never-rolled-out task uniformly."""
        left = self._candidates(exclude, origin)
        chosen: list[str] = []
        for _ in range(min(k, len(left))):
            seen = [i for i in left if self.entries[i].p_hat_history]
            unseen = [i for i in left if not self.entries[i].p_hat_history]
            if seen and (not unseen or rng.random() < len(seen) / len(left)):
                hist = [self.entries[i].p_hat_history[-1] for i in seen]
                probs = replay_probabilities([float(learnability_reward(p)) for _, p in hist], [it for it, _ in hist],
                                             iteration, temperature, staleness)
                pick = rng.choices(seen, weights=probs.tolist())[0]
            else:
                pick = rng.choice(unseen)
            chosen.append(pick)
            left.remove(pick)
        return [self.entries[i].task for i in chosen]

    def record(self, iteration: int, p_hats: dict[str, float]) -> None:
        """Append ``(iteration, p̂)`` to the history of every task id in ``p_hats``."""
        for task_id, p in p_hats.items():
            if task_id in self.entries:
                self.entries[task_id].p_hat_history.append((iteration, float(p)))

    def recent_p_hat(self, last: int = 50) -> float | None:
        """Mean of the latest p̂ of the ``last`` most recently rolled-out tasks (the feedback shown to the
        environment policy), or ``None`` before any rollout."""
        latest = sorted(((e.p_hat_history[-1][0], e.p_hat_history[-1][1]) for e in self.entries.values()
                         if e.p_hat_history), key=lambda x: x[0])[-last:]
        return sum(p for _, p in latest) / len(latest) if latest else None

    def skill_success(self, skill_of: Callable[[Task], str], origin: str = "seed") -> dict[str, tuple[float, int]]:
        """EnvGen's feedback: per skill (``skill_of(task)``), the mean latest p̂ of the pool's ``origin`` tasks
        that have been rolled out and how many they are, ``{skill: (success rate, n)}``; skills of ``origin``
        tasks never rolled out appear with ``(nan, 0)``."""
        sums: dict[str, list[float]] = {}
        for e in self.entries.values():
            if e.task.origin != origin:
                continue
            bucket = sums.setdefault(skill_of(e.task), [])
            if e.last_p_hat is not None:
                bucket.append(e.last_p_hat)
        return {k: ((sum(v) / len(v)) if v else float("nan"), len(v)) for k, v in sorted(sums.items())}

    def save(self, path: Path) -> None:
        """Write the pool as JSON Lines (atomic: written to a temp file, then renamed)."""
        tmp = Path(str(path) + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for e in self.entries.values():
                fh.write(json.dumps({"task": e.task.to_dict(), "p_hat_history": e.p_hat_history},
                                    ensure_ascii=False) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> "TaskPool":
        """Read a pool written by `save`.

        Raises:
            DataError: a line is not JSON (from `genenv.envs.data.iter_jsonl`).
            ValueError: a line is JSON but not a pool entry (names file and line).
        """
        from genenv.envs.data import iter_jsonl

        pool = cls()
        for lineno, rec in iter_jsonl(Path(path)):
            try:
                task = Task.from_dict(rec["task"])
            except (KeyError, ValueError, TypeError) as exc:
                raise ValueError(f"{path}: line {lineno} is not a pool entry ({exc})") from exc
            pool.add(task)
            pool.entries[task.id].p_hat_history = [tuple(x) for x in rec.get("p_hat_history", [])]
        return pool
