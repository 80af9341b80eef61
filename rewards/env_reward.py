"""Deprecated module name of :mod:`genenv.rewards.env_policy_reward` (the environment policy's rewards, paper
Eq. 3 and the other learnability rewards): importing it warns ``DeprecationWarning`` and gives that module itself,
so every name is the same object."""
import sys
import warnings

from genenv.rewards import env_policy_reward

warnings.warn("genenv.rewards.env_reward is deprecated: import genenv.rewards.env_policy_reward (the environment "
              "policy's rewards)", DeprecationWarning, stacklevel=2)
sys.modules[__name__] = env_policy_reward
