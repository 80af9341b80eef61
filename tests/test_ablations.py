"""Ablations selectable by config run through the same loop (tiny random model: quality does not matter)."""
from __future__ import annotations

import pytest

from genenv.trainer.cli import compose_config
from genenv.trainer.loop import CoEvolutionTrainer


def _run(tmp_path, tiny_model_dir, *extra, benchmark: str = "bamboogle"):
    cfg = compose_config([f"run_dir={tmp_path}/run", f"benchmark={benchmark}", "iterations=1", "tensorboard=false",
                          "threads=1", f"agent.policy.model={tiny_model_dir}",
                          f"env_policy.policy.model={tiny_model_dir}",
                          "generation.prompts_per_iteration=1", "generation.generations_per_prompt=2",
                          "generation.max_new_tokens=8", "agent.batch_tasks=2", "agent.n=2",
                          "agent.max_new_tokens=6", *extra])
    return CoEvolutionTrainer(cfg).run()[0]


def test_static_data_ablation_generates_nothing(tmp_path, tiny_model_dir):
    row = _run(tmp_path, tiny_model_dir, "generation.enabled=false")
    assert row["gen/generated"] == 0 and row["pool/generated"] == 0 and row["agent/tasks"] == 2
    assert row["weights/env_policy_delta"] == 0.0


def test_frozen_environment_policy_ablation(tmp_path, tiny_model_dir):
    row = _run(tmp_path, tiny_model_dir, "env_policy.update_mode=none", "curriculum.k_min=1.0")
    assert row["gen/generated"] == 2 and row["env_policy_update/skipped"] is True and row["weights/env_policy_delta"] == 0.0


@pytest.mark.parametrize("reward", ["rzero", "absolute_zero"])
def test_other_environment_rewards_and_grpo_env_update(tmp_path, tiny_model_dir, reward):
    row = _run(tmp_path, tiny_model_dir, f"curriculum.env_reward={reward}", "env_policy.update_mode=grpo")
    assert row["gen/generated"] == 2 and 0.0 <= row["r_env/mean"] <= 1.0


def test_multi_step_episodes_train_through_the_same_loop(tmp_path, tiny_model_dir):
    row = _run(tmp_path, tiny_model_dir, "benchmark.env_kwargs.max_steps=3", "agent.temperature=1.0",
               "+benchmark.seed_options.episodes=4", benchmark="twx")
    assert row["agent/rollouts"] == 2 * row["agent/tasks"] and row["time/agent_rollout"] > 0
    assert row["time/env_steps"] > 0 and row["agent_update/samples"] <= row["agent/rollouts"]  # one packed sequence
    # per episode (TextWorldExpress keeps the whole conversation in the prompt)


def test_unknown_env_update_mode_is_a_clear_error(tmp_path, tiny_model_dir):
    with pytest.raises(ValueError, match="unknown env_policy.update_mode .*choose one of .*grpo.*none.*rwr"):
        _run(tmp_path, tiny_model_dir, "env_policy.update_mode=ppo")
