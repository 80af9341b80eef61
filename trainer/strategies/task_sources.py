"""Task sources: what the environment policy writes each iteration, and whether it learns from R_env
(``task_source`` in ``configs/train.yaml``; registered in `genenv.trainer.strategies`).

- ``genenv`` (GenEnv, arXiv 2512.19682, Algorithm 1): writes ``generation.prompts_per_iteration`` prompts every
  iteration (`genenv_plans`) and is updated on R_env by ``env_policy.update_mode``.
- ``random_env`` (the paper's RandomEnv): the same writing, the environment policy frozen.
- ``envgen`` (EnvGen, Zala et al., COLM 2024): a frozen writer prompted with the agent's per-skill success rates
  every ``generation.every`` iterations (`envgen_plans`).
- ``static``: writes nothing (the seed tasks only).
- ``static_aug`` (the paper's static augmentation): writes ``generation.upfront_tasks`` tasks once, before the
  first iteration, with the environment policy as it is, then nothing; ``genenv-experiment`` sets that number
  to what the ``genenv`` arm of the same seed admitted (`StaticAugSource.sized_by_arm`).

Two more live in their own modules: ``genenv_released`` (`released`, the loop of
the released GenEnv code: a frozen writer rewrites quantile-filtered pool tasks) and ``grounded``
(`grounded`, SOAR's probe-set reward).

A new source subclasses `TaskSource` (overriding what differs: `writes_at`,
`plans` or the whole `write`, `score`, ...) and is registered
with `register_task_source`.
"""
from __future__ import annotations

import json
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

from genenv.envs.task import Task
from genenv.rewards.env_policy_reward import difficulty_filter, env_policy_reward
from genenv.trainer.strategies.env_policy_updates import ScoredGeneration, env_policy_samples
from genenv.trainer.generation import GenerationRecord, PromptPlan, envgen_plans, genenv_plans, record_row, write_tasks
from genenv.trainer.updates import Sample
from genenv.trainer.settings import ConfigError, RunSettings
from genenv.trainer.strategies import ENV_POLICY_UPDATES
from genenv.trainer.strategies.agent_batches import RolledBatch
from genenv.trainer.strategies.state import LoopState

__all__ = ["EnvGenSource", "GenEnvSource", "RandomEnvSource", "StaticAugSource", "StaticSource", "TaskSource"]

log = logging.getLogger(__name__)


class TaskSource:
    """A task source (the GenEnv one; subclasses change what differs).

    Args:
        settings: the run's settings.

    Attributes:
        learns: whether the environment policy is updated on R_env (with ``env_policy.update_mode``).
        sized_by_arm: an arm whose finished run of the same seed sets this source's ``generation.upfront_tasks``
            in an experiment (``None``: none).
    """

    learns = True
    sized_by_arm: str | None = None

    def __init__(self, settings: RunSettings):
        """Raises:
            ConfigError: a learning source whose ``env_policy.update_mode`` is not registered (the message lists the
                registered ones)."""
        self.settings = settings
        if self.learns and settings.env_update_mode not in ENV_POLICY_UPDATES:
            raise ConfigError(f"config key 'env_policy.update_mode' is {settings.env_update_mode!r}; choose one of "
                              f"{sorted(ENV_POLICY_UPDATES)}")

    def prepare(self, loop: LoopState) -> None:
        """Called once, after the seed pool is filled and before the first iteration of a fresh run (not on
        resume: what it adds to the pool is in the checkpoint). Nothing by default."""

    def writes_at(self, iteration: int) -> bool:
        """Whether the environment policy writes tasks at ``iteration`` (every iteration by default)."""
        return True

    def plans(self, loop: LoopState) -> list[PromptPlan]:
        """The generation prompts of this iteration (GenEnv's by default)."""
        return genenv_plans(loop.spec, loop.pool, loop.rng, self.settings.generation)

    def write(self, loop: LoopState, iteration: int) -> tuple[list[GenerationRecord], Counter]:
        """Steps 1-2 at an iteration the source writes (`writes_at`): the environment policy writes
        `plans`'s prompts under the run's ``generation`` settings and the spec validates each text
        (`write_tasks`). Returns the generations and the rejection counts."""
        return write_tasks(loop.spec, loop.backend.policy("env_policy"), loop.pool, self.settings.generation,
                           self.settings.curriculum.alpha, iteration, self.plans(loop))

    def score(self, loop: LoopState, records: list[GenerationRecord], rolled: RolledBatch,
              p_hat: dict[str, float]) -> list[ScoredGeneration]:
        """Steps 4-5: each generation's environment reward and whether its task passed the difficulty filter. By
        default R_env(p̂) of ``curriculum.env_reward`` (paper Eq. 3: ``exp(-β (p̂ - α)²)``) and
        ``|p̂ - α| ≤ k_min``; a rejected generation scores 0, outside the band.

        Args:
            loop: the loop (a source whose reward needs more than p̂ measures it there; unused by default).
            records: this iteration's generations, in order.
            rolled: this iteration's agent rollouts (unused by default).
            p_hat: the agent's success rate per rolled-out task id (every admitted task is rolled out).
        Raises:
            KeyError: an admitted task with no p̂ (it was not rolled out).
        """
        cur = self.settings.curriculum
        scored = []
        for r in records:
            if r.task is None:
                scored.append(ScoredGeneration(r, 0.0, False))
            else:
                ph = p_hat[r.task.id]
                scored.append(ScoredGeneration(r, float(env_policy_reward(cur.env_reward, ph, alpha=cur.alpha, beta=cur.beta)),
                                               bool(difficulty_filter(ph, cur.alpha, cur.k_min))))
        return scored

    def update_samples(self, scored: list[ScoredGeneration]) -> tuple[list[Sample], str | None]:
        """Step 6: the samples that update the environment policy and the advantage estimator
        (``env_policy.update_mode``, `env_policy_samples`); ``([], None)``
        (no update) when the source does not learn."""
        if not self.learns:
            return [], None
        return env_policy_samples(self.settings.env_update_mode, scored, self.settings.curriculum.lam)


class GenEnvSource(TaskSource):
    """``genenv``: writes every iteration and learns (the defaults of `TaskSource`)."""


class RandomEnvSource(TaskSource):
    """``random_env``: writes as ``genenv`` does, never updated (the paper's RandomEnv)."""

    learns = False


class EnvGenSource(TaskSource):
    """``envgen``: a frozen writer, every ``generation.every`` iterations (0, K, 2K, ...), aimed at the agent's
    weakest skills."""

    learns = False

    def writes_at(self, iteration: int) -> bool:
        """True at iterations 0, K, 2K, ... (K = ``generation.every``)."""
        return iteration % self.settings.generation.every == 0

    def plans(self, loop: LoopState) -> list[PromptPlan]:
        """EnvGen's prompts (`envgen_plans`): ``prompts_per_iteration * every``,
        each aimed at one of the agent's weakest skills."""
        return envgen_plans(loop.spec, loop.pool, loop.rng, self.settings.generation)


class StaticSource(TaskSource):
    """``static``: no task is written; the pool holds the seed tasks only."""

    learns = False

    def writes_at(self, iteration: int) -> bool:
        """Never: the pool holds the seed tasks (and, for ``static_aug``, its up-front ones) only."""
        return False


class StaticAugSource(StaticSource):
    """``static_aug``: ``generation.upfront_tasks`` tasks written once up front by the environment policy as it is,
    then nothing (the paper's static augmentation; with 0 up-front tasks, as when the arm it is sized by admitted
    none, it is ``static``)."""

    sized_by_arm = "genenv"

    def prepare(self, loop: LoopState) -> None:
        """Generation rounds (the same prompts and validation as every GenEnv iteration) until
        ``generation.upfront_tasks`` tasks are admitted or ``generation.upfront_max_rounds`` rounds have run; the
        admitted tasks (at most that many) join the pool. Each generation is written to ``generations.jsonl``
        with ``"upfront": true`` and iteration ``-1 - round``; the counts go to the counters
        ``upfront/generated``, ``upfront/admitted``, ``upfront/rounds`` and ``upfront/seconds``."""
        g = self.settings.generation
        if g.upfront_tasks < 1:
            return
        start = time.perf_counter()
        admitted: list[Task] = []
        rounds = 0
        while len(admitted) < g.upfront_tasks and rounds < g.upfront_max_rounds:
            it = -1 - rounds
            records, _ = write_tasks(loop.spec, loop.backend.policy("env_policy"), loop.pool, g,
                                     self.settings.curriculum.alpha, it, genenv_plans(loop.spec, loop.pool, loop.rng, g))
            rounds += 1
            with open(Path(loop.run_dir) / "generations.jsonl", "a", encoding="utf-8") as fh:
                for r in records:
                    keep = r.task is not None and len(admitted) < g.upfront_tasks
                    if keep:
                        admitted.append(r.task)
                        loop.pool.add(r.task)
                    row: dict[str, Any] = {**record_row(it, r, {}, 0.0), "upfront": True, "kept": keep}
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                    loop.counters["upfront/generated"] += 1
        loop.counters["upfront/admitted"] = len(admitted)
        loop.counters["upfront/rounds"] = rounds
        loop.counters["upfront/seconds"] = time.perf_counter() - start
        log.info("static augmentation: %d of %d tasks admitted in %d rounds", len(admitted), g.upfront_tasks, rounds)
