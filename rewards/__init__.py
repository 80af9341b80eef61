"""Scoring, no LLM and no I/O: the agent reward (paper Eq. 1) and the environment reward (paper Eq. 3).

Imports neither torch nor verl. See :mod:`genenv.rewards.text` (free-text similarity),
:mod:`genenv.rewards.bfcl` (bfcl-eval's AST checker) and :mod:`genenv.rewards.env_reward` (Eq. 3 and friends).
"""
from genenv.rewards.env_reward import (
    ENV_REWARDS,
    absolute_zero_reward,
    alpha_curriculum_reward,
    difficulty_filter,
    env_reward,
    rzero_reward,
)
from genenv.rewards.text import FREE_TEXT_METRICS, exact_match, normalize_answer, similarity, token_f1

__all__ = [
    "ENV_REWARDS", "FREE_TEXT_METRICS", "absolute_zero_reward", "alpha_curriculum_reward", "difficulty_filter",
    "env_reward", "exact_match", "normalize_answer", "rzero_reward", "similarity", "token_f1",
]
