"""The local engine's memory plan (counted on the meta device, refused with options before loading), its frozen
weights in bf16 under bf16 autocast, and update batches placed on the model's device."""
from __future__ import annotations

import pytest
import torch

from genenv.trainer.engines.local import LocalBackend, RoleConfig
from genenv.trainer.engines.memory import GIB, MemoryPlanError, check_fits, model_config, parameter_counts, plan_role
from genenv.trainer.updates import Sample


def test_parameter_counts_equal_the_built_models(tiny_model_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    params, trainable = parameter_counts(model.config)
    assert params == trainable == sum(p.numel() for p in model.parameters())
    lora = get_peft_model(model, LoraConfig(r=8, target_modules="all-linear", task_type="CAUSAL_LM"))
    assert parameter_counts(model.config, lora_r=8) == (params, sum(p.numel() for p in lora.parameters()
                                                                      if p.requires_grad))


def test_a_full_fine_tune_plans_20_bytes_per_parameter_and_lora_far_less():
    params, _ = parameter_counts(model_config("smollm2"))
    assert 134e6 < params < 136e6  # SmolLM2-135M, tied embeddings counted once
    full = plan_role("agent", params, params, 0, bf16=True)
    assert full.total == 20 * params  # 4 master + 2 bf16 reference + 2 sampling copy + 8 AdamW + 4 gradients
    assert plan_role("agent", params, params, 0, bf16=False).total == 20 * params  # fp32 reference, no copy
    _, lora_t = parameter_counts(model_config("smollm2"), lora_r=16)
    lora = plan_role("agent", params, lora_t, 16, bf16=True)
    assert lora.total == 2 * params + 16 * lora_t and lora.total < full.total / 7


def test_a_pair_that_does_not_fit_is_refused_with_the_options(tiny_model_dir):
    roles = {r: RoleConfig.defaults("agent", model=str(tiny_model_dir)) for r in ("agent", "env_policy")}
    plans = check_fits(roles, free_bytes=80 * GIB, bf16=True)
    need = sum(p.total for p in plans)
    with pytest.raises(MemoryPlanError) as err:
        check_fits(roles, free_bytes=need, bf16=True, device="cuda:0")  # no room left for the 15 % headroom
    message = str(err.value)
    assert "on cuda:0" in message and "agent: full fine-tune" in message and "env_policy: full fine-tune" in message
    assert "agent.policy.lora_r=16 env_policy.policy.lora_r=16" in message and "engine=verl_ray" in message


def test_frozen_weights_are_bf16_under_bf16_autocast_and_updates_still_move_the_agent(tiny_model_dir):
    roles = {"agent": RoleConfig.defaults("agent", model=str(tiny_model_dir), lr=1e-2, micro_batch_size=2),
             "env_policy": RoleConfig.defaults("env_policy", model=str(tiny_model_dir), lora_r=4)}
    backend = LocalBackend(roles, autocast_dtype="bfloat16", threads=1)
    assert {p.dtype for p in backend.refs["agent"].parameters()} == {torch.bfloat16}
    assert {p.dtype for p in backend.models["agent"].parameters()} == {torch.float32}  # master weights
    env = backend.models["env_policy"]
    assert {p.dtype for p in env.parameters() if p.requires_grad} == {torch.float32}  # LoRA adapters
    assert {p.dtype for p in env.parameters() if not p.requires_grad} == {torch.bfloat16}  # its frozen base
    before = backend.fingerprint("agent")
    samples = [Sample([1, 17, 33], [40, 41, 2], r, "g") for r in (0.0, 1.0)]
    metrics = backend.update("agent", samples, "grpo")
    assert not metrics["skipped"] and backend.fingerprint("agent") != before
    assert backend.update("env_policy", samples, "grpo")["skipped"] is False
