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


def test_the_trainer_s_llama_server_sampler_follows_every_update(tiny_model_dir, data_dir):
    """The stale-weight guard on the ``local`` engine with ``sampler: llama-server`` (float32 throughout): rollouts
    of real Bamboogle tasks carry the server's log-probs (one per token, or none for a sample whose tokens llama.cpp
    cut inside a UTF-8 character; concurrent slots make the samples vary from run to run); after an update the server holds the updated weights (its
    fingerprint is the trainer's new one and its log-probs of a fixed answer move), and the trainer-sampler gap on
    fresh rollouts stays below 0.05 nats per token; the same rollouts scored again after the update (what a sampler
    that kept stale weights would feed) show a gap more than twice as large; ``close`` stops the server."""
    import dataclasses

    from genenv.envs.registry import env_entry
    from genenv.runtime.episodes import RolloutSpec
    from genenv.runtime.policies import Prompt
    from genenv.trainer.engines.local import LocalBackend
    from genenv.trainer.settings import RoleConfig
    from genenv.trainer.updates.sample import agent_samples

    agent = RoleConfig.defaults("agent", sampler="llama-server", gen_batch_size=8, lr=1e-4, kl_coef=0.0,
                                micro_batch_size=8)
    backend = LocalBackend({"agent": agent, "env_policy": RoleConfig.defaults("env_policy", model=str(tiny_model_dir))},
                           autocast_dtype=None, threads=2)
    try:
        sampler = backend.policy("agent")
        tasks = env_entry("bamboogle").env_class.load_tasks(split="train", data_dir=data_dir)[:4]
        spec = RolloutSpec(n=4, temperature=1.0, max_new_tokens=32)
        probe = [Prompt([{"role": "user", "content": PROMPTS[0]}])]

        def update(rolled):  # rewards 0/1 alternating, so that every group trains
            samples = [dataclasses.replace(s, reward=float(i % 2))
                       for i, s in enumerate(agent_samples(rolled.trajectories))]
            return backend.update("agent", samples, "grpo")

        first = backend.rollout(tasks, spec)
        turns = [t for tr in first.trajectories for t in tr.turns]
        reported = [len(t.response_logprobs) == len(t.response_ids) for t in turns]
        assert all(r or not t.response_logprobs for r, t in zip(reported, turns))  # all of them or none
        assert sum(reported) >= 0.75 * len(turns)  # none where llama.cpp cut a UTF-8 character's tokens
        before, fp0 = sampler.generate(probe, max_new_tokens=6)[0][0], backend.fingerprint("agent")
        assert backend.sampler_fingerprint("agent") == fp0
        fresh = update(first)
        assert fresh["sync_seconds"] > 0 and fresh["rollout_log_probs_diff_mean"] < 0.05
        assert backend.fingerprint("agent") != fp0 and backend.sampler_fingerprint("agent") == backend.fingerprint("agent")
        after = sampler.generate(probe, max_new_tokens=6)[0][0]
        assert after.response_logprobs != before.response_logprobs
        stale = update(first)
        assert stale["rollout_log_probs_diff_mean"] > 2 * fresh["rollout_log_probs_diff_mean"]
        again = update(backend.rollout(tasks, spec))
        assert again["rollout_log_probs_diff_mean"] < 0.05
    finally:
        backend.close()
    assert sampler.proc is None


def test_the_transformers_sampler_is_plain_generate_and_agrees_with_the_builtin_one(tiny_model_dir):
    """``make_sampler``: ``transformers`` samples with transformers' own attention and caches (none of the builtin
    engine's pieces), ``builtin`` with the engine's CPU attention; in float32 their greedy tokens are the same, and
    ``transformers`` reports each sampled token's log-prob under the model (a full forward's). Both
    take new weights through ``load_weights`` (the answers change, the fingerprint names them); an unknown kind is
    refused."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from genenv.runtime._builtin.attention import NAME
    from genenv.runtime.policies import Prompt
    from genenv.runtime.samplers.sampler import make_sampler

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    models = [AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32) for _ in range(2)]
    builtin = make_sampler("builtin", models[0], tok, str(tiny_model_dir), fingerprint="w0")
    plain = make_sampler("transformers", models[1], tok, str(tiny_model_dir), fingerprint="w0")
    assert builtin.model.config._attn_implementation == NAME and builtin.continuous() is not None
    assert plain.model.config._attn_implementation != NAME and plain.continuous() is None
    assert plain.prefix_cache is None and not plain.retire_rows
    prompts = [Prompt([{"role": "user", "content": q}]) for q in PROMPTS]
    ours, theirs = (s.generate(prompts, n=2, temperature=0.0, max_new_tokens=12) for s in (builtin, plain))
    assert [[g.response_ids for g in row] for row in ours] == [[g.response_ids for g in row] for row in theirs]
    for gen in (row[0] for row in plain.generate(prompts, temperature=1.0, max_new_tokens=12)):  # the gap's input
        ids = torch.tensor([gen.prompt_ids + gen.response_ids])
        with torch.no_grad():
            full = torch.log_softmax(models[1](input_ids=ids).logits[0, len(gen.prompt_ids) - 1:-1].float(), -1)
        want = full.gather(1, ids[0, len(gen.prompt_ids):, None]).flatten()
        torch.testing.assert_close(torch.tensor(gen.response_logprobs), want, rtol=1e-4, atol=1e-4)
    torch.manual_seed(0)
    changed = dict(models[1].state_dict(), **{"model.norm.weight": torch.randn(models[1].config.hidden_size)})
    for sampler in (builtin, plain):
        assert sampler.fingerprint() == "w0"
        sampler.load_weights({k: v.clone() for k, v in changed.items()}, fingerprint="w1")
        assert sampler.fingerprint() == "w1"
        after = sampler.generate(prompts, max_new_tokens=12)
        assert [g[0].response_ids for g in after] != [g[0].response_ids for g in ours]
    with pytest.raises(ValueError, match="choose one of"):
        make_sampler("sglang", models[0], tok, str(tiny_model_dir))


def test_a_role_s_sampler_setting_is_checked_before_any_model_loads():
    """``<role>.policy.sampler`` names one of the samplers (the local engine refuses another before loading
    anything); ``llama-server`` serves full weights, so a LoRA role asking for it is refused, naming the keys."""
    from genenv.trainer.cli import compose_config
    from genenv.trainer.engines.local import build_local_backend
    from genenv.trainer.settings import ConfigError, run_settings

    assert run_settings(compose_config(["benchmark=bamboogle", "agent.policy.sampler=llama-server"])
                        ).roles["agent"].sampler == "llama-server"
    with pytest.raises(ValueError, match="agent.policy.sampler is 'sglang'; choose one of"):
        build_local_backend(run_settings(compose_config(["benchmark=bamboogle", "agent.policy.sampler=sglang"])))
    with pytest.raises(ConfigError, match="env_policy.policy.lora_r=8"):
        run_settings(compose_config(["benchmark=bamboogle", "env_policy.policy.sampler=llama-server",
                                     "env_policy.policy.lora_r=8"]))


def test_the_vllm_sampler_speaks_vllm_s_protocol(tmp_path):
    """`VLLMSampler` against a scripted stand-in for a running vLLM server (``url``; the real server is checked by
    ``lab/benches/check_vllm_sampler.py``): one ``/v1/completions`` request per prompt with its token ids, ``n``,
    ``logprobs`` and ``return_token_ids``, a JSON Schema as ``structured_outputs``; a sample that stopped at the
    model's end of sequence ends with the end-of-turn token; a sync writes every weight (the tied ``lm_head`` as
    its own tensor) and calls pause, reload, prefix-cache reset and resume in that order."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    import torch
    from safetensors.torch import load_file
    from transformers import LlamaConfig

    from genenv.runtime.policies import Prompt
    from genenv.runtime.samplers.vllm_server import VLLMSampler

    calls = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
            calls.append((self.path, body))
            out = {}
            if self.path == "/v1/completions":
                out = {"choices": [{"text": "ok", "token_ids": [10 + k, 11], "finish_reason": "stop",
                                    "stop_reason": None, "logprobs": {"token_logprobs": [-0.5, -0.25]}}
                                   for k in range(body["n"])]}
            data = json.dumps(out).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            """Quiet."""

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    embed = torch.randn(8, 4)
    weights = {"model.embed_tokens.weight": embed, "lm_head.weight": embed, "model.norm.weight": torch.ones(4)}
    config = LlamaConfig(vocab_size=8, hidden_size=4, num_hidden_layers=1, num_attention_heads=1,
                         intermediate_size=8, tie_word_embeddings=True)
    tokenizer = type("Tok", (), {"stop_token_ids": [2], "eos_token_id": 2, "save_pretrained": lambda self, d: None})()
    try:
        sampler = VLLMSampler(tokenizer, weights, config, url=f"http://127.0.0.1:{server.server_port}/v1",
                              workdir=tmp_path, concurrency=2, fingerprint="w0")
        schema = {"type": "object"}
        out = sampler.generate([Prompt([], token_ids=[1, 5, 6]), Prompt([], token_ids=[1, 7], json_schema=schema)],
                               n=2, temperature=1.0, max_new_tokens=16)
        assert [[g.response_ids for g in row] for row in out] == [[[10, 11, 2], [11, 11, 2]]] * 2
        assert all(g.response_logprobs == [] for row in out for g in row)  # the appended token has none
        requests = sorted((b for p, b in calls if p == "/v1/completions"), key=lambda b: len(b["prompt"]))
        assert [b["prompt"] for b in requests] == [[1, 7], [1, 5, 6]]
        assert requests[0]["structured_outputs"] == {"json": schema} and "structured_outputs" not in requests[1]
        assert all(b["n"] == 2 and b["logprobs"] == 0 and b["return_token_ids"] and b["stop_token_ids"] == [2]
                   for b in requests)
        calls.clear()
        sampler.load_weights(dict(weights, **{"model.norm.weight": torch.zeros(4)}), fingerprint="w1")
        assert [p for p, _ in calls] == ["/pause?mode=wait", "/collective_rpc", "/reset_prefix_cache", "/resume"]
        assert calls[1][1] == {"method": "reload_weights", "kwargs": {"weights_path": str(tmp_path / "model")}}
        written = load_file(str(tmp_path / "model" / "model.safetensors"))
        assert set(written) == set(weights) and torch.equal(written["lm_head.weight"], embed)
        assert torch.equal(written["model.norm.weight"], torch.zeros(4)) and sampler.fingerprint() == "w1"
        sampler.close()
    finally:
        server.shutdown()
