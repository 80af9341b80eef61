"""Environment-policy rewards: how useful a generated task is, from the agent's success rate p̂ on it.

All functions take ``p_hat`` (float in [0, 1], the mean agent success over the n rollouts of one task) and
return a float in [0, 1]; they accept NumPy arrays elementwise too.

- `alpha_curriculum_reward` — GenEnv paper Eq. 3: ``R_env = exp(-β (p̂ - α)²)``, highest when the task
  is solved at the target rate α (0.5 by default). β is not given in the paper; the public GenEnv config uses 2.0.
- `difficulty_filter` — GenEnv's filter: a group updates the environment policy only if ``|p̂ - α| ≤ k_min``
  (k_min = 0.1 in the paper).
- `rzero_reward` — R-Zero's uncertainty reward ``min(p̂, 1 - p̂)`` (scaled by 2 so that its maximum is 1).
- `absolute_zero_reward` — Absolute Zero's learnability reward ``1 - p̂`` for ``0 < p̂ < 1``, else 0
  (tasks that are always or never solved teach nothing).
- `learnability_reward` — the proposer-solver learnability ``4 p̂ (1 - p̂)`` (the variance of a Bernoulli
  success, scaled to 1 at p̂ = 0.5; the ``verifiers`` library's proposer-solver environments).

Each is registered under its config name (``curriculum.env_reward``) with `register_env_policy_reward`; all share
the signature ``f(p_hat, alpha=0.5, beta=2.0)`` (rewards that need no α or β ignore them).
"""
from __future__ import annotations


import numpy as np

from genenv.envs.tables import Registry

__all__ = [
    "ENV_POLICY_REWARDS", "absolute_zero_reward", "alpha_curriculum_reward", "difficulty_filter", "env_policy_reward",
    "learnability_reward", "register_env_policy_reward", "rzero_reward",
]


ENV_POLICY_REWARDS = Registry("environment-policy reward")  # config name → f(p_hat, alpha=..., beta=...)
register_env_policy_reward = ENV_POLICY_REWARDS.register  # decorator: ``@register_env_policy_reward("name")``


def _out(value):
    return float(value) if np.ndim(value) == 0 else value


@register_env_policy_reward("alpha_curriculum")
def alpha_curriculum_reward(p_hat, alpha: float = 0.5, beta: float = 2.0):
    """GenEnv Eq. 3, ``exp(-beta * (p_hat - alpha)**2)``; ``p_hat`` scalar or array in [0, 1]."""
    return _out(np.exp(-beta * (np.asarray(p_hat, dtype=float) - alpha) ** 2))


def difficulty_filter(p_hat, alpha: float = 0.5, k_min: float = 0.1):
    """True where ``|p_hat - alpha| <= k_min`` (the group may update the environment policy).

    A small tolerance (1e-9) keeps boundary cases such as p̂ = 0.4, α = 0.5, k_min = 0.1 inside the band
    despite floating point.
    """
    keep = np.abs(np.asarray(p_hat, dtype=float) - alpha) <= k_min + 1e-9
    return bool(keep) if np.ndim(keep) == 0 else keep


@register_env_policy_reward("rzero")
def rzero_reward(p_hat, **_):
    """R-Zero (Huang et al. 2025) uncertainty reward ``2 * min(p_hat, 1 - p_hat)``, in [0, 1]."""
    p = np.asarray(p_hat, dtype=float)
    return _out(2.0 * np.minimum(p, 1.0 - p))


@register_env_policy_reward("absolute_zero")
def absolute_zero_reward(p_hat, **_):
    """Absolute Zero (Zhao et al. 2025) proposer learnability reward: ``1 - p_hat`` if ``0 < p_hat < 1`` else 0."""
    p = np.asarray(p_hat, dtype=float)
    return _out(np.where((p > 0.0) & (p < 1.0), 1.0 - p, 0.0))


@register_env_policy_reward("learnability")
def learnability_reward(p_hat, **_):
    """Proposer-solver learnability ``4 * p_hat * (1 - p_hat)``: 0 for tasks always or never solved, 1 at 0.5."""
    p = np.asarray(p_hat, dtype=float)
    return _out(4.0 * p * (1.0 - p))


def env_policy_reward(name: str, p_hat, alpha: float = 0.5, beta: float = 2.0, **_):
    """The environment-policy reward registered as ``name`` (the config key ``curriculum.env_reward``) of
    ``p_hat`` (α and β for the rewards that use them; other curriculum settings such as ``k_min`` or ``lam`` are
    accepted and ignored).

    Raises:
        ValueError: unknown reward name.
    """
    return ENV_POLICY_REWARDS.lookup(name)(p_hat, alpha=alpha, beta=beta)
