"""The benchmark-spec registry: name → the ``"module:Class"`` of its `BenchmarkSpec`.

A benchmark folder's ``__init__`` registers its spec by entry-point string (`register_benchmark`) beside its
envs (`genenv.envs.registry.register_env`); the spec module is imported only when `get_benchmark` asks
for it. Registrations are loaded with the envs' plugins (`genenv.envs.registry.load_plugins`), so a
third-party benchmark plugs in through the same entry-point group. `paper_benchmarks` lists the specs that
evaluate the paper's protocols (``genenv-eval --benchmarks paper``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # this module imports nothing of genenv at import time: benchmark folders import it while the
    from genenv.benchmarks.spec import BenchmarkSpec  # env framework loads its plugins

__all__ = ["BENCHMARKS", "get_benchmark", "paper_benchmarks", "register_benchmark"]

BENCHMARKS: dict[str, str] = {}  # name → "module:Class" of the spec
_INSTANCES: dict[tuple[str, str | None], "BenchmarkSpec"] = {}


def register_benchmark(name: str, entry_point: str, *, env_id: str = "", env: str = "",
                       split_options: tuple[dict[str, Any], ...] | str = ({},), gym_entry_point: str = "") -> None:
    """Register benchmark ``name`` in one call: its spec class at ``entry_point`` (``"module:Class"``) and, with
    ``env_id`` and ``env``, its Gymnasium env (`genenv.envs.registry.register_env` with ``split_options``
    and ``gym_entry_point``), so the two halves share one name by construction. Nothing is imported.

    Raises:
        ValueError: an empty name, a malformed entry point, only one of ``env_id`` / ``env``, or the name taken
            by another class.
    """
    if bool(env_id) != bool(env):
        raise ValueError(f"{name}: give both env_id and env, or neither")
    if env:
        from genenv.envs.registry import register_env

        register_env(name, env_id, env, split_options=split_options, gym_entry_point=gym_entry_point)
    if not name:
        raise ValueError(f"{entry_point}: a benchmark spec needs a name")
    if ":" not in entry_point:
        raise ValueError(f"entry point {entry_point!r} is not 'package.module:Class'")
    other = BENCHMARKS.get(name)
    if other is not None and other != entry_point:
        raise ValueError(f"benchmark {name!r} already registered by {other}")
    BENCHMARKS[name] = entry_point


def get_benchmark(name: str, data_dir: str | os.PathLike | None = None, grounded: bool = True) -> "BenchmarkSpec":
    """The spec of ``name`` bound to ``data_dir`` (its loaders, backends and validators read that data; ``None``:
    ``$GENENV_DATA_DIR``, else the packaged samples) and to ``grounded`` (grounded validation of generated tasks).
    One shared instance per (name, data dir, grounded); nothing changes it after it is made.

    Raises:
        KeyError: no such benchmark (the message lists the registered names and plugin failures).
        TypeError: the registered class's ``name`` differs from ``name``.
    """
    from genenv.envs.registry import PLUGIN_ERRORS, load_plugins
    from genenv.envs.tables import load_object

    load_plugins()
    if name not in BENCHMARKS:
        failed = f"; plugins that failed to load: {PLUGIN_ERRORS}" if PLUGIN_ERRORS else ""
        raise KeyError(f"unknown benchmark {name!r}; registered: {sorted(BENCHMARKS)}{failed}")
    key = (name, str(Path(data_dir).expanduser().resolve()) if data_dir else None, bool(grounded))
    if key not in _INSTANCES:
        cls = load_object(BENCHMARKS[name])
        if getattr(cls, "name", None) != name:
            raise TypeError(f"{BENCHMARKS[name]} has name {getattr(cls, 'name', None)!r}, registered as {name!r}")
        _INSTANCES[key] = cls(data_dir=data_dir, grounded=grounded)
    return _INSTANCES[key]


def paper_benchmarks(data_dir: str | os.PathLike | None = None) -> dict[str, dict]:
    """The registered benchmarks that evaluate the paper's Table 1 protocols, each with its loader options (its
    spec's ``paper_options``, copied), in registration order: one per Table 1 column (a spec with
    ``paper_options = None`` is left out).

    Raises:
        KeyError / TypeError: as `get_benchmark`, for a registered spec that does not load.
    """
    from genenv.envs.registry import load_plugins

    load_plugins()
    specs = [get_benchmark(name, data_dir) for name in BENCHMARKS]
    return {spec.name: dict(spec.paper_options) for spec in specs if spec.paper_options is not None}
