"""The one benchmark registry: name → :class:`~genenv.benchmarks.spec.BenchmarkSpec` instance.

A spec module registers its class with :func:`register_benchmark`; :func:`discover` imports every module of the
``genenv.benchmarks`` package once, so adding a benchmark edits nothing here.
"""
from __future__ import annotations

from genenv.benchmarks.spec import BenchmarkSpec
from genenv.envs.registry import import_submodules

BENCHMARKS: dict[str, BenchmarkSpec] = {}
IMPORT_ERRORS: dict[str, str] = {}


def register_benchmark(cls: type[BenchmarkSpec]) -> type[BenchmarkSpec]:
    """Class decorator: instantiate the spec and register it under ``cls.name``.

    Raises:
        ValueError: empty ``name``, or the name is taken by another class.
    """
    if not cls.name:
        raise ValueError(f"{cls.__name__} must set the class attribute 'name'")
    other = BENCHMARKS.get(cls.name)
    if other is not None and type(other).__qualname__ != cls.__qualname__:
        raise ValueError(f"benchmark {cls.name!r} already registered by {type(other).__qualname__}")
    BENCHMARKS[cls.name] = cls()
    return cls


def discover() -> dict[str, BenchmarkSpec]:
    """Import every module of ``genenv.benchmarks`` once; failures are logged in :data:`IMPORT_ERRORS`."""
    import_submodules("genenv.benchmarks", IMPORT_ERRORS)
    return BENCHMARKS


def get_benchmark(name: str) -> BenchmarkSpec:
    """The spec registered as ``name``; raises ``KeyError`` listing the registered names."""
    try:
        return discover()[name]
    except KeyError:
        failed = f"; modules that failed to import: {IMPORT_ERRORS}" if IMPORT_ERRORS else ""
        raise KeyError(f"unknown benchmark {name!r}; registered: {sorted(BENCHMARKS)}{failed}") from None
