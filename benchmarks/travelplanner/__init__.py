"""TravelPlanner (Xie et al. 2024): multi-day trip plans over a real database, scored by 13 constraints.

- ``db.py``: the database tables, the rebuilt flights table and the six search tools; ``query.py``: query
  fields (read from text, validated, rendered); ``reference.py``: reference information (section titles, the tool
  call behind each section, rendering); ``plan.py``: plans as data and as model text;
- ``checker.py``: the commonsense and hard constraints, the reward and the official rates;
- ``search.py``: the constructive search that finds a passing plan (gold of validation and generated queries);
- ``data.py``: queries as tasks, where the data is read and the sample builder; ``sample/``: the packaged sample;
- ``prompts.py``: plan format, system prompts, the demonstrated turn and the tool descriptions;
- ``env.py``: ``genenv/TravelPlanner-v0`` (sole planning) and ``genenv/TravelPlannerTwoStage-v0`` (tool use);
- ``spec.py``: the official rates, labelled, and environment-generated queries admitted by the search.
"""
from genenv.benchmarks.registry import register_benchmark
from genenv.envs.registry import register_sample_builder

register_benchmark("travelplanner", "genenv.benchmarks.travelplanner.spec:TravelPlannerSpec",
                   env_id="genenv/TravelPlanner-v0",
                   env="genenv.benchmarks.travelplanner.env:TravelPlannerEnv",
                   split_options="genenv.benchmarks.travelplanner.env:SPLIT_OPTIONS",
                   gym_entry_point="genenv.benchmarks.travelplanner.env:make_travelplanner_env")
register_benchmark("travelplanner_two_stage", "genenv.benchmarks.travelplanner.spec:TravelPlannerTwoStageSpec",
                   env_id="genenv/TravelPlannerTwoStage-v0",
                   env="genenv.benchmarks.travelplanner.env:TravelPlannerTwoStageEnv",
                   split_options="genenv.benchmarks.travelplanner.env:SPLIT_OPTIONS")
register_sample_builder("travelplanner", "genenv.benchmarks.travelplanner.data:build_sample")

__all__ = [  # what a user may import: the public modules
    "checker", "data", "db", "env", "plan", "prompts", "query", "reference", "search", "spec",
]
