"""``oracle``: an upper bound on what a task writer can give in a regime. No language model writes; the benchmark's
own generator draws each iteration's tasks at the difficulty level where the agent's measured success is nearest α.

Each iteration the source writes as many tasks as a GenEnv writer writes texts
(``generation.prompts_per_iteration × generation.generations_per_prompt``):

1. the levels are the benchmark's (`TaskWriter.difficulty_levels` for the run's seed options; TextWorldExpress:
   Coin Collector by rooms and steps to win, drawn from train-fold seeds);
2. each level's success estimate is the mean of the latest p̂ of the pool's tasks at that level rolled out within
   the last `WINDOW` iterations, shrunk toward α by `PRIOR` pseudo-records at α (a level never measured is at α,
   so it is tried first);
3. every task is drawn at a level nearest α (ties broken with the run's random generator, one draw per task),
   through the benchmark's own validation (`TaskWriter.level_text` then `parse_generated` and the near-duplicate
   check, the path every written text takes), and a drawn task that is a game of the run's held-out split (the same
   prompt and gold answer, `heldout_keys`: seeds of different folds can generate the same game) is rejected
   (``heldout_game``); a drawn task that fails is redrawn up to `TRIES` times, each failure counted as a
   rejection.

The environment policy is never sampled nor updated (``learns = False``); ``r_env`` in the run's files is R_env of
the task's p̂, as for the writers. Written for this project (no published curriculum upper bound exists to reuse);
the idea of steering a generator by measured success is the one of PLR and ACCEL's level samplers, without their
replay.
"""
from __future__ import annotations

import logging
from collections import Counter

from genenv.benchmarks.task_writer import Rejection
from genenv.envs.task import Task
from genenv.runtime.policies import Generation
from genenv.trainer.generation import GenerationRecord
from genenv.trainer.settings import ConfigError
from genenv.trainer.strategies.state import LoopState
from genenv.trainer.strategies.task_sources import TaskSource

__all__ = ["OracleSource", "level_estimates", "task_key"]

log = logging.getLogger(__name__)

WINDOW = 3  # iterations of p̂ history a level's estimate reads
PRIOR = 1.0  # pseudo-records at α in a level's estimate
TRIES = 3  # draws per task slot before the slot is left empty


def task_key(spec, task: Task) -> tuple[str, str]:
    """What makes two tasks the same task to an agent: its prompt and its gold answer (`TaskWriter.gold_key`)."""
    return task.prompt, spec.gold_key(task)


def level_estimates(loop: LoopState, levels: list[str], alpha: float) -> dict[str, tuple[float, int]]:
    """Per level, ``(estimated success, records)``: the mean of the latest p̂ of each pool task at that level whose
    latest p̂ was recorded within the last `WINDOW` iterations, with `PRIOR` pseudo-records at ``alpha``; levels
    with no such task are ``(alpha, 0)``."""
    sums = {level: [PRIOR * alpha, PRIOR, 0] for level in levels}
    for entry in loop.pool.entries.values():
        if not entry.p_hat_history:
            continue
        iteration, p_hat = entry.p_hat_history[-1]
        if iteration < loop.iteration - WINDOW:
            continue
        bucket = sums.get(loop.spec.difficulty_level(entry.task))
        if bucket is not None:
            bucket[0] += p_hat
            bucket[1] += 1
            bucket[2] += 1
    return {level: (total / weight, n) for level, (total, weight, n) in sums.items()}


class OracleSource(TaskSource):
    """``oracle``: the generator itself, steered to the level nearest α (see the module docstring)."""

    learns = False

    def __init__(self, settings):
        super().__init__(settings)
        self._levels: list[str] | None = None
        self._heldout: set[tuple[str, str]] | None = None

    def levels(self, loop: LoopState) -> list[str]:
        """The benchmark's levels for the run's seed options (computed once).

        Raises:
            ConfigError: the benchmark has none.
        """
        if self._levels is None:
            self._levels = loop.spec.difficulty_levels(loop.spec.pool_options(self.settings.seed_options))
            if not self._levels:
                raise ConfigError(f"task_source=oracle needs a benchmark with difficulty levels; {loop.spec.name} "
                                  f"with seed options {self.settings.seed_options} has none")
        return self._levels

    def heldout_keys(self, loop: LoopState) -> set[tuple[str, str]]:
        """`task_key` of every task of the held-out split the run evaluates on (its seed options; computed once)."""
        if self._heldout is None:
            options = loop.spec.pool_options(self.settings.seed_options)
            self._heldout = {task_key(loop.spec, t) for t in loop.spec.load(split="heldout", **options)}
        return self._heldout

    def prepare(self, loop: LoopState) -> None:
        """Check that the benchmark has levels before the first iteration.

        Raises:
            ConfigError: it has none.
        """
        self.levels(loop)

    def write(self, loop: LoopState, iteration: int) -> tuple[list[GenerationRecord], Counter]:
        """This iteration's tasks, all at a level nearest α; one record per slot that got a task, one per failed
        draw (the rejection). Counters ``oracle/level=<name>``: tasks admitted per level, run-long.

        Raises:
            ConfigError: the benchmark has no levels.
        """
        g, alpha = self.settings.generation, self.settings.curriculum.alpha
        estimates = level_estimates(loop, self.levels(loop), alpha)
        nearest = min(abs(est - alpha) for est, _ in estimates.values())
        best = [level for level, (est, _) in estimates.items() if abs(est - alpha) == nearest]
        log.info("oracle at iteration %d: %s (measured levels: %s)", iteration,
                 best if len(best) <= 3 else f"{len(best)} levels tied at {nearest:.3f} from alpha",
                 {k: round(v[0], 3) for k, v in estimates.items() if v[1]})
        records: list[GenerationRecord] = []
        rejected: Counter = Counter()
        admitted: list[Task] = []
        for slot in range(g.prompts_per_iteration * g.generations_per_prompt):
            for attempt in range(TRIES):
                level = loop.rng.choice(best)
                text = loop.spec.level_text(level, loop.rng)
                out = loop.spec.parse_generated(text, f"gen-{iteration}-{slot}-{attempt}", iteration, None)
                if isinstance(out, Task) and task_key(loop.spec, out) in self.heldout_keys(loop):
                    out = Rejection("heldout_game", f"{out.id} is a game of the held-out split")
                if isinstance(out, Task):
                    out = loop.spec.near_duplicate(out, loop.pool.tasks + admitted) or out
                if isinstance(out, Rejection):
                    rejected[out.reason] += 1
                    records.append(GenerationRecord(slot, Generation(text), rejection=out))
                    continue
                admitted.append(out)
                records.append(GenerationRecord(slot, Generation(text), task=out))
                loop.counters[f"oracle/level={level}"] += 1
                break
        return records, rejected
