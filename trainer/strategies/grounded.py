"""``grounded``: the environment policy is rewarded by what its tasks do for the agent on real tasks, not by p̂
(SOAR's grounded teacher reward, arXiv 2601.18778: the student's measured improvement on a probe set of real
problems after training on the teacher's problems).

Per iteration, after the agent's rollouts and before its real update:

1. the agent plays the **probe set** (``probe.tasks`` seed tasks held out of the pool for the whole run, drawn
   once from the seed split with the run's seed) ``probe.n`` times per task, sampled: the base score, the mean
   reward;
2. for each admitted task whose episodes are an informative GRPO group, a **trial update**: one GRPO update of the
   agent on that task's episodes alone, the probe played again with the *same random numbers* as the base (common
   random numbers, so the difference is the update's and not the sampler's), then the update undone (the engine's
   ``trial``); the task's reward is ``Δ = probe score after - base``;
3. a task whose episodes all have the same reward gets Δ = 0 without a trial: GRPO drops such a group, so an
   update on it changes nothing;
4. the environment policy is updated on Δ by ``env_policy.update_mode`` (``rwr``: the generations with Δ > 0,
   weighted ``exp(λ Δ)``; ``grpo`` / ``drgrpo``: every generation of a prompt, rejected ones at 0). A rejected
   generation scores 0.

Where it departs from SOAR: SOAR trains a copy of the student for several steps on a whole generated dataset and
uses RLOO over datasets; here each written task is one trial of one update step (the loop's own update), so a
reward is per task. The difficulty band plays no part (``r_env`` in the run's files is Δ; ``in_band`` is Δ > 0).

Cost: per iteration one probe evaluation plus, per informative admitted task, one update and one probe
evaluation (``probe.tasks × probe.n`` episodes each); the time is the iteration's ``time/env_reward``, the counts
the counters ``probe/trials`` and ``probe/episodes``. Needs an engine with trial updates (the ``local`` engine).
"""
from __future__ import annotations

import random
import time

import numpy as np
import torch

from genenv.envs.task import Task
from genenv.trainer.generation import GenerationRecord
from genenv.trainer.settings import ConfigError
from genenv.trainer.strategies.agent_batches import RolledBatch
from genenv.trainer.strategies.env_policy_updates import ScoredGeneration
from genenv.trainer.strategies.state import LoopState
from genenv.trainer.strategies.task_sources import TaskSource
from genenv.trainer.updates.advantages import informative_task_ids
from genenv.trainer.updates.sample import agent_samples

__all__ = ["GroundedSource"]


def trial_of(backend):
    """The engine's ``trial`` context manager (`Backend`, optional capability).

    Raises:
        ConfigError: the engine has none (only the ``local`` engine has trial updates).
    """
    trial = getattr(backend, "trial", None)
    if trial is None:
        raise ConfigError(f"task_source=grounded needs an engine with trial updates (engine=local); "
                          f"{type(backend).__name__} has none")
    return trial


class GroundedSource(TaskSource):
    """``grounded``: writes GenEnv's prompts every iteration and learns from the agent's measured change on a
    probe set (see the module docstring)."""

    def __init__(self, settings):
        super().__init__(settings)
        self._probe: list[Task] | None = None

    def probe_set(self, loop: LoopState) -> list[Task]:
        """The probe set: ``probe.tasks`` tasks of the run's seed split (its seed options and ``seed_limit``),
        drawn with ``random.Random(seed)`` from the ids in sorted order, so that a resumed run finds the same set.

        Raises:
            ConfigError: ``probe.tasks`` leaves fewer than one seed task for the pool.
        """
        if self._probe is None:
            st = self.settings
            seeds = loop.spec.load(split="train", **loop.spec.pool_options(st.seed_options))
            seeds = seeds[:st.seed_limit] if st.seed_limit else seeds
            if st.probe.tasks >= len(seeds):
                raise ConfigError(f"config key 'probe.tasks' is {st.probe.tasks}; the seed split has {len(seeds)} "
                                  "tasks and the pool needs at least one")
            by_id = {t.id: t for t in seeds}
            self._probe = [by_id[i] for i in random.Random(st.seed).sample(sorted(by_id), st.probe.tasks)]
        return self._probe

    def prepare(self, loop: LoopState) -> None:
        """Hold the probe set out of the pool (the agent never trains on it).

        Raises:
            ConfigError: the engine has no trial updates (``trial``); see `probe_set`.
        """
        trial_of(loop.backend)
        loop.counters["probe/tasks"] = len(loop.pool.remove(t.id for t in self.probe_set(loop)))

    def probe_score(self, loop: LoopState) -> float:
        """The agent's mean reward on the probe set, ``probe.n`` sampled episodes per task, with the torch random
        state seeded from the run's seed and the iteration (restored afterwards), so every call of one iteration
        samples with the same random numbers."""
        with torch.random.fork_rng():
            torch.manual_seed(self.settings.seed * 1_000_003 + loop.iteration)
            rollout = loop.rollout(self.probe_set(loop), n=self.settings.probe.n)
        loop.counters["probe/episodes"] += len(rollout.trajectories)
        return float(np.mean([t.reward for t in rollout.trajectories]))

    def score(self, loop: LoopState, records: list[GenerationRecord], rolled: RolledBatch,
              p_hat: dict[str, float]) -> list[ScoredGeneration]:
        """Each generation's grounded reward Δ (0 when rejected or uninformative; see the module docstring);
        ``in_band`` is Δ > 0. Counters: ``probe/trials``, ``probe/episodes``, ``probe/seconds``.

        Raises:
            ConfigError: the engine has no trial updates.
        """
        start = time.perf_counter()
        by_task: dict[str, list] = {}
        for t in rolled.trajectories:
            by_task.setdefault(t.task.id, []).append(t)
        base: float | None = None
        scored = []
        for r in records:
            delta = 0.0
            episodes = by_task.get(r.task.id, []) if r.task is not None else []
            if episodes and informative_task_ids(episodes):
                trial = trial_of(loop.backend)
                if base is None:
                    base = self.probe_score(loop)
                with trial("agent"):
                    loop.backend.update("agent", agent_samples(episodes), "grpo")
                    delta = self.probe_score(loop) - base
                loop.counters["probe/trials"] += 1
            scored.append(ScoredGeneration(r, delta, delta > 0))
        loop.counters["probe/seconds"] += time.perf_counter() - start
        return scored
