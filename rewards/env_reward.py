"""Environment-policy rewards: how useful a generated task is, from the agent's success rate p̂ on it.

All functions take ``p_hat`` (float in [0, 1], the mean agent success over the n rollouts of one task) and
return a float in [0, 1]; they accept NumPy arrays elementwise too.

- :func:`alpha_curriculum_reward` — GenEnv paper Eq. 3: ``R_env = exp(-β (p̂ - α)²)``, highest when the task
  is solved at the target rate α (0.5 by default). β is not given in the paper; the public GenEnv config uses 2.0.
- :func:`difficulty_filter` — GenEnv's filter: a group updates the environment policy only if ``|p̂ - α| ≤ k_min``
  (k_min = 0.1 in the paper).
- :func:`rzero_reward` — R-Zero's uncertainty reward ``min(p̂, 1 - p̂)`` (scaled by 2 so that its maximum is 1).
- :func:`absolute_zero_reward` — Absolute Zero's learnability reward ``1 - p̂`` for ``0 < p̂ < 1``, else 0
  (tasks that are always or never solved teach nothing).

:data:`ENV_REWARDS` maps config names to these functions (same signature ``f(p_hat, **params)``).
"""
from __future__ import annotations

from typing import Callable

import numpy as np


def alpha_curriculum_reward(p_hat, alpha: float = 0.5, beta: float = 2.0):
    """GenEnv Eq. 3, ``exp(-beta * (p_hat - alpha)**2)``; ``p_hat`` scalar or array in [0, 1]."""
    value = np.exp(-beta * (np.asarray(p_hat, dtype=float) - alpha) ** 2)
    return float(value) if np.ndim(value) == 0 else value


def difficulty_filter(p_hat, alpha: float = 0.5, k_min: float = 0.1):
    """True where ``|p_hat - alpha| <= k_min`` (the group may update the environment policy).

    A small tolerance (1e-9) keeps boundary cases such as p̂ = 0.4, α = 0.5, k_min = 0.1 inside the band
    despite floating point.
    """
    keep = np.abs(np.asarray(p_hat, dtype=float) - alpha) <= k_min + 1e-9
    return bool(keep) if np.ndim(keep) == 0 else keep


def rzero_reward(p_hat, **_):
    """R-Zero (Huang et al. 2025) uncertainty reward ``2 * min(p_hat, 1 - p_hat)``, in [0, 1]."""
    p = np.asarray(p_hat, dtype=float)
    value = 2.0 * np.minimum(p, 1.0 - p)
    return float(value) if np.ndim(value) == 0 else value


def absolute_zero_reward(p_hat, **_):
    """Absolute Zero (Zhao et al. 2025) proposer learnability reward: ``1 - p_hat`` if ``0 < p_hat < 1`` else 0."""
    p = np.asarray(p_hat, dtype=float)
    value = np.where((p > 0.0) & (p < 1.0), 1.0 - p, 0.0)
    return float(value) if np.ndim(value) == 0 else value


ENV_REWARDS: dict[str, Callable] = {
    "alpha_curriculum": alpha_curriculum_reward,
    "rzero": rzero_reward,
    "absolute_zero": absolute_zero_reward,
}


def env_reward(name: str, p_hat, **params):
    """Environment reward by config name; ``params`` go to the function (alpha/beta for the α-curriculum).

    Raises:
        ValueError: unknown reward name.
    """
    try:
        fn = ENV_REWARDS[name]
    except KeyError:
        raise ValueError(f"unknown environment reward {name!r}; choose one of {sorted(ENV_REWARDS)}") from None
    if name == "alpha_curriculum":
        params = {k: v for k, v in params.items() if k in ("alpha", "beta")}
    return fn(p_hat, **params)
