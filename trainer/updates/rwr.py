"""Environment-policy update: reward-weighted regression (RWR) on the environment reward, as in the paper.

GenEnv (arXiv 2512.19682, §3) trains the environment policy by RWR with temperature λ = 1 under a KL leash to
the initial environment model: maximise ``Σ_i w_i log π_env(y_i | x_i)`` with ``w_i = exp(λ · R_env,i)``, where
``y_i`` is a generated task text that was admitted **and** passed the difficulty filter
``|p̂_i - α| ≤ k_min``; other generations do not update the environment policy (rejected ones score R_env = 0
in the metrics and in the GRPO option). Weights are normalised to mean 1 over the batch and the objective
is carried out by :func:`genenv.trainer.grpo.policy_update` in ``"rwr"`` mode (advantage = weight, ratio 1 at
the single step, so PPO-clip reduces to weighted log-likelihood), with the ``low_var_kl`` leash.
"""
from __future__ import annotations

import math
from typing import Sequence

from genenv.trainer.grpo import Sample


def rwr_weights(env_rewards: Sequence[float], lam: float = 1.0) -> list[float]:
    """``exp(λ · R_env)`` per sample (paper: λ = 1)."""
    return [math.exp(lam * r) for r in env_rewards]


def rwr_samples(samples: Sequence[Sample], in_band: Sequence[bool], lam: float = 1.0) -> list[Sample]:
    """The samples that update the environment policy (``in_band``), with ``weight = exp(λ · reward)``."""
    kept = [s for s, keep in zip(samples, in_band) if keep]
    for s, w in zip(kept, rwr_weights([s.reward for s in kept], lam)):
        s.weight = w
    return kept
