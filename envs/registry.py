"""Registry of the benchmark environments, filled lazily: env ids map to entry-point strings, not classes.

A benchmark registers its environments by name, as Gymnasium and skyrl-gym do: `register_env` records the
Gymnasium id, the benchmark name and the ``"module:Class"`` entry point, and calls `gymnasium.register` with
that string. Nothing is imported until an env is made (``gymnasium.make``) or its class is asked for
(`EnvEntry.env_class`), so ``import genenv.envs`` imports no benchmark.

Where registrations come from (`load_plugins`, run by ``import genenv.envs``, as Gymnasium's
``load_plugin_envs``): every entry point of the Python entry-point group ``genenv.benchmarks``, and nothing else:
this module names no benchmark package. The project's own benchmarks come in through the entry point its
``pyproject.toml`` declares (installed with the package, editable or not), which imports the light ``__init__`` of
each benchmark folder; a third-party package adds its own entry point (a function that calls `register_env`,
or a module whose import does), and its benchmarks appear in ``genenv-envs``, ``genenv-train`` and
``genenv-eval`` without any edit here (``docs/adding-an-env.md``).
"""
from __future__ import annotations

import importlib.util
import logging
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import gymnasium as gym

from genenv.envs.tables import load_object

__all__ = [
    "ENVS", "EnvEntry", "PLUGIN_ERRORS", "PLUGIN_GROUP", "SAMPLE_BUILDERS", "env_entry", "load_plugins",
    "plugin_config_packages", "plugin_failure", "plugin_failures", "register_env", "register_sample_builder",
    "render_messages", "top_package",
]

log = logging.getLogger(__name__)

PLUGIN_GROUP = "genenv.benchmarks"  # the Python entry-point group benchmarks register through


@dataclass(frozen=True)
class EnvEntry:
    """One registered environment.

    Attributes:
        benchmark: registry name (``"bfcl"``), equal to the env class's ``benchmark`` attribute.
        env_id: the Gymnasium id, ``"genenv/<Name>-v<version>"``.
        entry_point: ``"module:Class"`` of the `TaskEnv` subclass.
        split_source: the loader keyword sets that ``genenv-envs`` counts, or the ``"module:attribute"`` that holds
            them (read on first use, see `split_options`).
        gym_entry_point: what ``gymnasium.make`` calls when it is not the class (e.g. a factory by category).
    """

    benchmark: str
    env_id: str
    entry_point: str
    split_source: tuple[dict[str, Any], ...] | str = ({},)
    gym_entry_point: str = ""

    @property
    def split_options(self) -> tuple[dict[str, Any], ...]:
        """The loader keyword sets of the env's splits; the first is the benchmark's default evaluation split
        (the conformance suite samples its tasks from it)."""
        source = self.split_source
        return tuple(load_object(source)) if isinstance(source, str) else tuple(source)

    @property
    def env_class(self) -> type:
        """The env class (its module imported on first use).

        Raises:
            TypeError: the class's ``benchmark`` attribute is not this entry's name.
        """
        cls = load_object(self.entry_point)
        if getattr(cls, "benchmark", None) != self.benchmark:
            raise TypeError(f"{self.entry_point} has benchmark {getattr(cls, 'benchmark', None)!r}, "
                            f"registered as {self.benchmark!r}")
        return cls


ENVS: dict[str, EnvEntry] = {}
SAMPLE_BUILDERS: dict[str, str] = {}  # data folder name → "module:function" that writes its packaged sample
PLUGIN_ERRORS: dict[str, str] = {}  # entry point → error, for plugins that failed to load
_plugins_loaded = False


def register_env(benchmark: str, env_id: str, entry_point: str,
                 split_options: tuple[dict[str, Any], ...] | str = ({},), gym_entry_point: str = "") -> EnvEntry:
    """Register one environment by entry-point string (nothing is imported) and its id with Gymnasium.

    ``split_options``: the loader keyword sets of its splits, or the ``"module:attribute"`` holding them.
    Idempotent for the same entry point; returns the `EnvEntry`.

    Raises:
        ValueError: an empty name, a malformed entry point, or the name / env id already taken by another class.
    """
    if not benchmark:
        raise ValueError(f"{entry_point}: a benchmark needs a name")
    for target in (entry_point, gym_entry_point):
        if target and ":" not in target:
            raise ValueError(f"entry point {target!r} is not 'package.module:Class'")
    splits = split_options if isinstance(split_options, str) else tuple(split_options)
    entry = EnvEntry(benchmark, env_id, entry_point, splits, gym_entry_point)
    for other in ENVS.values():
        if (other.benchmark == benchmark or other.env_id == env_id) and other.entry_point != entry_point:
            raise ValueError(f"{entry_point}: benchmark {benchmark!r} / id {env_id!r} already registered "
                             f"by {other.entry_point}")
    ENVS[benchmark] = entry
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=gym_entry_point or entry_point, disable_env_checker=False)
    return entry


def register_sample_builder(folder: str, entry_point: str) -> None:
    """Register the maintainers' tool that writes the packaged sample of data folder ``folder``
    (``build_sample(source: full data dir, dest=its packaged sample folder)``; ``genenv-envs build-samples``).

    Raises:
        ValueError: a malformed entry point, or ``folder`` already has another builder.
    """
    if ":" not in entry_point:
        raise ValueError(f"entry point {entry_point!r} is not 'package.module:function'")
    if SAMPLE_BUILDERS.get(folder, entry_point) != entry_point:
        raise ValueError(f"data folder {folder!r} already has the sample builder {SAMPLE_BUILDERS[folder]}")
    SAMPLE_BUILDERS[folder] = entry_point


def load_plugins(entry_points: list[Any] | None = None) -> dict[str, EnvEntry]:
    """Call every entry point of the ``genenv.benchmarks`` group once per process (later calls return at once).

    A plugin that raises is logged and recorded in `PLUGIN_ERRORS` (the other benchmarks stay usable). The
    group is read from the installed packages' metadata only: a source tree that is not installed has no
    benchmarks (`env_entry` then says so). ``entry_points`` replaces the group's (tests). Returns
    `ENVS`.
    """
    global _plugins_loaded
    if _plugins_loaded and entry_points is None:
        return ENVS
    _plugins_loaded = True
    if entry_points is None:
        entry_points = list(metadata.entry_points(group=PLUGIN_GROUP))
    for ep in entry_points:
        try:
            loaded = ep.load()
            if callable(loaded):
                loaded()
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not hide the others
            PLUGIN_ERRORS[ep.value] = plugin_failure(ep, exc)
            log.warning("the %s entry point %s = %s failed, its benchmarks are not registered: %s", PLUGIN_GROUP,
                        ep.name, ep.value, PLUGIN_ERRORS[ep.value])
    return ENVS


def plugin_failures() -> list[str]:
    """One line per entry point of the group that failed to load (`load_plugins` first), naming it and saying
    why (`plugin_failure`): what the command-line tools print to stderr."""
    load_plugins()
    return [f"the benchmark entry point {ep} failed to import: {error}" for ep, error in PLUGIN_ERRORS.items()]


def plugin_failure(ep: Any, exc: BaseException) -> str:
    """What went wrong loading entry point ``ep``: the exception, and, when the entry point's top-level package
    was imported from somewhere else than the distribution that declares it (a folder or module of the same
    name in the working directory or earlier on ``sys.path``), where it came from and that it shadows the
    installed package. An editable install (whose files are not in the distribution's record) is not checked."""
    text = f"{type(exc).__name__}: {exc}"
    top = top_package(ep)
    dist = getattr(ep, "dist", None)
    record = [f for f in (dist.files or []) if f.parts and f.parts[0] in (top, f"{top}.py")] if dist else []
    module = sys.modules.get(top)
    if module is None:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            spec = None
        where = [spec.origin] if spec is not None and spec.origin else list(
            getattr(spec, "submodule_search_locations", None) or [])
    else:
        where = [getattr(module, "__file__", None)] if getattr(module, "__file__", None) else list(
            getattr(module, "__path__", []))
    if record and where:
        installed = Path(str(dist.locate_file(record[0]))).resolve()
        root = installed.parent if record[0].parts[0] == f"{top}.py" else installed.parents[len(record[0].parts) - 2]
        if not any(Path(w).resolve().is_relative_to(root) for w in where):
            text += (f". {top!r} was imported from {where[0]}, not from the installed distribution {dist.name} "
                     f"({root}): a folder or module named {top!r} there shadows it (run from another directory, "
                     f"or rename it)")
    return text


def top_package(ep: Any) -> str:
    """The top-level package of entry point ``ep``'s module (``mybench.plugin:register`` → ``mybench``)."""
    return ep.value.split(":", 1)[0].split(".", 1)[0].strip()


def plugin_config_packages() -> list[str]:
    """The config packages that benchmark packages ship: for every entry point of the ``genenv.benchmarks`` group
    outside this project, ``<its top-level package>.configs`` when that package has a ``configs`` folder (holding
    ``benchmark/<name>.yaml`` and, optionally, ``benchmark_profile/<name>_<profile>.yaml``). ``genenv-train`` and
    ``genenv-experiment`` add them to their config search path, so ``benchmark=<name>`` finds a package's config
    with no Hydra option. In entry-point order, each once; a package that cannot be imported is left out (its
    entry point's error is `load_plugins`'s to report)."""
    found: list[str] = []
    for ep in metadata.entry_points(group=PLUGIN_GROUP):
        top = top_package(ep)
        name = f"{top}.configs"
        if top == __name__.split(".", 1)[0] or name in found:
            continue
        try:
            if importlib.util.find_spec(name) is not None:
                found.append(name)
        except (ImportError, ValueError):
            continue
    return found


def env_entry(benchmark: str) -> EnvEntry:
    """The registry entry of ``benchmark``.

    Raises:
        KeyError: an unknown name; the message lists the registered ones and the plugins that failed, or, when no
            benchmark is registered at all, says that no installed package declares the entry-point group.
    """
    try:
        return load_plugins()[benchmark]
    except KeyError:
        if not ENVS and not PLUGIN_ERRORS:
            raise KeyError(f"unknown benchmark {benchmark!r}: no benchmark is registered, because no installed package "
                           f"declares the {PLUGIN_GROUP!r} entry-point group (install this project: pip install -e .)"
                           ) from None
        failed = f"; plugins that failed to load: {PLUGIN_ERRORS}" if PLUGIN_ERRORS else ""
        raise KeyError(f"unknown benchmark {benchmark!r}; registered: {sorted(ENVS)}{failed}") from None


def render_messages(task) -> list[dict[str, str]]:
    """The chat messages that present ``task`` (a `Task`) to a chat model: its env
    class's ``render_messages``."""
    return env_entry(task.benchmark).env_class.render_messages(task)

