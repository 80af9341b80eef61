"""Deprecated module name of :mod:`genenv.rewards.env_policy_reward` (the environment policy's rewards, paper
Eq. 3 and the other learnability rewards): importing it warns ``DeprecationWarning`` and gives the same objects."""
import warnings

from genenv.rewards.env_policy_reward import (  # noqa: F401  (re-exported under the old module name)
    ENV_REWARDS,
    absolute_zero_reward,
    alpha_curriculum_reward,
    difficulty_filter,
    env_reward,
    learnability_reward,
    register_env_reward,
    rzero_reward,
)

warnings.warn("genenv.rewards.env_reward is deprecated: import genenv.rewards.env_policy_reward (the environment "
              "policy's rewards)", DeprecationWarning, stacklevel=2)
