"""Benchmark-independent scoring, no LLM and no I/O: the free-text agent rewards (paper Eq. 1's soft similarity,
`genenv.rewards.text`) and the environment policy's rewards (paper Eq. 3 and the other learnability rewards,
`genenv.rewards.env_policy_reward`). Benchmark checkers live in their benchmark's folder. Imports neither torch nor
verl, and of this project only the registry helper (`genenv.envs.tables`).
"""
from genenv.rewards.env_policy_reward import (
    ENV_POLICY_REWARDS,
    absolute_zero_reward,
    alpha_curriculum_reward,
    difficulty_filter,
    env_policy_reward,
    learnability_reward,
    register_env_policy_reward,
    rzero_reward,
)
from genenv.rewards.text import FREE_TEXT_METRICS, exact_match, normalize_answer, similarity, token_f1

__all__ = [
    "ENV_POLICY_REWARDS", "FREE_TEXT_METRICS", "absolute_zero_reward", "alpha_curriculum_reward", "difficulty_filter",
    "env_policy_reward", "exact_match", "learnability_reward", "normalize_answer", "register_env_policy_reward",
    "rzero_reward", "similarity", "token_f1",
    "env_policy_reward", "text",  # the public modules
]
