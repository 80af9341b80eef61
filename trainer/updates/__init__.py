"""Policy updates: scored samples → advantages (by registered estimator) → veRL's PPO-clip loss with the
``low_var_kl`` leash, for either policy."""
from genenv.trainer.updates.sample import Sample
from genenv.trainer.updates.update import policy_update, prepare_update

__all__ = ["Sample", "policy_update", "prepare_update", "advantages", "batch", "sample", "update"]
