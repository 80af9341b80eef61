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


FORMULAS = {"rzero": lambda p: 2 * min(p, 1 - p),  # R-Zero: 2·min(p̂, 1 - p̂)
            "absolute_zero": lambda p: 1 - p if 0 < p < 1 else 0.0}  # Absolute Zero: 1 - p̂, 0 at p̂ ∈ {0, 1}


@pytest.mark.parametrize("reward", ["rzero", "absolute_zero"])
def test_other_environment_rewards_score_generations_by_their_formulas(tmp_path, tiny_model_dir, reward):
    """With ``curriculum.env_reward`` = R-Zero or Absolute Zero, the loop's scoring gives every admitted generation
    the reward's formula at its p̂ (hand-built records at p̂ 0, 0.25, 0.5, 0.75, 1) and every rejected one 0; one
    iteration with GRPO on R_env writes those values to ``generations.jsonl``."""
    from types import SimpleNamespace

    row = _run(tmp_path, tiny_model_dir, f"curriculum.env_reward={reward}", "env_policy.update_mode=grpo")
    assert row["gen/generated"] == 2
    cfg = compose_config([f"run_dir={tmp_path}/run2", "benchmark=bamboogle", f"curriculum.env_reward={reward}",
                          "curriculum.alpha=0.25", "curriculum.k_min=0.15"])
    p_hats = {"a": 0.0, "b": 0.25, "c": 0.5, "d": 0.75, "e": 1.0}
    records = [SimpleNamespace(task=SimpleNamespace(id=k)) for k in p_hats] + [SimpleNamespace(task=None)]
    scored = CoEvolutionTrainer.score_generations(SimpleNamespace(cfg=cfg), records, p_hats)
    assert [s.r_env for s in scored] == pytest.approx([FORMULAS[reward](p) for p in p_hats.values()] + [0.0])
    assert [s.in_band for s in scored] == [False, True, False, False, False, False]  # |p̂ - 0.25| <= 0.15
    import json

    gens = [json.loads(x) for x in (tmp_path / "run" / "generations.jsonl").read_text().splitlines()]
    for g in gens:
        want = 0.0 if not g["admitted"] else FORMULAS[reward](g["p_hat"])
        assert g["r_env"] == pytest.approx(want)


def test_multi_step_episodes_train_as_one_packed_sequence_each(tmp_path, tiny_model_dir):
    """TextWorldExpress keeps the whole conversation in the prompt, so the loop hands the agent update one
    sequence per episode: the samples are exactly the rolled-out episodes, each starting at its first prompt,
    and the environment's tokens between turns are masked out (mask 0) where an episode took several turns."""
    cfg = compose_config([f"run_dir={tmp_path}/run", "benchmark=twx", "iterations=1", "tensorboard=false",
                          "threads=1", f"agent.policy.model={tiny_model_dir}", f"env_policy.policy.model={tiny_model_dir}",
                          "generation.enabled=false", "agent.batch_tasks=2", "agent.n=2", "agent.max_new_tokens=6",
                          "agent.temperature=1.0", "benchmark.env_kwargs.max_steps=3",
                          "+benchmark.seed_options.episodes=4"])
    trainer = CoEvolutionTrainer(cfg)
    seen, update = [], trainer.backend.update

    def spy(role, samples, mode):
        if role == "agent":
            seen.append(list(samples))
        return update(role, samples, mode)

    trainer.backend.update = spy
    row = trainer.run()[0]
    (samples,) = seen
    assert row["agent/rollouts"] == 4 and len(samples) == 4 and len({s.episode for s in samples}) == 4
    assert row["time/env_steps"] > 0
    several = [s for s in samples if 0 in s.response_mask]  # an episode of more than one turn
    assert several
    for s in several:
        assert s.response_mask[0] == 1 and s.response_mask[-1] == 1 and len(s.response_mask) == len(s.response_ids)


def test_unknown_env_update_mode_is_a_clear_error(tmp_path, tiny_model_dir):
    with pytest.raises(ValueError, match="config key .env_policy.update_mode. is .ppo.; choose one of .*grpo.*none.*rwr"):
        _run(tmp_path, tiny_model_dir, "env_policy.update_mode=ppo")
