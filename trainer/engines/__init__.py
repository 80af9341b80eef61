"""Engines: where the two policies live, generate, play episodes, update, save and load.

The co-evolution loop talks only to the `Backend` protocol. Engines are
registered by name and ``"module:function"`` builder (imported only when chosen, so ``engine=local`` never imports
Ray), as veRL registers its workers; ``configs/engine/<name>.yaml`` selects one:

- ``local`` (`genenv.trainer.engines.local`): both policies in this process with transformers, CPU or one GPU;
- ``verl_ray`` (`genenv.trainer.engines.verl_ray`): veRL's Ray workers (FSDP + vLLM) on a GPU cluster.
"""
from __future__ import annotations

from genenv.envs.tables import Registry, load_object
from genenv.trainer.settings import checked_run_settings

ENGINES = Registry("engine")  # name → "module:function" that builds the backend from the run's settings


def register_engine(name: str, builder: str) -> None:
    """Register an engine's backend builder by entry-point string: ``f(settings) -> Backend``, ``settings`` a
    `RunSettings` (the engine's own config block is ``settings.engine.options``).

    Raises:
        ValueError: a malformed entry point, or the name taken by another builder.
    """
    if ":" not in builder:
        raise ValueError(f"builder {builder!r} is not 'package.module:function'")
    ENGINES.add(name, builder)


def build_backend(settings):
    """The backend of the engine named by the run's ``engine``, built from the run's
    `RunSettings`.

    Raises:
        TypeError: ``settings`` is not a `RunSettings` (a composed config: build
            them with `run_settings` first).
        ValueError: an unknown engine (the message lists the registered ones).
        RuntimeError: ``verl_ray`` without the GPUs its resource pools need (before any worker starts).
    """
    st = checked_run_settings(settings, "build_backend")
    return load_object(ENGINES.lookup(st.engine.name))(st)


register_engine("local", "genenv.trainer.engines.local:build_local_backend")
register_engine("verl_ray", "genenv.trainer.engines.verl_ray.backend:build_verl_ray_backend")

__all__ = [  # what a user may import: the names above and the public modules
    "ENGINES", "register_engine", "build_backend", "base", "local", "memory", "verl_ray",
]
