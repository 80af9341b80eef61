"""Engines: where the two policies live, generate, play episodes, update, save and load.

The co-evolution loop talks only to the :class:`~genenv.trainer.engines.base.Backend` protocol. Engines are
registered by name and ``"module:function"`` builder (imported only when chosen, so ``engine=local`` never imports
Ray), as veRL registers its workers; ``configs/engine/<name>.yaml`` selects one:

- ``local`` (:mod:`genenv.trainer.engines.local`): both policies in this process with transformers, CPU or one GPU;
- ``verl_ray`` (:mod:`genenv.trainer.engines.verl_ray`): veRL's Ray workers (FSDP + vLLM) on a GPU cluster.
"""
from __future__ import annotations

from genenv.envs.tables import Registry, load_object

ENGINES = Registry("engine")  # name → "module:function" that builds the backend from the config


def register_engine(name: str, builder: str) -> None:
    """Register an engine's backend builder (``f(cfg) -> Backend``) by entry-point string.

    Raises:
        ValueError: a malformed entry point, or the name taken by another builder.
    """
    if ":" not in builder:
        raise ValueError(f"builder {builder!r} is not 'package.module:function'")
    ENGINES.add(name, builder)


def build_backend(cfg):
    """The backend of the engine named by ``cfg.engine``, built from ``cfg``.

    Raises:
        ValueError: an unknown engine (the message lists the registered ones).
        RuntimeError: ``verl_ray`` without the GPUs its resource pools need (before any worker starts).
    """
    return load_object(ENGINES.lookup(cfg.engine))(cfg)


register_engine("local", "genenv.trainer.engines.local:build_local_backend")
register_engine("verl_ray", "genenv.trainer.engines.verl_ray.backend:build_verl_ray_backend")
