"""Registry of the benchmark environments: Gymnasium ids, env classes, and per-task prompt rendering.

An env module registers its :class:`~genenv.envs.base.TaskEnv` subclass with the :func:`register_env` class
decorator; :func:`discover` imports every module of the ``genenv.envs`` package once, so a new benchmark is one
new module and nothing here is edited. :func:`register_all` (run on ``import genenv.envs``) discovers the envs
and calls :func:`gymnasium.register` for each, so ``gymnasium.make("genenv/BFCL-v0", category="simple_python")``
works.
"""
from __future__ import annotations

import importlib
import logging
import pkgutil
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
from genenv.envs.task import Task

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnvEntry:
    """One registered environment: ``benchmark`` name, Gymnasium ``env_id``, ``entry_point`` (``module:Class``),
    ``split_options``: the loader keyword sets that ``genenv-envs list`` counts, the first of which is the
    benchmark's default evaluation split (the conformance suite samples its tasks from it), and
    ``gym_entry_point``: what ``gymnasium.make`` calls when it is not the class."""

    benchmark: str
    env_id: str
    entry_point: str
    split_options: tuple[dict[str, Any], ...]
    gym_entry_point: str = ""  # what gymnasium.make calls, when not the class (e.g. a factory by category)

    @property
    def env_class(self) -> type:
        """The env class (imported on first use)."""
        module, name = self.entry_point.split(":")
        return getattr(importlib.import_module(module), name)


ENVS: dict[str, EnvEntry] = {}
IMPORT_ERRORS: dict[str, str] = {}  # module → error, for modules that failed to import during discovery
_IMPORTED_PACKAGES: set[str] = set()


def register_env(env_id: str, split_options: tuple[dict[str, Any], ...] = ({},),
                 gym_entry_point: str = "") -> Callable[[type], type]:
    """Class decorator that registers a :class:`~genenv.envs.base.TaskEnv` subclass under its ``benchmark``.

    Args:
        env_id: the Gymnasium id, ``"genenv/<Name>-v<version>"``.
        split_options: loader keyword sets (see :class:`EnvEntry`); the first is the default evaluation split.
        gym_entry_point: ``"module:function"`` for ``gymnasium.make`` instead of the class (optional).
    Raises:
        ValueError: the class has no ``benchmark`` name, or the name / env id is already taken by another class.
    """

    def decorate(cls: type) -> type:
        """Record ``cls`` in :data:`ENVS` and return it unchanged."""
        name = getattr(cls, "benchmark", "")
        if not name:
            raise ValueError(f"{cls.__name__} must set the class attribute 'benchmark'")
        entry = EnvEntry(name, env_id, f"{cls.__module__}:{cls.__qualname__}", tuple(split_options),
                         gym_entry_point)
        for other in ENVS.values():
            if (other.benchmark == name or other.env_id == env_id) and other.entry_point != entry.entry_point:
                raise ValueError(f"{entry.entry_point}: benchmark {name!r} / id {env_id!r} already registered "
                                 f"by {other.entry_point}")
        ENVS[name] = entry
        return cls

    return decorate


def import_submodules(package_name: str, errors: dict[str, str]) -> None:
    """Import every public module of ``package_name``, once per process (later calls return at once); a module
    that raises ``ImportError`` (e.g. a missing optional dependency) is logged and recorded in ``errors``
    (module → message) instead of raising."""
    if package_name in _IMPORTED_PACKAGES:
        return
    _IMPORTED_PACKAGES.add(package_name)
    package = importlib.import_module(package_name)
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"{package_name}.{info.name}")
        except ImportError as exc:
            errors[info.name] = str(exc)
            log.warning("%s.%s not loaded: %s", package_name, info.name, exc)


def discover() -> dict[str, EnvEntry]:
    """Import every module of the ``genenv.envs`` package once (their decorators fill :data:`ENVS`); import
    failures land in :data:`IMPORT_ERRORS` and the other benchmarks stay usable. Returns :data:`ENVS`."""
    import_submodules("genenv.envs", IMPORT_ERRORS)
    return ENVS


def register_all() -> None:
    """Discover the envs and register each with Gymnasium (idempotent)."""
    for entry in discover().values():
        if entry.env_id not in gym.registry:
            gym.register(id=entry.env_id, entry_point=entry.gym_entry_point or entry.entry_point,
                         disable_env_checker=False)


def env_entry(benchmark: str) -> EnvEntry:
    """The registry entry of ``benchmark``; raises ``KeyError`` listing the known names (and import failures)."""
    try:
        return discover()[benchmark]
    except KeyError:
        failed = f"; modules that failed to import: {IMPORT_ERRORS}" if IMPORT_ERRORS else ""
        raise KeyError(f"unknown benchmark {benchmark!r}; registered: {sorted(ENVS)}{failed}") from None


def render_messages(task: Task) -> list[dict[str, str]]:
    """The chat messages that present ``task`` to a chat model (its env class's ``render_messages``)."""
    return env_entry(task.benchmark).env_class.render_messages(task)
