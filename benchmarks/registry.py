"""The one benchmark registry: name → :class:`~genenv.benchmarks.spec.BenchmarkSpec` instance."""
from __future__ import annotations

from genenv.benchmarks.bamboogle import BamboogleSpec
from genenv.benchmarks.bfcl import BFCLSpec
from genenv.benchmarks.spec import BenchmarkSpec

BENCHMARKS: dict[str, BenchmarkSpec] = {spec.name: spec for spec in (BFCLSpec(), BamboogleSpec())}


def get_benchmark(name: str) -> BenchmarkSpec:
    """The spec registered as ``name``; raises ``KeyError`` listing the registered names."""
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise KeyError(f"unknown benchmark {name!r}; registered: {sorted(BENCHMARKS)}") from None
