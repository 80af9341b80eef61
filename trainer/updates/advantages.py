"""Advantage estimators, by name: how a batch of scored samples becomes per-sample advantages.

Each estimator takes the samples of one update and returns the samples that carry signal, one scalar advantage
each (outcome advantages are the same on every response token), and its metrics. Registered with
`register_advantage` as veRL registers its own (``core_algos.register_adv_est``):

- ``grpo`` (the agent; the environment policy's GRPO option): veRL's GRPO outcome advantage
  (``core_algos.get_adv_estimator_fn("grpo")``, Shao et al. 2024), computed per *episode* (an episode trained as
  several per-turn sequences counts once) and grouped by ``uid`` (the task; for the environment policy, the
  generation prompt). Groups whose episodes' rewards are all equal carry no signal and are dropped and counted.
- ``drgrpo`` (the environment policy's Dr. GRPO option): the same groups with the advantage ``r - mean(group)``,
  not divided by the group's standard deviation (Liu et al. 2025, "Understanding R1-Zero-Like Training", §3;
  veRL's ``norm_adv_by_std_in_grpo=False``). GRPO's division makes a group's advantages about ±1 whatever the
  spread of its rewards: a group of rejected generations (R_env 0) and one admitted game at p̂ 0 (R_env
  exp(-β/4) = 0.0067 at β = 20) pushes that game up as hard as a group whose best game sits at α (R_env 1);
  without it the push scales with the reward gap.
- ``rwr`` (the environment policy, paper §3): reward-weighted regression; every sample is kept with advantage
  ``w_i / mean(w)`` where ``w_i = exp(λ · R_env,i)`` is set by the caller (`rwr_weights`), so the PPO-clip
  loss at ratio 1 reduces to the weighted log-likelihood ``Σ w_i log π(y_i | x_i)``.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np
import torch

from genenv.envs.tables import Registry
from genenv.trainer.updates.sample import Sample

__all__ = [
    "ADVANTAGES", "get_advantage", "grpo_scores", "informative_groups", "informative_task_ids", "register_advantage",
    "rwr_weights",
]

Estimator = Callable[[Sequence[Sample]], tuple[list[Sample], list[float], dict[str, Any]]]
ADVANTAGES = Registry("advantage estimator")  # update mode → estimator
register_advantage = ADVANTAGES.register  # decorator: ``@register_advantage("name")``


def get_advantage(name: str) -> Estimator:
    """The estimator registered as ``name``; raises ``ValueError`` listing the names."""
    return ADVANTAGES.lookup(name)


def informative_groups(rewards: Sequence[float], uids: Sequence[str]) -> tuple[list[int], int, int]:
    """Indices of the items in groups (``uids``) whose rewards are not all equal, the number of such groups, and
    the number of dropped (all-equal) groups. A group of one item counts as all-equal."""
    groups: dict[str, list[int]] = {}
    for i, u in enumerate(uids):
        groups.setdefault(u, []).append(i)
    keep, kept, dropped = [], 0, 0
    for idx in groups.values():
        vals = [rewards[i] for i in idx]
        if len(idx) > 1 and max(vals) - min(vals) > 1e-9:
            keep += idx
            kept += 1
        else:
            dropped += 1
    return sorted(keep), kept, dropped


def informative_task_ids(trajectories: Sequence[Any]) -> list[str]:
    """Ids of the tasks whose episodes' rewards are not all equal (the GRPO groups that carry an advantage,
    `informative_groups`), in the order their first episode appears; ``trajectories``: episodes with
    ``task.id`` and ``reward`` (`Trajectory`)."""
    ids = [t.task.id for t in trajectories]
    keep = {ids[i] for i in informative_groups([t.reward for t in trajectories], ids)[0]}
    return [i for i in dict.fromkeys(ids) if i in keep]


def grpo_scores(rewards: Sequence[float], uids: Sequence[str], norm_by_std: bool = True) -> list[float]:
    """veRL's GRPO outcome advantage of scalar ``rewards`` grouped by ``uids`` (one value per reward), divided by
    the group's standard deviation (``norm_by_std``, GRPO) or not (Dr. GRPO)."""
    from verl.trainer.ppo import core_algos

    scores = torch.tensor(list(rewards), dtype=torch.float32).unsqueeze(-1)  # [E, 1]: the reward on the only token
    fn = core_algos.get_adv_estimator_fn("grpo")
    adv, _ = fn(token_level_rewards=scores, response_mask=torch.ones_like(scores),
                index=np.array(list(uids), dtype=object), norm_adv_by_std_in_grpo=norm_by_std)
    return adv[:, 0].tolist()


def _grouped(samples: Sequence[Sample], norm_by_std: bool) -> tuple[list[Sample], list[float], dict[str, Any]]:
    """GRPO's outcome advantage per episode over the informative groups (see the module docstring)."""
    episodes: dict[str, list[int]] = {}
    for i, s in enumerate(samples):
        episodes.setdefault(s.episode or f"sample-{i}", []).append(i)
    keys = list(episodes)
    rewards = [samples[episodes[k][0]].reward for k in keys]
    uids = [samples[episodes[k][0]].uid for k in keys]
    keep, kept, dropped = informative_groups(rewards, uids)
    metrics = {"groups_kept": kept, "groups_dropped": dropped}
    if not keep:
        return [], [], metrics
    scores = grpo_scores([rewards[i] for i in keep], [uids[i] for i in keep], norm_by_std)
    out, advantages = [], []
    for e, score in zip(keep, scores):
        for i in episodes[keys[e]]:
            out.append(samples[i])
            advantages.append(score)
    return out, advantages, metrics


@register_advantage("grpo")
def grpo(samples: Sequence[Sample]) -> tuple[list[Sample], list[float], dict[str, Any]]:
    """GRPO per episode (see the module docstring); metrics ``groups_kept``, ``groups_dropped``."""
    return _grouped(samples, norm_by_std=True)


@register_advantage("drgrpo")
def drgrpo(samples: Sequence[Sample]) -> tuple[list[Sample], list[float], dict[str, Any]]:
    """Dr. GRPO per episode: GRPO's groups, advantage ``r - mean(group)`` (see the module docstring); metrics as
    `grpo`."""
    return _grouped(samples, norm_by_std=False)


@register_advantage("rwr")
def rwr(samples: Sequence[Sample]) -> tuple[list[Sample], list[float], dict[str, Any]]:
    """Reward-weighted regression: every sample, advantage = its ``weight`` normalised to mean 1."""
    if not samples:
        return [], [], {}
    mean = sum(s.weight for s in samples) / len(samples)
    return list(samples), [s.weight / mean for s in samples], {}


def rwr_weights(env_rewards: Sequence[float], lam: float = 1.0) -> list[float]:
    """``exp(λ · R_env)`` per sample (paper §3: λ = 1)."""
    return [math.exp(lam * r) for r in env_rewards]
