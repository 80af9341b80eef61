"""Named tables and entry points, the project's one registry helper: `Registry` (advantage estimators,
environment-policy update modes, environment-policy rewards, engine builders, env entries) and
`load_object` (``"package.module:attribute"`` strings, imported on first use). The bottom of the import
layers: it imports nothing of this project (a contract in ``pyproject.toml``)."""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Registry", "load_object"]


class Registry(dict):
    """A table of named things (advantage estimators, environment-policy update modes, environment-policy rewards,
    engine builders): the one registry helper of the project. A name is registered once; looking up an unknown
    name raises an error that lists the registered ones (what a config key may say).

    Args:
        kind: what the table holds, in words (``"advantage estimator"``), for error messages.
    """

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def add(self, name: str, obj: Any) -> Any:
        """Record ``obj`` under ``name`` and return it (registering the same object again is a no-op).

        Raises:
            ValueError: an empty name, or the name taken by another object.
        """
        if not name:
            raise ValueError(f"a {self.kind} needs a name")
        other = self.get(name, obj)
        if other is not obj and other != obj:
            raise ValueError(f"{self.kind} {name!r} already registered by {other!r}")
        self[name] = obj
        return obj

    def register(self, name: str):
        """Decorator form of `add`: ``@REGISTRY.register("name")``."""
        return lambda obj: self.add(name, obj)

    def lookup(self, name: str) -> Any:
        """The object registered as ``name``.

        Raises:
            ValueError: no such name (the message lists the registered ones).
        """
        if name not in self:
            raise ValueError(f"unknown {self.kind} {name!r}; choose one of {sorted(self)}")
        return self[name]


def load_object(entry_point: str) -> Any:
    """The object named by ``"package.module:attribute"`` (the module is imported on first use).

    Raises:
        ValueError: ``entry_point`` is not ``module:attribute``.
        ImportError / AttributeError: the module or the attribute does not exist.
    """
    module, sep, name = entry_point.partition(":")
    if not (sep and module and name):
        raise ValueError(f"entry point {entry_point!r} is not 'package.module:attribute'")
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj
