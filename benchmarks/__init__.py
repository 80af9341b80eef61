"""The benchmarks: one folder each (env, data loading, backends, checker, task-generation spec, sample builder,
packaged sample) and the spec base class every folder implements (`genenv.benchmarks.spec`).

Importing this package imports no benchmark. `register_builtin` (this project's entry point in the
``genenv.benchmarks`` group, called by ``import genenv.envs``) imports the ``__init__`` of each folder, which only
registers its envs and spec by name and entry-point string.
"""
from __future__ import annotations

import importlib
import pkgutil


def register_builtin() -> list[str]:
    """Import the ``__init__`` of every benchmark folder of this package (each registers its envs and spec by
    entry-point string); returns the folder names. A new folder is found without any edit here."""
    names = [info.name for info in pkgutil.iter_modules(__path__) if info.ispkg and not info.name.startswith("_")]
    for name in names:
        importlib.import_module(f"{__name__}.{name}")
    return names

__all__ = [  # what a user may import: the names above and the public modules
    "register_builtin", "alfworld", "api_bank", "bamboogle", "bfcl", "bounded_schema", "fuzz", "grounding",
    "registry", "spec", "task_writer", "travelplanner", "twx",
]
