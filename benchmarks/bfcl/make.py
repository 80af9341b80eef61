"""``gymnasium.make("genenv/BFCL-v0", category=...)``: one id for every BFCL category, single- or multi-turn."""
from __future__ import annotations

from typing import Any

__all__ = ["make_bfcl_env"]


def make_bfcl_env(category: Any = "simple_python", **kwargs: Any):
    """What ``gymnasium.make("genenv/BFCL-v0", ...)`` calls: a `BFCLEnv` for
    single-turn categories, a `BFCLMultiTurnEnv` for ``multi_turn_*``
    ones (the multi-turn benchmark is registered on its own as ``bfcl_multi_turn`` / ``genenv/BFCLMultiTurn-v0``)."""
    if isinstance(category, str) and category.startswith("multi_turn"):
        from genenv.benchmarks.bfcl.multi_turn_env import BFCLMultiTurnEnv

        return BFCLMultiTurnEnv(category=category, **kwargs)
    from genenv.benchmarks.bfcl.env import BFCLEnv

    return BFCLEnv(category=category, **kwargs)
