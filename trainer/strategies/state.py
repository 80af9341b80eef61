"""What a strategy sees of the co-evolution loop: `LoopState`, the loop's state and its one rollout call,
as a structural type, so that the strategies never import the loop (the loop imports them)."""
from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Protocol, Sequence

from genenv.benchmarks.spec import BenchmarkSpec
from genenv.envs.task import Task
from genenv.runtime.episodes import Rollout
from genenv.trainer.engines.base import Backend
from genenv.trainer.settings import RunSettings
from genenv.trainer.task_pool import TaskPool

__all__ = ["LoopState"]


class LoopState(Protocol):
    """The co-evolution loop as a strategy sees it (`CoEvolutionTrainer` is one).

    Attributes:
        settings: the run's settings.
        spec: the benchmark spec (loading, prompts, validation).
        backend: the engine (both policies; `Backend`).
        pool: the task pool D_t.
        rng: the run's random generator (saved with every checkpoint).
        iteration: the current iteration (0-based).
        run_dir: the run directory (``generations.jsonl``).
        counters: run-long counts saved with every checkpoint.
    """

    settings: RunSettings
    spec: BenchmarkSpec
    backend: Backend
    pool: TaskPool
    rng: random.Random
    iteration: int
    run_dir: Path
    counters: Counter

    def rollout(self, tasks: Sequence[Task], n: int | Sequence[int] | None = None) -> Rollout:
        """``n`` (default ``agent.n``; or one count per task, all decoded in one batch) agent episodes per task,
        sampled as the run's settings say; the trajectories and their timings."""
