"""TextWorldExpress (Jansen & Côté 2022): text games played step by step; the worked example of
``docs/adding-an-env.md``.

- ``env.py``: ``genenv/TextWorldExpress-v0`` over the ``textworld-express`` engine (games come from the engine,
  nothing is read from the data directory);
- ``spec.py``: success rate per game and environment-generated games validated by the engine.
"""
from genenv.benchmarks.registry import register_benchmark

register_benchmark("twx", "genenv.benchmarks.twx.spec:TWXSpec",
                   env_id="genenv/TextWorldExpress-v0",
                   env="genenv.benchmarks.twx.env:TextWorldExpressEnv",
                   split_options="genenv.benchmarks.twx.env:SPLIT_OPTIONS")

__all__ = [  # what a user may import: the public modules
    "env", "graded", "spec",
]
