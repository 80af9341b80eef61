"""Bamboogle (Press et al. 2022): 125 two-hop questions with short answers, closed-book.

- ``env.py``: ``genenv/Bamboogle-v0`` (loader, rendering, EM / F1 scoring);
- ``spec.py``: evaluation metrics and environment-generated question-answer pairs;
- ``sample/``: the packaged copy of ``<data_dir>/bamboogle/`` (all 125 questions).
"""
from genenv.benchmarks.registry import register_benchmark
from genenv.envs.registry import register_sample_builder

register_benchmark("bamboogle", "genenv.benchmarks.bamboogle.spec:BamboogleSpec",
                   env_id="genenv/Bamboogle-v0",
                   env="genenv.benchmarks.bamboogle.env:BamboogleEnv",
                   split_options="genenv.benchmarks.bamboogle.env:SPLIT_OPTIONS")
register_sample_builder("bamboogle", "genenv.benchmarks.bamboogle.data:build_sample")

__all__ = [  # what a user may import: the public modules
    "data", "env", "spec",
]
