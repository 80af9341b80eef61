"""API-Bank (Li et al. 2023): tool-augmented dialogues, scored by executing the calls on the API backends.

- ``env.py``: ``genenv/APIBank-v0`` (one call per episode, official and ToolRL protocols);
- ``plan_env.py``: ``genenv/APIBankPlan-v0`` (level 3 as episodes: retrieve, call, answer);
- ``response_env.py``: ``genenv/APIBankResponse-v0`` (the reply after an API result, ROUGE-L);
- ``apis/``: the API backends (one class per API, its checker rule beside it) and the tool retriever;
- ``spec.py``: metrics and environment-generated dialogues for the three envs;
- ``agreement.py``: the cases of the agreement study with the released evaluator (gold and perturbed calls);
- ``data.py``: where the data is read and the sample builder; ``sample/``: the packaged sample.
"""
from genenv.benchmarks.registry import register_benchmark
from genenv.envs.registry import register_sample_builder

register_benchmark("api_bank", "genenv.benchmarks.api_bank.spec:APIBankSpec",
                   env_id="genenv/APIBank-v0",
                   env="genenv.benchmarks.api_bank.env:APIBankEnv",
                   split_options="genenv.benchmarks.api_bank.env:SPLIT_OPTIONS")
register_benchmark("api_bank_plan", "genenv.benchmarks.api_bank.spec:APIBankPlanSpec",
                   env_id="genenv/APIBankPlan-v0",
                   env="genenv.benchmarks.api_bank.plan_env:APIBankPlanEnv",
                   split_options="genenv.benchmarks.api_bank.plan_env:SPLIT_OPTIONS")
register_benchmark("api_bank_response", "genenv.benchmarks.api_bank.spec:APIBankResponseSpec",
                   env_id="genenv/APIBankResponse-v0",
                   env="genenv.benchmarks.api_bank.response_env:APIBankResponseEnv",
                   split_options="genenv.benchmarks.api_bank.response_env:SPLIT_OPTIONS")
register_sample_builder("api_bank", "genenv.benchmarks.api_bank.data:build_sample")

__all__ = [  # what a user may import: the public modules
    "agreement", "apis", "data", "env", "plan_env", "response_env", "spec",
]
