"""Benchmark specs (evaluation metrics, task generation, validation) and the paper's baselines."""
from genenv.benchmarks.registry import BENCHMARKS, discover, get_benchmark, register_benchmark
from genenv.benchmarks.spec import BenchmarkSpec, Metric, Rejection

__all__ = ["BENCHMARKS", "BenchmarkSpec", "Metric", "Rejection", "get_benchmark", "register_benchmark"]

discover()
