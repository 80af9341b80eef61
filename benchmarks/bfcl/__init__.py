"""BFCL, the Berkeley Function Calling Leaderboard (bfcl-eval 2026.3.23): single-turn AST categories and
multi-turn executable episodes.

- ``env.py``: ``genenv/BFCL-v0`` (single-turn loader, rendering, gold calls); ``make.py``: the id's factory,
  which also serves ``multi_turn_*`` categories;
- ``multi_turn_env.py``: ``genenv/BFCLMultiTurn-v0`` on bfcl-eval's stateful backends;
- ``checker.py``: the adapter to bfcl-eval's AST checker; ``prompts.py``: system prompts and the worked example;
- ``spec.py`` / ``multi_turn_spec.py``: metrics and environment-generated tasks;
- ``data.py``: where the data is read and the sample builder; ``sample/``: the packaged sample.
"""
from genenv.benchmarks.registry import register_benchmark
from genenv.envs.registry import register_sample_builder

register_benchmark("bfcl", "genenv.benchmarks.bfcl.spec:BFCLSpec",
                   env_id="genenv/BFCL-v0",
                   env="genenv.benchmarks.bfcl.env:BFCLEnv",
                   split_options="genenv.benchmarks.bfcl.env:SPLIT_OPTIONS",
                   gym_entry_point="genenv.benchmarks.bfcl.make:make_bfcl_env")
register_benchmark("bfcl_multi_turn", "genenv.benchmarks.bfcl.multi_turn_spec:BFCLMultiTurnSpec",
                   env_id="genenv/BFCLMultiTurn-v0",
                   env="genenv.benchmarks.bfcl.multi_turn_env:BFCLMultiTurnEnv",
                   split_options="genenv.benchmarks.bfcl.multi_turn_env:SPLIT_OPTIONS")
register_sample_builder("bfcl", "genenv.benchmarks.bfcl.data:build_sample")

__all__ = [  # what a user may import: the public modules
    "checker", "data", "env", "make", "multi_turn_env", "multi_turn_spec", "prompts", "spec",
]
