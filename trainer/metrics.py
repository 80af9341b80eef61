"""The metric row of one co-evolution iteration (``metrics.jsonl``, TensorBoard) and its writers.

Keys: ``gen/*`` (generations, admissions, rejections by reason), ``agent/*`` (rollout reward and success, tasks,
rollouts and generated tokens, the GRPO groups by what became of them: `group_counts`),
``p_hat/*`` (the success rates of the rolled-out tasks: mean, 10-bin histogram, those of the newly generated
tasks and their 10-bin histogram, the share of rolled-out tasks inside the α band), ``gen/in_band_share`` (the
alignment metric: generations whose task's p̂ lies in the α band, over *all* generations, so rejected and copied
tasks count as misses; ``None`` when nothing was generated), ``r_env/*`` (environment rewards), ``pool/*``, ``time/*`` (seconds per
phase), ``tokens_per_second/*``, ``agent_update/*`` and ``env_policy_update/*`` (the updates' metrics; ``skipped``
when nothing carried signal), ``weights/*_delta`` (how far each policy moved from its initial weights).
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from genenv.envs.task import Task
from genenv.rewards.env_policy_reward import difficulty_filter
from genenv.trainer.strategies.env_policy_updates import ScoredGeneration
from genenv.trainer.settings import CurriculumSettings
from genenv.trainer.updates.advantages import informative_task_ids
from genenv.runtime.episodes import Trajectory

__all__ = ["IterationOutcome", "MetricsWriter", "P_HAT_BINS", "drop_rows_from", "group_counts", "metrics_row"]

P_HAT_BINS = np.linspace(0.0, 1.0, 11)  # the p̂ histograms' 10 bins of 0.1


@dataclass
class IterationOutcome:
    """Everything one iteration produced that its metric row reports."""

    iteration: int
    scored: list[ScoredGeneration]
    rejected: Counter
    new_tasks: list[Task]
    trajectories: list[Trajectory]
    p_hat: dict[str, float]
    agent_update: dict[str, Any]
    env_policy_update: dict[str, Any]
    timing: dict[str, float] = field(default_factory=dict)
    trained: list[str] = field(default_factory=list)  # ids of the task groups the agent update trained on
    refill_rounds: int = 0  # informative batches: extra rollout rounds


def metrics_row(o: IterationOutcome, curriculum: CurriculumSettings, pool_counts: dict[str, int], pool_size: int,
                weight_deltas: dict[str, float]) -> dict[str, Any]:
    """The metric row of iteration ``o`` (see the module docstring); ``curriculum``: the run's α and k_min."""
    p_all = list(o.p_hat.values())
    hist, _ = np.histogram(p_all, bins=P_HAT_BINS)
    r_env = [s.r_env for s in o.scored]
    env_tokens = sum(len(s.record.generation.response_ids) for s in o.scored)
    agent_tokens = sum(len(t.response_ids) for tr in o.trajectories for t in tr.turns)
    gen_time, roll_time = o.timing.get("task_generation", 0.0), o.timing.get("agent_rollout", 0.0)
    trajs = o.trajectories
    return {
        "iteration": o.iteration,
        "gen/generated": len(o.scored), "gen/admitted": len(o.new_tasks), "gen/rejected": sum(o.rejected.values()),
        "gen/in_band": int(sum(s.in_band for s in o.scored)),
        "gen/in_band_share": float(np.mean([s.in_band for s in o.scored])) if o.scored else None,
        **{f"gen/rejected/{k}": v for k, v in sorted(o.rejected.items())},
        "agent/reward_mean": float(np.mean([t.reward for t in trajs])) if trajs else 0.0,
        "agent/success_rate": float(np.mean([t.success for t in trajs])) if trajs else 0.0,
        "agent/tasks": len(o.p_hat), "agent/rollouts": len(trajs), "agent/generated_tokens": agent_tokens,
        **group_counts(o), "agent/refill_rounds": o.refill_rounds,
        "p_hat/mean": float(np.mean(p_all)) if p_all else 0.0,
        "p_hat/histogram": hist.tolist(),
        "p_hat/generated": [o.p_hat[t.id] for t in o.new_tasks],
        "p_hat/generated_histogram": np.histogram([o.p_hat[t.id] for t in o.new_tasks], bins=P_HAT_BINS)[0].tolist(),
        "p_hat/in_band_share": float(np.mean(difficulty_filter(np.array(p_all), curriculum.alpha, curriculum.k_min)))
        if p_all else 0.0,
        "r_env/mean": float(np.mean(r_env)) if r_env else 0.0,
        "r_env/mean_admitted": float(np.mean([s.r_env for s in o.scored if s.record.admitted]))
        if o.new_tasks else 0.0,
        "pool/size": pool_size, **{f"pool/{k}": v for k, v in pool_counts.items()},
        **{f"time/{k}": v for k, v in o.timing.items()},
        "tokens_per_second/env_policy": env_tokens / gen_time if gen_time > 0 else 0.0,
        "tokens_per_second/agent": agent_tokens / roll_time if roll_time > 0 else 0.0,
        **{f"agent_update/{k}": v for k, v in o.agent_update.items()},
        **{f"env_policy_update/{k}": v for k, v in o.env_policy_update.items()},
        **{f"weights/{role}_delta": v for role, v in weight_deltas.items()},
    }


def group_counts(o: IterationOutcome) -> dict[str, int]:
    """The agent batch's GRPO groups (one per rolled-out task): ``agent/groups_informative`` (rewards not all
    equal), ``agent/groups_trained`` (those the update trained on), ``agent/groups_surplus`` (informative, not
    trained: beyond an informative batch's ``agent.batch_tasks``) and ``agent/groups_dropped/<origin>`` (equal
    rewards, no advantage, per task origin ``seed`` / ``generated``)."""
    origin = {t.task.id: t.task.origin for t in o.trajectories}
    informative = set(informative_task_ids(o.trajectories))
    dropped = Counter(origin[i] for i in origin if i not in informative)
    return {"agent/groups_informative": len(informative), "agent/groups_trained": len(o.trained),
            "agent/groups_surplus": len(informative - set(o.trained)),
            **{f"agent/groups_dropped/{k}": dropped.get(k, 0) for k in ("seed", "generated")}}


class MetricsWriter:
    """Appends metric rows to ``<run_dir>/metrics.jsonl`` and, with ``tensorboard``, to TensorBoard (scalars and
    the p̂ histogram)."""

    def __init__(self, run_dir: Path, tensorboard: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.tb_dir = Path(run_dir) / "tensorboard"
        self.tensorboard = tensorboard
        self.tb = None

    def write(self, row: dict[str, Any]) -> None:
        """Append ``row``."""
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, default=float) + "\n")
        if not self.tensorboard:
            return
        if self.tb is None:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(str(self.tb_dir))
        for k, v in row.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                self.tb.add_scalar(k, v, row["iteration"])
        values = np.repeat((P_HAT_BINS[:-1] + P_HAT_BINS[1:]) / 2, row["p_hat/histogram"])
        if len(values):
            self.tb.add_histogram("p_hat", values, row["iteration"])
        self.tb.flush()

    def close(self) -> None:
        """Close the TensorBoard writer."""
        if self.tb is not None:
            self.tb.close()


def drop_rows_from(path: Path, iteration: int) -> None:
    """Keep only the rows of ``path`` (JSON Lines with an ``iteration`` key) before ``iteration`` (resume)."""
    if path.is_file():
        rows = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln)["iteration"] < iteration]
        path.write_text("".join(r + "\n" for r in rows))
