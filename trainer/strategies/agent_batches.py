"""Agent batches: which tasks the agent is rolled out on each iteration and which of its groups the agent update
trains on (``agent_batch`` in ``configs/train.yaml``; registered in `genenv.trainer.strategies`).

- ``uniform``: every newly admitted task (its p̂ is its R_env), then pool tasks drawn uniformly up to
  ``agent.batch_tasks``.
- ``replay``: the same, the pool drawn by curated replay (Prioritized Level Replay on p̂(1-p̂) and staleness,
  `sample_replay`; ``pool.temperature``, ``pool.staleness``).
- ``envgen`` (EnvGen, Zala et al., COLM 2024): generated tasks (the new ones, or between writer calls half a batch
  drawn from the pool's generated tasks) mixed with at least half a batch of original (seed) tasks, whose p̂ are the
  per-skill success rates the next EnvGen prompt reports.
- ``frozen``: the newly admitted tasks only and no agent update (a stationary agent on which the environment
  policy's learning is measured alone).

Newly admitted tasks get ``generation.rollouts_per_task`` episodes each, pool tasks ``agent.n``. With
``agent.filter_groups.enable`` (informative batches: DAPO's dynamic sampling, Yu et al. 2025; veRL's
``algorithm.filter_groups``) every drawing batch refills with more pool tasks until ``agent.batch_tasks`` groups
have unequal rewards or ``agent.filter_groups.max_rollouts`` rollouts are spent (`AgentBatch.refill`), and
the update trains on those groups only (`AgentBatch.trained_groups`). The first round already holds the
groups that the informative share expected from the previous iteration says it will need
(`AgentBatch.early_groups`; ``agent.filter_groups.prior_share`` before any group is seen), as veRL draws a
``gen_batch_size`` larger than its train batch: the rollouts spent are those the refills would spend, in one batch
that decodes together instead of rounds that each wait for their longest episode.

A new batch subclasses `AgentBatch` (overriding `select` or `draw`) and is
registered with `register_agent_batch`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from genenv.envs.task import Task
from genenv.runtime.episodes import RolloutTimings, Trajectory
from genenv.trainer.settings import RunSettings
from genenv.trainer.strategies.state import LoopState
from genenv.trainer.updates.advantages import informative_task_ids

__all__ = ["AgentBatch", "EnvGenBatch", "FrozenBatch", "MIN_SHARE", "ReplayBatch", "RolledBatch", "UniformBatch"]

MIN_SHARE = 0.25
"""The informative share a refill round assumes at least (a round draws the missing groups divided by it): a batch
of mostly equal groups refills in few rounds."""


@dataclass
class RolledBatch:
    """One iteration's agent rollouts (GenEnv Algorithm 1, step 3).

    Attributes:
        tasks: the tasks rolled out, in order (the selected batch, then any refill).
        trajectories: their episodes (``generation.rollouts_per_task`` per new task, ``agent.n`` per pool task).
        timings: the rollouts' seconds, added up over every rollout call of the iteration.
        trained: ids of the task groups the agent update trains on (metrics ``agent/groups_*``).
        update_trajectories: the episodes handed to the agent update (empty: no update).
        refill_rounds: informative-batch refill rounds run.
    """

    tasks: list[Task]
    trajectories: list[Trajectory]
    timings: RolloutTimings = RolloutTimings()
    trained: list[str] = field(default_factory=list)
    update_trajectories: list[Trajectory] = field(default_factory=list)
    refill_rounds: int = 0


class AgentBatch:
    """An agent batch (the ``uniform`` one; subclasses change what differs).

    Args:
        settings: the run's settings.

    Attributes:
        trains: whether the agent is updated (``False``: a frozen agent).
    """

    trains = True

    def __init__(self, settings: RunSettings):
        self.settings = settings

    # ----- which tasks -----
    def select(self, loop: LoopState, new_tasks: list[Task]) -> list[Task]:
        """The tasks rolled out first this iteration: every newly admitted task, then pool draws up to
        ``agent.batch_tasks``."""
        return new_tasks + self.draw(loop, max(0, self.settings.agent.batch_tasks - len(new_tasks)))

    def draw(self, loop: LoopState, k: int, exclude: Sequence[str] = (), origin: str | None = None) -> list[Task]:
        """``k`` distinct pool tasks (not in ``exclude``; of ``origin`` when given), uniformly
        (`sample`)."""
        return loop.pool.sample(k, loop.rng, exclude, origin)

    # ----- rollouts -----
    def roll_out(self, loop: LoopState, new_tasks: list[Task]) -> RolledBatch:
        """Step 3: roll out `select`'s batch (`roll_out_tasks`), refill it to informative groups when
        ``agent.filter_groups.enable`` (`refill`), and name the groups the update trains on."""
        batch = self.select(loop, new_tasks)
        informative_batch = self.trains and self.settings.agent.filter_groups
        if informative_batch:
            batch += self.draw(loop, self.early_groups(loop, new_tasks, batch), exclude=[t.id for t in batch])
        trajs, timings = self.roll_out_tasks(loop, new_tasks, batch)
        rolled = RolledBatch(batch, trajs, timings)
        if not self.trains:
            return rolled
        if informative_batch:
            self.refill(loop, rolled)
            loop.counters["groups_rolled_last"] = len(rolled.tasks)  # distinct: refills exclude rolled tasks
            loop.counters["groups_informative_last"] = len(informative_task_ids(rolled.trajectories))
            rolled.trained = self.trained_groups(rolled.trajectories)
            keep = set(rolled.trained)
            rolled.update_trajectories = [t for t in rolled.trajectories if t.task.id in keep]
        else:  # the update drops equal-reward groups itself
            rolled.trained = informative_task_ids(rolled.trajectories)
            rolled.update_trajectories = list(rolled.trajectories)
        return rolled

    def roll_out_tasks(self, loop: LoopState, new_tasks: list[Task], batch: list[Task]
                       ) -> tuple[list[Trajectory], RolloutTimings]:
        """The episodes of ``batch`` in one rollout: the newly admitted tasks with ``generation.rollouts_per_task``
        episodes each when it differs from ``agent.n``, the rest with ``agent.n`` (one count per task, so that
        every episode decodes in one batch instead of two rollouts that each wait for their longest episode)."""
        n_gen, n = self.settings.generation.rollouts_per_task, self.settings.agent.n
        if n_gen == n:
            rollout = loop.rollout(batch)
        else:
            new_ids = {t.id for t in new_tasks}
            rollout = loop.rollout(batch, [n_gen if t.id in new_ids else n for t in batch])
        return rollout.trajectories, rollout.timings

    def early_groups(self, loop: LoopState, new_tasks: list[Task], batch: list[Task]) -> int:
        """Pool groups the first round of an informative batch adds to ``batch`` (`select`'s tasks, the new
        ones among them with ``generation.rollouts_per_task`` rollouts): ``ceil(agent.batch_tasks / s) -
        len(batch)``, at least 0 and within ``agent.filter_groups.max_rollouts``, where ``s`` is the share of
        informative groups among those rolled out in the previous iteration (``loop.counters``
        ``groups_informative_last`` / ``groups_rolled_last``; ``agent.filter_groups.prior_share`` before any),
        at least `MIN_SHARE` as a refill round assumes."""
        a = self.settings.agent
        rolled = loop.counters.get("groups_rolled_last", 0)
        informative = loop.counters.get("groups_informative_last", 0)
        share = max(MIN_SHARE, informative / rolled if rolled else a.prior_share)
        new_ids = {t.id for t in new_tasks}
        spent = sum(self.settings.generation.rollouts_per_task if t.id in new_ids else a.n for t in batch)
        room = (a.max_rollouts - spent) // a.n
        return max(0, min(room, math.ceil(a.batch_tasks / share - 1e-9) - len(batch)))

    def refill(self, loop: LoopState, rolled: RolledBatch) -> None:
        """Informative batches: while fewer than ``agent.batch_tasks`` of the rolled-out groups have unequal
        rewards, draw more pool tasks not yet rolled out this iteration (`draw`) and roll them out,
        ``agent.n`` episodes each, never past ``agent.filter_groups.max_rollouts`` rollouts in the iteration. Each
        round draws the missing number of groups divided by the informative share seen so far (at least
        `MIN_SHARE`), so a batch of mostly equal groups refills in few rounds. ``rolled`` gains the tasks,
        episodes, timings and rounds."""
        a = self.settings.agent
        k, n, cap = a.batch_tasks, a.n, a.max_rollouts
        while True:
            informative = len(self.trained_groups(rolled.trajectories))
            groups = len({t.task.id for t in rolled.trajectories})
            room = (cap - len(rolled.trajectories)) // n
            if informative >= k or room <= 0:
                return
            share = informative / groups if groups else 1.0
            more = self.draw(loop, min(room, math.ceil((k - informative) / max(share, MIN_SHARE))),
                             exclude=[t.id for t in rolled.tasks])
            if not more:
                return
            rollout = loop.rollout(more)
            rolled.timings += rollout.timings
            rolled.tasks += more
            rolled.trajectories += rollout.trajectories
            rolled.refill_rounds += 1

    def trained_groups(self, trajs: list[Trajectory]) -> list[str]:
        """The task groups an informative batch trains on: the informative ones
        (`informative_task_ids`) in rollout order, at most
        ``agent.batch_tasks``, of which at most ``agent.filter_groups.generated_share`` x ``agent.batch_tasks``
        (rounded down) are generated tasks."""
        k = self.settings.agent.batch_tasks
        most_generated = math.floor(self.settings.agent.generated_share * k + 1e-9)
        out, generated = [], 0
        origin = {t.task.id: t.task.origin for t in trajs}
        for task_id in informative_task_ids(trajs):
            if origin[task_id] == "generated":
                if generated >= most_generated:
                    continue
                generated += 1
            out.append(task_id)
            if len(out) == k:
                break
        return out


class UniformBatch(AgentBatch):
    """``uniform``: new tasks, then uniform pool draws (the defaults of `AgentBatch`)."""


class ReplayBatch(AgentBatch):
    """``replay``: new tasks, then pool draws by curated replay (Prioritized Level Replay)."""

    def draw(self, loop: LoopState, k: int, exclude: Sequence[str] = (), origin: str | None = None) -> list[Task]:
        """``k`` distinct pool tasks by `sample_replay` (rank temperature
        ``pool.temperature``, staleness weight ``pool.staleness``)."""
        pool = self.settings.pool
        return loop.pool.sample_replay(k, loop.rng, loop.iteration, pool.temperature, pool.staleness, exclude, origin)


class EnvGenBatch(AgentBatch):
    """``envgen``: generated tasks mixed with at least half a batch of original (seed) tasks."""

    def select(self, loop: LoopState, new_tasks: list[Task]) -> list[Task]:
        """The new tasks (between writer calls: ``agent.batch_tasks // 2`` pool tasks of origin ``generated``),
        then ``max(batch_tasks - generated, ceil(batch_tasks / 2))`` seed tasks."""
        k = self.settings.agent.batch_tasks
        generated = new_tasks or self.draw(loop, k // 2, origin="generated")
        return generated + self.draw(loop, max(k - len(generated), (k + 1) // 2), origin="seed")


class FrozenBatch(AgentBatch):
    """``frozen``: only the newly admitted tasks, for their p̂; the agent is never updated."""

    trains = False

    def select(self, loop: LoopState, new_tasks: list[Task]) -> list[Task]:
        """The newly admitted tasks only (their p̂ is all the environment policy needs); no pool draw."""
        return list(new_tasks)
