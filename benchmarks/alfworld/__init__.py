"""ALFWorld (Shridhar et al. 2021): household text games on ``alfworld`` 0.4.2 + ``textworld``.

- ``files.py``: task types, data layout and game files; ``game.py``: the TextWorld engine, game instances and
  game records; ``goals.py``: ALFRED's goal grammar, new goals for real scenes, goal-condition progress;
- ``env.py``: ``genenv/ALFWorld-v0`` (loader, episodic and single-step protocols);
- ``spec.py``: metrics per task type and environment-generated goals admitted by ALFWorld's planner;
- ``data.py``: where the games are read and the sample builder; ``sample/``: the packaged sample games.
"""
from genenv.benchmarks.registry import register_benchmark
from genenv.envs.registry import register_sample_builder

register_benchmark("alfworld", "genenv.benchmarks.alfworld.spec:ALFWorldSpec",
                   env_id="genenv/ALFWorld-v0",
                   env="genenv.benchmarks.alfworld.env:ALFWorldEnv",
                   split_options="genenv.benchmarks.alfworld.env:SPLIT_OPTIONS")
register_sample_builder("alfworld", "genenv.benchmarks.alfworld.data:build_sample")

__all__ = [  # what a user may import: the public modules
    "data", "env", "feasible", "files", "game", "goals", "spec",
]
