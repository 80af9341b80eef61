"""Bamboogle (Press et al. 2022): 125 two-hop questions with short answers, closed-book.

- ``env.py``: ``genenv/Bamboogle-v0`` (loader, rendering, EM / F1 scoring);
- ``spec.py``: evaluation metrics and environment-generated question-answer pairs;
- ``sample/``: the packaged copy of ``<data_dir>/bamboogle/`` (all 125 questions).
"""
from genenv.benchmarks.registry import register_benchmark
from genenv.envs.registry import register_env, register_sample_builder

register_env("bamboogle", "genenv/Bamboogle-v0", "genenv.benchmarks.bamboogle.env:BamboogleEnv",
             split_options="genenv.benchmarks.bamboogle.env:SPLIT_OPTIONS")
register_benchmark("bamboogle", "genenv.benchmarks.bamboogle.spec:BamboogleSpec")
register_sample_builder("bamboogle", "genenv.benchmarks.bamboogle.data:build_sample")
