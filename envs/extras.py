"""Optional dependencies: which extra of the ``genenv`` distribution a module needs, and a clear error without it.

``pip install genenv`` installs the env framework, the rewards, the registry, the light benchmarks (Bamboogle,
TravelPlanner) and evaluation against an OpenAI-compatible endpoint; each heavier benchmark or role is an extra
of ``pyproject.toml`` (``genenv[bfcl]``, ``genenv[alfworld]``, ``genenv[train]``, ...; ``docs/install.md``). A
module that needs an extra calls `require_extra` before importing it, as Gymnasium's own envs raise
``DependencyNotInstalled`` naming ``gymnasium[box2d]``; ``gymnasium.make`` of such an env then fails with a
message that names the extra to install instead of a bare ``ModuleNotFoundError``.
"""
from __future__ import annotations

import importlib.util

from gymnasium.error import DependencyNotInstalled

__all__ = ["MissingExtra", "require_extra", "missing_modules"]


class MissingExtra(DependencyNotInstalled, ImportError):
    """An optional dependency of the ``genenv`` distribution is not installed.

    A `gymnasium.error.DependencyNotInstalled` (what Gymnasium raises for its own extras) and an
    `ImportError` (what ``except ImportError`` expects). Attributes: ``extra`` (the extra's name, e.g.
    ``"alfworld"``) and ``missing`` (the top-level module names that could not be found).
    """

    def __init__(self, extra: str, missing: list[str], needed_by: str = ""):
        self.extra, self.missing = extra, list(missing)
        who = f"{needed_by} needs" if needed_by else "this needs"
        super().__init__(f"{who} the optional dependencies of the '{extra}' extra, and these are not installed: "
                         f"{', '.join(self.missing)}. Install them with: pip install 'genenv[{extra}]'")


def missing_modules(*modules: str) -> list[str]:
    """The names among ``modules`` (top-level import names, e.g. ``"textworld"``) that cannot be imported here,
    found without importing them (`importlib.util.find_spec`)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def require_extra(extra: str, *modules: str, needed_by: str = "") -> None:
    """Check that the import names ``modules`` of extra ``extra`` are installed; call it before importing them.

    ``needed_by`` names the caller in the message (e.g. ``"genenv/ALFWorld-v0"``).

    Raises:
        MissingExtra: one of ``modules`` is not installed; the message says ``pip install 'genenv[<extra>]'``.
    """
    missing = missing_modules(*modules)
    if missing:
        raise MissingExtra(extra, missing, needed_by)
