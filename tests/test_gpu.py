"""The local engine on a GPU (``pytest -m gpu``; skipped where CUDA is absent, so CI stays on the CPU): both
updates, one full co-evolution iteration with checkpoint and resume, a LoRA run, and the static-cache path with
compiled decoding, with a model of SmolLM2's real shape built from its config with random weights (nothing
downloaded).

What it guards: update batches meet the model's device in one place (``trainer/updates/batch.py: place_batch``;
otherwise veRL's ``masked_mean`` meets tensors on two devices), and the micro-batch order stays on the CPU
(``trainer/updates/update.py: group_length_order``; veRL's ``DataProto.reorder`` reads it with ``.numpy()``).
"""
from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (pytest -m gpu)")]


@pytest.fixture(scope="module")
def real_shape_dir(tmp_path_factory, smollm2_dir):
    """SmolLM2-135M's config and tokenizer with random weights, saved to a folder."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("smollm2-shape")
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(smollm2_dir)).save_pretrained(out)
    AutoTokenizer.from_pretrained(smollm2_dir).save_pretrained(out)
    return out


@pytest.mark.parametrize("lora_r", [0, 16])
def test_both_updates_run_on_the_gpu(real_shape_dir, lora_r):
    from genenv.trainer.engines.local import LocalBackend, RoleConfig
    from genenv.trainer.updates import Sample

    rc = RoleConfig.defaults("agent", model=str(real_shape_dir), lr=1e-4, lora_r=lora_r, micro_batch_size=2)
    backend = LocalBackend({"agent": rc, "env_policy": rc}, device="cuda")
    assert sum(p.total for p in backend.memory_plan) > 0
    samples = [Sample([1, 17, 33, 48], [40 + i, 41, 2], float(i % 2), "g", weight=1.0 + i) for i in range(4)]
    for role, mode in (("agent", "grpo"), ("env_policy", "rwr")):
        before = backend.fingerprint(role)
        metrics = backend.update(role, samples, mode)
        assert not metrics["skipped"] and backend.fingerprint(role) != before


@pytest.mark.parametrize("lora_r", [0, 16])
def test_one_iteration_checkpoint_and_resume_on_the_gpu(tmp_path, real_shape_dir, lora_r):
    from genenv.trainer.cli import compose_config
    from genenv.trainer.loop import CoEvolutionTrainer

    overrides = [f"run_dir={tmp_path / 'run'}", "benchmark=bamboogle", "device=cuda", "tensorboard=false",
                 f"agent.policy.model={real_shape_dir}", f"env_policy.policy.model={real_shape_dir}",
                 f"agent.policy.lora_r={lora_r}", f"env_policy.policy.lora_r={lora_r}",
                 "generation.prompts_per_iteration=2", "agent.batch_tasks=4",
                 "agent.n=4", "agent.max_new_tokens=16", "eval.every=1", "eval.limit=4",
                 "reward.free_text_metric=fuzz"]  # random text scores unequal values: the agent update runs
    rows = CoEvolutionTrainer(compose_config([*overrides, "iterations=1"])).run()
    assert [r["iteration"] for r in rows] == [0] and rows[0]["agent_update/skipped"] is False
    resumed = CoEvolutionTrainer(compose_config([*overrides, "iterations=2"]))
    rows = resumed.run()
    assert [r["iteration"] for r in rows] == [1] and resumed.iteration == 2
    assert torch.cuda.max_memory_allocated() > 0


def test_static_cache_compiles_decoding_on_the_gpu(real_shape_dir):
    """``static_cache``: transformers compiles the decoding step (dynamo records graphs), every sample keeps its
    cap, and a second call of the same shapes reuses the compiled graphs."""
    from torch._dynamo.utils import counters

    from genenv.runtime.policies import Prompt, TransformersPolicy

    torch._dynamo.reset()
    policy = TransformersPolicy(str(real_shape_dir), dtype="bfloat16", device="cuda", static_cache=True,
                                batch_size=8)
    prompts = [Prompt([{"role": "user", "content": f"Question {i}: " + "word " * (3 * i)}]) for i in range(4)]
    out = policy.generate(prompts, n=2, temperature=0.7, max_new_tokens=16)
    assert [len(gens) for gens in out] == [2] * 4
    assert all(0 < len(g.response_ids) <= 16 for gens in out for g in gens)
    graphs = counters["stats"]["unique_graphs"]
    assert graphs > 0
    policy.generate(prompts, n=2, temperature=0.7, max_new_tokens=16)
    assert counters["stats"]["unique_graphs"] == graphs


def test_one_iteration_with_static_cache_decoding_on_the_gpu(tmp_path, real_shape_dir):
    """Both roles sample through the static cache (the environment policy under its JSON Schema's logits
    processor): one co-evolution iteration runs and the agent update applies."""
    from genenv.trainer.cli import compose_config
    from genenv.trainer.loop import CoEvolutionTrainer

    overrides = [f"run_dir={tmp_path / 'run'}", "benchmark=bamboogle", "device=cuda", "tensorboard=false",
                 f"agent.policy.model={real_shape_dir}", f"env_policy.policy.model={real_shape_dir}",
                 "agent.policy.static_cache=true", "env_policy.policy.static_cache=true",
                 "generation.prompts_per_iteration=2", "agent.batch_tasks=4", "agent.n=4", "agent.max_new_tokens=16",
                 "eval.every=1", "eval.limit=4", "reward.free_text_metric=fuzz", "iterations=1"]
    rows = CoEvolutionTrainer(compose_config(overrides)).run()
    assert [r["iteration"] for r in rows] == [0] and rows[0]["agent_update/skipped"] is False
    assert rows[0]["agent/generated_tokens"] > 0
