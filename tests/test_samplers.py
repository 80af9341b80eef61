"""Samplers backed by real engines: the policy's in-memory weights written as GGUF for llama.cpp.

The embedded model is a GGUF (``SmolLM2-135M-Instruct.Q4_1.gguf``) that the runtime de-quantises once into a
Hugging Face folder; writing that folder's weights back as a float32 GGUF with the original as template must give,
tensor for tensor, exactly the de-quantised values of the original (names, shapes and llama.cpp's rotary row order
of ``attn_q`` / ``attn_k`` included), and the template's metadata unchanged.
"""
from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture(scope="module")
def state_dict(smollm2_dir):
    from safetensors.torch import load_file

    return load_file(str(smollm2_dir / "model.safetensors"))


def test_weights_written_as_gguf_equal_the_original_s_values(state_dict, tmp_path):
    import gguf

    from genenv.runtime.models import smollm2_gguf_path
    from genenv.runtime.samplers.gguf_weights import write_gguf

    template = smollm2_gguf_path()
    out = write_gguf(state_dict, template, tmp_path / "f32.gguf", "f32")
    original, written = gguf.GGUFReader(str(template)), gguf.GGUFReader(str(out))
    assert [t.name for t in written.tensors] == [t.name for t in original.tensors]
    checked = 0
    for a, b in zip(original.tensors, written.tensors):
        if not (a.name.startswith(("token_embd", "output_norm", "blk.0.", "blk.29.")) or a.name.endswith("attn_k.weight")):
            continue  # every tensor kind and both ends of the stack, plus every attn_k
        assert b.tensor_type == gguf.GGMLQuantizationType.F32
        np.testing.assert_array_equal(gguf.quants.dequantize(a.data, a.tensor_type).reshape(b.data.shape), b.data,
                                      err_msg=a.name)
        checked += 1
    assert checked == 1 + 1 + 2 * 9 + 28
    for key in ("tokenizer.chat_template", "llama.rope.freq_base", "tokenizer.ggml.eos_token_id", "llama.block_count"):
        assert written.fields[key].contents() == original.fields[key].contents()
    assert written.fields["general.file_type"].contents() == gguf.LlamaFileType.ALL_F32
    assert len(written.fields["tokenizer.ggml.tokens"].contents()) == 49152


def test_bf16_gguf_rounds_matrices_keeps_norms_and_refuses_a_wrong_shape(state_dict, tmp_path):
    import gguf
    import torch

    from genenv.runtime.models import smollm2_gguf_path
    from genenv.runtime.samplers.gguf_weights import permute_rotary, write_gguf

    out = write_gguf(state_dict, smollm2_gguf_path(), tmp_path / "bf16.gguf", "bf16")
    tensors = {t.name: t for t in gguf.GGUFReader(str(out)).tensors}
    q = tensors["blk.3.attn_q.weight"]
    assert q.tensor_type == gguf.GGMLQuantizationType.BF16
    want = permute_rotary(state_dict["model.layers.3.self_attn.q_proj.weight"].to(torch.bfloat16).float().numpy(), 9)
    np.testing.assert_array_equal(gguf.quants.dequantize(q.data.view(np.uint8), q.tensor_type).reshape(want.shape), want)
    norm = tensors["blk.3.attn_norm.weight"]
    assert norm.tensor_type == gguf.GGMLQuantizationType.F32
    np.testing.assert_array_equal(norm.data, state_dict["model.layers.3.input_layernorm.weight"].numpy())
    bad = dict(state_dict, **{"model.layers.0.mlp.up_proj.weight": torch.zeros(3, 3)})
    with pytest.raises(ValueError, match="model.layers.0.mlp.up_proj.weight: shape"):
        write_gguf(bad, smollm2_gguf_path(), tmp_path / "bad.gguf")
    with pytest.raises(ValueError, match="dtype 'q4'"):
        write_gguf(state_dict, smollm2_gguf_path(), tmp_path / "q4.gguf", "q4")
    assert not (tmp_path / "bad.gguf").exists()


PROMPTS = ["What is the capital of France?", "Name three colours.", "Count to five."]


@pytest.fixture(scope="module")
def float32_policy():
    from genenv.runtime.policies import TransformersPolicy

    return TransformersPolicy("smollm2", dtype="float32")


def test_llama_server_samples_the_policy_s_weights_and_follows_a_sync(float32_policy, tmp_path):
    """``llama-server`` on the policy's weights (float32 GGUF): greedy answers begin with the tokens transformers
    decodes greedily; each response token has the sampler's log-prob; a sample that ends the turn ends with the
    end-of-turn token once; temperature sampling under distinct seeds gives distinct samples within the cap; a
    JSON Schema constrains the text; after `load_weights` with other weights the answers change and the
    fingerprint names the new weights."""
    import json

    from genenv.runtime.models import smollm2_gguf_path
    from genenv.runtime.policies import Prompt
    from genenv.runtime.samplers.llama_server import LlamaServerSampler

    pol = float32_policy
    prompts = [Prompt([{"role": "user", "content": q}]) for q in PROMPTS]
    reference = pol.generate(prompts, n=1, temperature=0.0, max_new_tokens=24)
    weights = pol.model.state_dict()
    with LlamaServerSampler(pol.tokenizer, weights, smollm2_gguf_path(), dtype="f32", slots=4, fingerprint="w0",
                            workdir=tmp_path) as sampler:
        greedy = sampler.generate(prompts, n=1, temperature=0.0, max_new_tokens=24)
        for prompt, ref, got in zip(prompts, reference, greedy):
            ids = got[0].response_ids
            assert ids[:8] == ref[0].response_ids[:8]
            assert got[0].prompt_ids == pol.encode_prompt(prompt.messages)
            assert len(got[0].response_logprobs) == len(ids) and all(lp <= 0.0 for lp in got[0].response_logprobs)
        first = greedy[0][0].response_ids  # "The capital of France is Paris." then the end of the turn
        assert first[-1] in pol.tokenizer.stop_token_ids and first.count(first[-1]) == 1
        samples = sampler.generate(prompts[:1], n=4, temperature=1.0, max_new_tokens=12)[0]
        assert len({tuple(s.response_ids) for s in samples}) > 1 and all(len(s.response_ids) <= 12 for s in samples)
        schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                  "required": ["city"], "additionalProperties": False}
        (constrained,) = sampler.generate([Prompt(prompts[0].messages, json_schema=schema)], max_new_tokens=32)[0]
        assert set(json.loads(constrained.text)) == {"city"}
        assert sampler.fingerprint() == "w0"
        flipped = dict(weights, **{"model.norm.weight": -weights["model.norm.weight"]})
        seconds = sampler.load_weights(flipped, fingerprint="w1")
        assert sampler.fingerprint() == "w1" and seconds > 0 and sampler.sync_seconds == [sampler.sync_seconds[0], seconds]
        after = sampler.generate(prompts[:1], n=1, temperature=0.0, max_new_tokens=8)[0][0]
        assert after.response_ids != first[:len(after.response_ids)]
