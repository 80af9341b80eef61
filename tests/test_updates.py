"""The GRPO and RWR updates (veRL functions) on a tiny random model: direction, group dropping, KL leash."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from genenv.envs.task import Task
from genenv.trainer.engines.local import LocalBackend, RoleConfig
from genenv.trainer.strategies.env_policy_updates import ScoredGeneration, env_policy_samples
from genenv.trainer.generation import GenerationRecord
from genenv.runtime.policies import Generation
from genenv.trainer.updates import Sample
from genenv.trainer.updates.advantages import rwr_weights
from genenv.trainer.updates.batch import build_batch, response_logprobs


@pytest.fixture()
def backend(tiny_model_dir):
    rc = RoleConfig.defaults("agent", model=str(tiny_model_dir), lr=1e-2, kl_coef=0.0, micro_batch_size=2)
    env = RoleConfig.defaults("env_policy", model=str(tiny_model_dir), lr=1e-2)
    return LocalBackend({"agent": rc, "env_policy": env}, threads=1)


def _logp(backend, samples):
    batch = build_batch([s.prompt_ids for s in samples], [s.response_ids for s in samples], 0)
    lp = response_logprobs(backend.models["agent"], batch, autocast_dtype=None)
    return (lp * batch.batch["response_mask"]).sum(-1)


def test_grpo_moves_log_probs_in_the_direction_of_the_advantages(backend):
    prompt = [1, 17, 33, 48]
    good, bad = [70, 71, 72, 2], [90, 91, 92, 2]
    samples = [Sample(prompt, good, 1.0, "t"), Sample(prompt, bad, 0.0, "t"),
               Sample(prompt, good, 1.0, "t"), Sample(prompt, bad, 0.0, "t"),
               Sample(prompt, good, 0.5, "u"), Sample(prompt, bad, 0.5, "u")]  # group u: all equal
    before = _logp(backend, samples[:2])
    fp = backend.fingerprint("agent")
    m = backend.update("agent", samples, "grpo")
    after = _logp(backend, samples[:2])
    assert m["groups_kept"] == 1 and m["groups_dropped"] == 1 and m["samples"] == 4 and not m["skipped"]
    assert after[0] > before[0] and after[1] < before[1]
    assert backend.fingerprint("agent") != fp


def test_all_equal_groups_skip_the_update_without_touching_weights(backend):
    fp = backend.fingerprint("agent")
    m = backend.update("agent", [Sample([1, 2], [3, 2], 0.0, "a"), Sample([1, 2], [4, 2], 0.0, "a")], "grpo")
    assert m["skipped"] and m["groups_dropped"] == 1 and backend.fingerprint("agent") == fp


def test_rwr_weights_and_update_raise_likelihood_of_weighted_samples(backend):
    assert rwr_weights([0.0, 1.0], lam=1.0) == pytest.approx([1.0, 2.718281828])
    task = Task(id="gen-0-0-0", benchmark="bamboogle", split="generated", prompt="q", gold="a",
                action_kind="free_text", origin="generated")
    scored = [ScoredGeneration(GenerationRecord(p, Generation("x", [1, 5, 6], ids), task=task), r, band)
              for p, ids, r, band in ((0, [40, 41, 2], 0.9, True), (0, [50, 51, 2], 0.2, True),
                                      (1, [60, 61, 2], 0.7, False))]
    kept, mode = env_policy_samples("rwr", scored, 1.0)
    assert mode == "rwr" and [s.response_ids for s in kept] == [[40, 41, 2], [50, 51, 2]]
    assert kept[0].weight == pytest.approx(2.459603111) and kept[1].weight == pytest.approx(1.221402758)
    before = _logp(backend, kept)
    m = backend.update("agent", kept, "rwr")
    after = _logp(backend, kept)
    assert not m["skipped"] and torch.all(after > before)


def test_kl_leash_is_measured_against_the_frozen_reference(tiny_model_dir):
    rc = RoleConfig.defaults("agent", model=str(tiny_model_dir), lr=5e-2, kl_coef=1.0, micro_batch_size=4)
    be = LocalBackend({"agent": rc, "env_policy": rc}, threads=1)
    samples = [Sample([1, 2, 3], [10 + i, 2], float(i % 2), "g") for i in range(4)]
    first = be.update("agent", samples, "grpo")
    second = be.update("agent", samples, "grpo")
    # 0 up to the rounding of a bf16 reference (held in bf16 where the engine computes in bf16: its embeddings and
    # norms are rounded, its matmuls were bf16 under autocast anyway); measured 1.3e-6 on an AVX-512 BF16 CPU
    assert first["kl"] == pytest.approx(0.0, abs=1e-5) and second["kl"] > 1e-4


def test_low_precision_copies_keep_the_rotary_frequencies_of_the_float32_policy(tiny_model_dir):
    """The bf16 sampling copy and the bf16 reference hold their parameters in bf16 and the rotary embedding's
    frequencies in float32, as transformers loads a bf16 model: their logits equal a bf16-loaded model's, and
    those of a copy whose frequencies were rounded too do not (positions 1,150-1,200)."""
    from transformers import AutoModelForCausalLM

    from genenv.runtime.models import low_precision_copy

    rc = RoleConfig.defaults("agent", model=str(tiny_model_dir))
    be = LocalBackend({"agent": rc, "env_policy": rc}, autocast_dtype="bfloat16", threads=1)
    loaded = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.bfloat16).eval()
    ids = torch.arange(100, 1300)[None]
    with torch.no_grad():
        want = loaded(input_ids=ids).logits[0, -50:].float()
        for copy in (be.rollout_models["agent"], be.refs["agent"]):
            assert {p.dtype for p in copy.parameters()} == {torch.bfloat16}
            assert {b.dtype for b in copy.buffers()} == {torch.float32}
            assert not any(p.requires_grad for p in copy.parameters())
            assert torch.equal(copy(input_ids=ids).logits[0, -50:].float(), want)
        rounded = low_precision_copy(be.models["agent"], torch.bfloat16).to(torch.bfloat16)  # buffers cast too
        assert not torch.equal(rounded(input_ids=ids).logits[0, -50:].float(), want)
    # the copy's parameters pair one to one with the master's (the weight sync zips them)
    assert len(list(be.rollout_models["agent"].parameters())) == len(list(be.models["agent"].parameters()))


def test_backend_save_and_load_restore_weights_and_optimizer(backend, tmp_path):
    backend.update("agent", [Sample([1, 2], [3, 2], 1.0, "a"), Sample([1, 2], [4, 2], 0.0, "a")], "grpo")
    fp = {r: backend.fingerprint(r) for r in ("agent", "env_policy")}
    backend.save(tmp_path / "ckpt")
    state = backend.optimizers["agent"].state_dict()["state"]
    backend.load(tmp_path / "ckpt")
    assert {r: backend.fingerprint(r) for r in ("agent", "env_policy")} == pytest.approx(fp)
    restored = backend.optimizers["agent"].state_dict()["state"]
    assert restored.keys() == state.keys()
    k = next(iter(state))
    assert torch.equal(restored[k]["exp_avg"], state[k]["exp_avg"])



def test_a_role_not_updated_since_the_last_checkpoint_shares_its_files(backend, tmp_path, tiny_model_dir):
    """``save(path, previous)``: the environment policy, not updated in between, is hard-linked from the previous
    checkpoint (same inodes, no bytes written); the updated agent is written anew; the new checkpoint loads exactly
    (weights, AdamW moments, update steps) after the previous one is deleted."""
    import shutil

    samples = [Sample([1, 2], [3, 2], 1.0, "a"), Sample([1, 2], [4, 2], 0.0, "a")]
    backend.update("agent", samples, "grpo")
    backend.update("env_policy", samples, "grpo")
    backend.save(tmp_path / "iter-1")
    backend.update("agent", samples, "grpo")
    backend.save(tmp_path / "iter-2", previous=tmp_path / "iter-1")
    inode = {(it, role, f.name): f.stat().st_ino for it in ("iter-1", "iter-2") for role in ("agent", "env_policy")
             for f in (tmp_path / it / role).iterdir()}
    env_files = [k[2] for k in inode if k[:2] == ("iter-2", "env_policy")]
    assert "model.safetensors" in env_files and "optimizer.pt" in env_files
    assert all(inode["iter-2", "env_policy", f] == inode["iter-1", "env_policy", f] for f in env_files)
    assert inode["iter-2", "agent", "model.safetensors"] != inode["iter-1", "agent", "model.safetensors"]
    fp = {r: backend.fingerprint(r) for r in ("agent", "env_policy")}
    moments = backend.optimizers["agent"].state_dict()["state"]
    shutil.rmtree(tmp_path / "iter-1")
    fresh = LocalBackend({r: backend.roles[r] for r in ("agent", "env_policy")}, threads=1)
    fresh.load(tmp_path / "iter-2")
    assert {r: fresh.fingerprint(r) for r in ("agent", "env_policy")} == fp
    assert fresh.steps == {"agent": 2, "env_policy": 1}
    k = next(iter(moments))
    assert torch.equal(fresh.optimizers["agent"].state_dict()["state"][k]["exp_avg_sq"], moments[k]["exp_avg_sq"])
    fresh.update("agent", samples, "grpo")  # the next checkpoint writes the agent, links the env policy again
    fresh.save(tmp_path / "iter-3", previous=tmp_path / "iter-2")
    assert (tmp_path / "iter-3" / "env_policy" / "model.safetensors").stat().st_nlink == 2
    with torch.no_grad():  # weights changed outside an update (same step): the fingerprint tells, it is written
        next(p for p in fresh.models["env_policy"].parameters() if p.requires_grad).add_(0.1)
    fresh.save(tmp_path / "iter-4", previous=tmp_path / "iter-3")
    assert (tmp_path / "iter-4" / "env_policy" / "model.safetensors").stat().st_nlink == 1
    changed = fresh.fingerprint("env_policy")
    fresh.load(tmp_path / "iter-4")
    assert fresh.fingerprint("env_policy") == changed

def test_a_role_never_trained_writes_no_files_and_loads_from_its_model(backend, tmp_path, tiny_model_dir):
    """A full fine-tune never updated (a frozen task source's environment policy) writes no folder and is recorded
    ``saved: false``; a resumed run rebuilds it from its model (the same weights, a fresh AdamW), the evaluation's
    `checkpoint_folder` gives that model's folder, and once the role changes it is written in full."""
    from genenv.runtime.models import checkpoint_folder

    samples = [Sample([1, 2], [3, 2], 1.0, "a"), Sample([1, 2], [4, 2], 0.0, "a")]
    backend.update("agent", samples, "grpo")
    fp = {r: backend.fingerprint(r) for r in ("agent", "env_policy")}
    backend.save(tmp_path / "iter-1")
    assert not (tmp_path / "iter-1" / "env_policy").exists()
    assert (tmp_path / "iter-1" / "agent" / "model.safetensors").is_file()
    recorded = json.loads((tmp_path / "iter-1" / "backend.json").read_text())
    assert recorded["env_policy"]["saved"] is False and recorded["agent"]["saved"] is True
    assert checkpoint_folder(tmp_path / "iter-1", "env_policy") == Path(tiny_model_dir)
    assert checkpoint_folder(tmp_path / "iter-1", "agent") == tmp_path / "iter-1" / "agent"
    fresh = LocalBackend({r: backend.roles[r] for r in ("agent", "env_policy")}, threads=1)
    fresh.load(tmp_path / "iter-1")
    assert {r: fresh.fingerprint(r) for r in ("agent", "env_policy")} == fp
    assert fresh.steps == {"agent": 1, "env_policy": 0} and not fresh.optimizers["env_policy"].state_dict()["state"]
    assert fresh.untrained("env_policy") and not fresh.untrained("agent")
    with torch.no_grad():  # changed outside an update: no longer the model file's weights, so it is written
        next(p for p in fresh.models["env_policy"].parameters() if p.requires_grad).add_(0.1)
    fresh.save(tmp_path / "iter-2", previous=tmp_path / "iter-1")
    assert (tmp_path / "iter-2" / "env_policy" / "model.safetensors").is_file()
    assert checkpoint_folder(tmp_path / "iter-2", "env_policy") == tmp_path / "iter-2" / "env_policy"


def test_lora_backend_updates_only_the_adapter(tiny_model_dir, tmp_path):
    rc = RoleConfig.defaults("agent", model=str(tiny_model_dir), lr=1e-2, lora_r=4, lora_alpha=8)
    be = LocalBackend({"agent": rc, "env_policy": rc}, threads=1)
    base = {n: p.detach().clone() for n, p in be.models["agent"].named_parameters() if "lora" not in n}
    samples = [Sample([1, 2, 3], [10, 2], 1.0, "g"), Sample([1, 2, 3], [11, 2], 0.0, "g")]
    be.update("agent", samples, "grpo")
    m2 = be.update("agent", samples, "grpo")
    assert m2["kl"] >= 0.0
    for n, p in be.models["agent"].named_parameters():
        if "lora" not in n:
            assert torch.equal(p, base[n]), n
    be.save(tmp_path / "c")
    fp = be.fingerprint("agent")
    be.load(tmp_path / "c")
    assert be.fingerprint("agent") == pytest.approx(fp)


def test_an_update_on_length_sorted_unpadded_micro_batches_equals_the_full_width_gradient(tiny_model_dir):
    """Samples of very different lengths: the update (sorted micro-batches on their own width, one PPO epoch with
    the policy's own log-probs as old ones) moves the weights by exactly -lr x the gradient of the token-mean
    policy-gradient loss computed on the whole batch at full width, the textbook form of veRL's vanilla loss at
    ratio 1."""
    import copy

    from transformers import AutoModelForCausalLM

    from genenv.trainer.updates import policy_update, prepare_update

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, torch_dtype=torch.float32)
    ref = copy.deepcopy(model)
    samples = [Sample([1] + [17 + i] * (3 + 9 * i), [70 + i] * (2 + 7 * (i % 3)) + [2], float(i % 2), "g")
               for i in range(6)]
    batch, _ = prepare_update(samples, pad_id=0, estimator="grpo")
    expected = copy.deepcopy(model)
    logits = expected(input_ids=batch.batch["input_ids"], attention_mask=batch.batch["attention_mask"],
                      position_ids=batch.batch["position_ids"]).logits
    R = batch.batch["responses"].shape[1]
    logp = torch.log_softmax(logits[:, -R - 1:-1].float(), -1).gather(-1, batch.batch["responses"][..., None])[..., 0]
    mask = batch.batch["response_mask"].float()
    (-(batch.batch["advantages"] * logp * mask).sum() / mask.sum()).backward()

    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    calls = []
    model.register_forward_pre_hook(lambda module, args: calls.append(1))
    m = policy_update(model, ref, optimizer, samples, 0, kl_coef=0.0, micro_batch_size=4, max_grad_norm=1e9,
                      autocast_dtype=None)
    assert not m["skipped"] and m["samples"] == 6
    assert len(calls) == 2  # two micro-batches with gradients, no separate pass for the old log-probs
    for (name, before), after, p in zip(ref.named_parameters(), model.parameters(), expected.parameters()):
        torch.testing.assert_close(after - before, -p.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_response_logprobs_of_a_micro_batch_equal_its_full_width_forward(tiny_model_dir):
    """Per micro-batch the columns every sample pads are dropped; the log-probs (``[B, R]``) match the full-width
    forward on every response token and are 0 on the dropped padding."""
    from transformers import AutoModelForCausalLM

    from genenv.trainer.updates.batch import unpadded_span

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, torch_dtype=torch.float32)
    batch = build_batch([[1, 5, 6], [1] + [9] * 20, [1, 7]], [[40, 2], [41, 42, 43, 2], [44] * 12 + [2]], 0)
    full = response_logprobs(model, batch, micro_batch_size=3, autocast_dtype=None)
    alone = response_logprobs(model, batch, micro_batch_size=1, autocast_dtype=None)
    mask = batch.batch["response_mask"].bool()
    torch.testing.assert_close(alone[mask], full[mask], rtol=1e-4, atol=1e-5)
    assert torch.all(alone[0, 2:] == 0) and alone.shape == full.shape == (3, 13)
    cols, r = unpadded_span(batch.slice(0, 1))
    assert (cols.start, cols.stop, r) == (21 - 3, 21 + 2, 2)


@pytest.mark.parametrize("pass_tokens", [256, 0])
def test_multi_turn_log_probs_are_computed_only_where_a_sample_trains_and_equal_the_full_forward(
        tiny_model_dir, monkeypatch, pass_tokens):
    """Multi-turn responses (the environment's tokens masked out): the log-probs of every trained token and the
    gradient equal those of a forward that computes logits everywhere (``logits_to_keep=0``), for samples with
    prompts of their own and for a group sharing one, in one pass or one pass per sample (``PASS_TOKENS`` 0);
    columns no sample of the micro-batch trains on are 0."""
    from transformers import AutoModelForCausalLM

    from genenv.trainer.updates import batch as batches
    from genenv.trainer.updates.batch import trained_columns

    monkeypatch.setattr(batches, "PASS_TOKENS", pass_tokens)

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, torch_dtype=torch.float32)
    responses = [[40, 2, 50, 51, 52, 41, 2], [42, 43, 2, 53, 54, 44, 2], [45, 2, 55, 56, 57, 58, 46, 47, 2]]
    masks = [[1, 1, 0, 0, 0, 1, 1], [1, 1, 1, 0, 0, 1, 1], [1, 1, 0, 0, 0, 0, 1, 1, 1]]
    for prompts in ([[1, 5, 6], [1] + [9] * 8, [1, 7]], [[1, 5, 6]] * 3):
        batch = build_batch(prompts, responses, 0, response_masks=masks)
        mask = batch.batch["response_mask"].bool()
        assert trained_columns(batch, 9).tolist() == [0, 1, 2, 5, 6, 7, 8]
        lp = response_logprobs(model, batch, micro_batch_size=3, grad=True, autocast_dtype=None)
        (lp * mask).sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        t = batch.batch
        logits = model(input_ids=t["input_ids"], attention_mask=t["attention_mask"], position_ids=t["position_ids"],
                       ).logits[:, t["prompts"].shape[1] - 1:-1]
        want = torch.log_softmax(logits.float(), -1).gather(-1, t["responses"][..., None])[..., 0]
        (want * mask).sum().backward()
        torch.testing.assert_close(lp[mask], want[mask], rtol=1e-4, atol=1e-5)
        assert torch.all(lp[:, 3:5] == 0)
        for got, ref in zip(grads, (p.grad for p in model.parameters())):
            torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-5)
        model.zero_grad()


def test_samples_sharing_a_prompt_run_it_once_with_the_same_log_probs_and_gradient(tiny_model_dir):
    """A GRPO group (one prompt, responses of different lengths) beside a sample with its own prompt: in one
    micro-batch the shared prompt runs once (two forward calls for the group, one for the other sample) and the
    log-probs and the gradient of their sum equal those of one sample per micro-batch (no sharing)."""
    from transformers import AutoModelForCausalLM

    from genenv.trainer.updates.batch import prompt_groups

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, torch_dtype=torch.float32)
    prompt, other = [1] + [17, 18, 19] * 4, [1, 5, 6]
    responses = [[40, 2], [41, 42, 43, 44, 45, 2], [46] * 9 + [2], [47, 2]]
    batch = build_batch([prompt, prompt, other, prompt], responses, 0)
    groups = prompt_groups(batch.batch["prompts"], batch.batch["attention_mask"][:, :batch.batch["prompts"].shape[1]])
    assert [g.tolist() for g in groups] == [[0, 1, 3], [2]]
    mask = batch.batch["response_mask"].float()
    results = []
    for micro in (4, 1):
        model.zero_grad(set_to_none=True)
        calls = []
        hook = model.register_forward_pre_hook(lambda module, args: calls.append(1))
        lp = response_logprobs(model, batch, micro_batch_size=micro, grad=True, autocast_dtype=None)
        hook.remove()
        (lp * mask).sum().backward()
        results.append((lp.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}, len(calls)))
    (shared, shared_grad, shared_calls), (alone, alone_grad, alone_calls) = results
    assert (shared_calls, alone_calls) == (3, 4)
    torch.testing.assert_close(shared * mask, alone * mask, rtol=1e-4, atol=1e-5)
    for name, grad in alone_grad.items():
        # float32 sums in another order: the tolerance scales with the tensor's largest gradient (the embedding's
        # reaches ~26, where one element of 3.1M differed by 4.1e-5 on one CPU), a wrong gradient is off by far more
        scale = max(1.0, float(grad.abs().max()))
        torch.testing.assert_close(shared_grad[name], grad, rtol=1e-4, atol=1e-5 * scale, msg=name)


def test_update_order_keeps_a_prompts_samples_together_longest_first():
    """Two groups whose samples interleave by length: the update order keeps each group in one run (the group
    with the longest sample first), each run longest first."""
    from genenv.trainer.updates.update import group_length_order

    short, long_ = [1, 5, 6], [1, 5, 6, 7]
    responses = [[40, 2], [41] * 6 + [2], [42] * 3 + [2], [43] * 5 + [2], [44, 2]]
    batch = build_batch([short, long_, short, long_, short], responses, 0)
    assert group_length_order(batch).tolist() == [1, 3, 2, 0, 4]


def test_grouped_attention_is_sdpa_with_the_mask_for_every_query_row_of_a_kv_head():
    """`grouped_attention` with each KV head's query heads and queries as one run of
    rows: the
    output and the gradients of query, key and value equal SDPA's under the same mask, grouped heads read in
    place."""
    from genenv.runtime._builtin.attention import grouped_attention

    torch.manual_seed(0)
    heads, kv, q, k = 6, 2, 7, 19
    g = heads // kv
    allowed = torch.ones(q, k, dtype=torch.bool).tril(k - q)
    tensors = [torch.randn(2, heads, q, 16), torch.randn(2, kv, k, 16), torch.randn(2, kv, k, 16)]
    grads = []
    for ours in (True, False):
        query, key, value = (t.clone().requires_grad_() for t in tensors)
        out = grouped_attention(query.reshape(2, kv, g * q, 16), key, value, 16 ** -0.5,
                                blocked=~allowed.repeat(g, 1)).reshape(2, heads, q, 16) if ours else \
            torch.nn.functional.scaled_dot_product_attention(query, key.repeat_interleave(g, 1),
                                                             value.repeat_interleave(g, 1), attn_mask=allowed)
        (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape)).sum().backward()
        grads.append((out.detach(), query.grad, key.grad, value.grad))
    for got, want in zip(*grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("prompt, pass_tokens, passes", [
    ([1, 5], 256, [2, 5]), ([1, 5], 0, [2, 5, 5, 1]), ([1, 5, 6, 7, 8, 9, 10, 11], 256, [8, 5])])
def test_a_group_s_passes_stop_at_the_last_trained_token_on_either_attention(tiny_model_dir, monkeypatch, prompt,
                                                                              pass_tokens, passes):
    """A GRPO group of multi-turn responses whose last tokens are the environment's (never trained): the responses'
    passes stop at the last trained token, in one pass or, where padding would cost more than a pass
    (``PASS_TOKENS`` 0 here), one pass per response; on the builtin sampler's CPU attention
    (``use_decode_attention``, which a LoRA or float32 role's model carries, as it samples from it) the log-probs and
    the gradient are those of the same model on transformers' SDPA."""
    from transformers import AutoModelForCausalLM

    from genenv.runtime._builtin.attention import NAME, use_decode_attention
    from genenv.trainer.updates import batch as batches

    responses = [[40, 2, 50, 51, 41, 2, 52, 53], [42, 43, 2, 54, 44, 2, 55, 56, 57], [45, 2, 58, 59]]
    masks = [[1, 1, 0, 0, 1, 1, 0, 0], [1, 1, 1, 0, 1, 1, 0, 0, 0], [1, 1, 0, 0]]
    batch = build_batch([prompt] * 3, responses, 0, response_masks=masks)
    mask = batch.batch["response_mask"].bool()
    monkeypatch.setattr(batches, "PASS_TOKENS", pass_tokens)
    results = []
    for fast in (False, True):
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, torch_dtype=torch.float32)
        if fast:
            use_decode_attention(model)
            assert model.config._attn_implementation == NAME
        lengths = []
        hook = model.register_forward_pre_hook(lambda module, args, kw: lengths.append(kw["input_ids"].shape[1]),
                                               with_kwargs=True)
        lp = response_logprobs(model, batch, micro_batch_size=3, grad=True, autocast_dtype=None)
        hook.remove()
        (lp * mask).sum().backward()
        assert lengths == passes  # the prompt once; the responses up to column 5, the last trained token's input
        results.append((lp.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    (want, want_grad), (got, got_grad) = results
    torch.testing.assert_close(got[mask], want[mask], rtol=1e-5, atol=1e-6)
    assert torch.all(got[:, [3, 6, 7, 8]] == 0)  # the columns no sample trains on
    for name, grad in want_grad.items():
        scale = max(1.0, float(grad.abs().max()))
        torch.testing.assert_close(got_grad[name], grad, rtol=1e-4, atol=1e-5 * scale, msg=name)
