"""``genenv_released``: the loop of the released GenEnv code, which never updates its environment model
(Gen-Verse/GenEnv at commit d5db29f, ``genenv/trainer/genenv_trainer.py``: ``run_genenv_training``,
``_evaluate_agent_performance``, ``_filter_prompts``, ``_generate_new_tasks``, ``_augment_dataset``; its
``configs/genenv_config.yaml``: ``genenv.num_generations_per_prompt: 4``, ``genenv.filtering_k: 0.1``). Each round:

1. **score**: each task of the current training set is played `SCORING_EPISODES` times by the agent
   (sampled) and scored by its mean reward;
2. **filter**: the ⌊N · `FILTERING_K`⌋ lowest-scoring and as many highest-scoring of the N tasks are dropped
   (a stable sort by score, as the released code's ``sorted``: ties keep their order);
3. **rewrite**: a *frozen* environment policy gets each surviving task with its answer and is asked for a new,
   similar task with its answer, one sample per task;
4. **merge**: the training set becomes the original tasks plus these new ones; the previous round's new tasks
   leave it (the released code concatenates the *original* training file with the newest tasks).

Where this arm departs from the released code (``docs/departures.md``):

- The released loop runs one round per epoch over the whole training file. Here a round runs every iteration on
  N = ⌈B / (1 - 2 · 0.1)⌉ tasks drawn at random from the pool (those the spec can demonstrate), B =
  ``generation.prompts_per_iteration × generation.generations_per_prompt``, the texts ``genenv`` writes per
  iteration; the first B survivors in draw order are rewritten, so both arms write B texts an iteration.
- The rewrite prompt is the benchmark's generation prompt with the surviving task as its one demonstration (the
  task in the benchmark's JSON, which holds its answer) and the released instruction, in our words, as the
  request; the spec's JSON Schema stands in for the released ``New Task: / New Answer:`` format, and the spec's
  validation, which the released loop lacks, admits or rejects each text.
- The scoring episodes are not trained on (as released: the evaluation pass is separate from training). The new
  tasks are trained on in the iteration they are written (``generation.rollouts_per_task`` episodes each).
"""
from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter

import numpy as np

from genenv.envs.task import Task
from genenv.trainer.generation import GenerationRecord, PromptPlan, write_tasks
from genenv.trainer.strategies.state import LoopState
from genenv.trainer.strategies.task_sources import TaskSource

__all__ = ["ReleasedGenEnvSource", "SCORING_EPISODES", "SIMILAR_TASK_REQUEST", "quantile_filter", "scored_task_count"]

SCORING_EPISODES = 4  # genenv.num_generations_per_prompt of the released config
FILTERING_K = 0.1  # genenv.filtering_k: the share dropped at each end of the score ranking
SIMILAR_TASK_REQUEST = ("Above is an original task together with its correct answer. Write a new task that is "
                        "similar to it, together with its correct answer.")


def scored_task_count(budget: int, filtering_k: float = FILTERING_K) -> int:
    """N, the tasks one round scores so that at least ``budget`` survive the filter: ⌈budget / (1 - 2k)⌉
    (N - 2⌊kN⌋ ≥ N(1 - 2k) ≥ budget). ``budget`` 8 gives 10 (1 dropped at each end)."""
    return math.ceil(budget / (1.0 - 2.0 * filtering_k))


def quantile_filter(tasks: list[Task], scores: list[float], filtering_k: float = FILTERING_K
                    ) -> tuple[list[Task], list[Task], list[Task]]:
    """The released ``_filter_prompts``: sort by score (stable), drop ⌊len · k⌋ from each end.

    Args:
        tasks: the scored tasks, in draw order.
        scores: each task's mean reward, same order.
    Returns:
        ``(survivors in draw order, dropped lowest, dropped highest)``.
    Raises:
        ValueError: ``tasks`` and ``scores`` differ in length.
    """
    if len(tasks) != len(scores):
        raise ValueError(f"{len(tasks)} tasks but {len(scores)} scores")
    cut = int(len(tasks) * filtering_k)
    order = sorted(range(len(tasks)), key=lambda i: scores[i])
    low, high = order[:cut], order[len(order) - cut:]  # both empty when cut is 0
    dropped = set(low) | set(high)
    return ([t for i, t in enumerate(tasks) if i not in dropped], [tasks[i] for i in low], [tasks[i] for i in high])


class ReleasedGenEnvSource(TaskSource):
    """``genenv_released``: a frozen writer rewrites quantile-filtered pool tasks every iteration (see the module
    docstring)."""

    learns = False

    def write(self, loop: LoopState, iteration: int) -> tuple[list[GenerationRecord], Counter]:
        """One round: draw N pool tasks (`scored_task_count`), score each with `SCORING_EPISODES`
        sampled episodes, filter (`quantile_filter`), take the previous round's written tasks out of the
        pool, and have the frozen environment policy rewrite the first B survivors, one text each. Counters:
        ``released/scored``, ``released/dropped``, ``released/retired``, ``released/scoring_episodes``,
        ``released/scoring_seconds``."""
        g = self.settings.generation
        budget = g.prompts_per_iteration * g.generations_per_prompt
        start = time.perf_counter()
        candidates = [t for t in loop.pool.tasks if loop.spec.demonstrable(t)]
        drawn = loop.rng.sample(candidates, min(scored_task_count(budget), len(candidates)))
        rollout = loop.rollout(drawn, n=SCORING_EPISODES)
        rewards: dict[str, list[float]] = {}
        for traj in rollout.trajectories:
            rewards.setdefault(traj.task.id, []).append(traj.reward)
        score = {t.id: float(np.mean(rewards[t.id])) for t in drawn}
        survivors, low, high = quantile_filter(drawn, [score[t.id] for t in drawn])
        retired = loop.pool.remove([t.id for t in loop.pool.tasks if t.origin == "generated"])
        loop.counters["released/scored"] += len(drawn)
        loop.counters["released/dropped"] += len(low) + len(high)
        loop.counters["released/retired"] += len(retired)
        loop.counters["released/scoring_episodes"] += len(rollout.trajectories)
        loop.counters["released/scoring_seconds"] += time.perf_counter() - start
        plans = [PromptPlan([t], SIMILAR_TASK_REQUEST, {"released_score": score[t.id]})
                 for t in survivors[:budget]]
        return write_tasks(loop.spec, loop.backend.policy("env_policy"), loop.pool,
                           dataclasses.replace(g, generations_per_prompt=1), self.settings.curriculum.alpha,
                           iteration, plans)
