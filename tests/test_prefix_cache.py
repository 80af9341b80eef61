"""KV-cache reuse across turns (``runtime/_builtin/prefix_cache.py``): the store's lookup, eviction and invalidation,
and generation from reused prefixes giving the tokens a fresh prefill gives, in batches that mix reused lengths and in
real multi-step episodes."""
from __future__ import annotations

from unittest import mock

import pytest
import torch

from genenv.benchmarks.registry import get_benchmark
from genenv.runtime.episodes import RolloutSpec, play_episodes
from genenv.runtime.policies import Prompt, TransformersPolicy
from genenv.runtime._builtin.prefix_cache import PrefixCache

from conftest import DATA_DIR


def _kv(length: int, fill: float = 0.0) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    return [torch.full((2, length, 4), fill)], [torch.full((2, length, 4), fill)]


def test_lookup_finds_the_longest_common_prefix_and_keeps_one_token_to_feed():
    store = PrefixCache(max_tokens=100)
    store.store([1, 2, 3, 4], *_kv(4, 1.0))
    store.store([1, 2, 9, 9, 9], *_kv(5, 2.0))
    entry, n = store.lookup([1, 2, 3, 4, 5, 6])
    assert n == 4 and entry.keys[0][0, 0, 0] == 1.0
    entry, n = store.lookup([1, 2, 9, 7])
    assert n == 3 and entry.keys[0][0, 0, 0] == 2.0
    assert store.lookup([1, 2, 3, 4])[1] == 3  # a prompt equal to an entry still feeds its last token
    assert store.lookup([5, 6]) == (None, 0)
    assert (store.lookups, store.hits, store.reused_tokens) == (4, 3, 10)


def test_an_extension_replaces_its_prefix_and_old_entries_go_beyond_the_budget():
    store = PrefixCache(max_tokens=10)
    store.store([1, 2, 3], *_kv(3))
    store.store([1, 2, 3, 4, 5], *_kv(5))  # serves every lookup the shorter one would
    assert [list(e.ids) for e in store.entries.values()] == [[1, 2, 3, 4, 5]] and store.tokens == 5
    store.store([7, 8, 9, 10], *_kv(4))
    store.lookup([1, 2, 3, 4, 5, 6])  # now the most recently used
    store.store([20, 21, 22], *_kv(3))  # 12 tokens > 10: the least recently used ([7..10]) goes
    assert sorted(len(e.ids) for e in store.entries.values()) == [3, 5] and store.tokens == 8
    store.store(list(range(11)), *_kv(11))  # longer than the whole budget: not kept
    assert store.tokens == 8


def test_changed_weights_empty_the_store(tiny_model_dir):
    policy = TransformersPolicy(str(tiny_model_dir), dtype="float32")
    prompt = [Prompt([{"role": "user", "content": "Say hello."}])]
    policy.generate(prompt, max_new_tokens=4)
    assert len(policy.prefix_cache.entries) == 1
    policy.prefix_cache.check_weights(policy.model)
    assert len(policy.prefix_cache.entries) == 1  # same weights: kept
    with torch.no_grad():
        next(policy.model.parameters()).add_(0.0)  # an in-place update, as an optimiser step or a weight sync
    policy.prefix_cache.check_weights(policy.model)
    assert not policy.prefix_cache.entries


def test_reused_prefixes_give_the_tokens_of_a_fresh_prefill_in_a_mixed_batch(tiny_model_dir):
    """Greedy in float32: a batch mixing a long reused prefix, a short one and none decodes exactly what a policy
    without reuse decodes, and the reused prompt tokens are not prefilled again."""
    reusing = TransformersPolicy(str(tiny_model_dir), dtype="float32")
    fresh = TransformersPolicy(str(tiny_model_dir), dtype="float32", prefix_cache_tokens=0)
    first = [Prompt([{"role": "user", "content": "List three fruits and say why you like each of them."}]),
             Prompt([{"role": "user", "content": "Count to four."}])]
    turn1 = reusing.generate(first, max_new_tokens=10)
    assert [g[0].response_ids for g in turn1] == [g[0].response_ids for g in fresh.generate(first, max_new_tokens=10)]
    follow = [g[0].prompt_ids + g[0].response_ids + reusing.encode_prompt([{"role": "user", "content": "More."}])[1:]
              for g in turn1]
    batch = [follow[0], follow[1], reusing.encode_prompt([{"role": "user", "content": "Something new entirely."}])]
    before = reusing.prefix_cache.reused_tokens
    got = reusing.generate_from_ids(batch, max_new_tokens=10)
    want = fresh.generate_from_ids(batch, max_new_tokens=10)
    assert [g[0].response_ids for g in got] == [g[0].response_ids for g in want]
    assert reusing.prefix_cache.reused_tokens - before >= len(turn1[0][0].prompt_ids) + len(turn1[1][0].prompt_ids)



def test_long_prompts_prefilled_alone_give_the_same_tokens(tiny_model_dir):
    """``prefill_alone``: prompts with many uncached tokens are prefilled one at a time without padding (one of
    them continuing from a stored prefix) and stored; the batch then decodes what a fresh prefill decodes."""
    reusing = TransformersPolicy(str(tiny_model_dir), dtype="float32")
    fresh = TransformersPolicy(str(tiny_model_dir), dtype="float32", prefix_cache_tokens=0)
    long = reusing.encode_prompt([{"role": "user", "content": "Plan a three-day trip to Rome with a budget."}])
    short = reusing.encode_prompt([{"role": "user", "content": "Hi."}])
    store = reusing.prefix_cache
    store.check_weights(reusing.model)  # as generate does first: the entries below belong to these weights
    store.store(long[:6], *_prefix_kv(reusing, long[:6]))
    assert len(long) > len(short) + 5
    # the short prompt, after the long one, leaves at most min_tokens uncached: batched, not prefilled alone
    assert store.prefill_alone(reusing.model, [long, long, short], min_tokens=len(short) - 7) == len(long) - 7
    assert store.lookup(long, count=False)[1] == len(long) - 1 and store.lookups == 0
    common = next(i for i, (a, b) in enumerate(zip(long, short)) if a != b)  # the chat template's system prompt
    assert common > 6 and store.lookup(short, count=False)[1] == common
    got = reusing.generate_from_ids([long, short], max_new_tokens=8)
    want = fresh.generate_from_ids([long, short], max_new_tokens=8)
    assert [g[0].response_ids for g in got] == [g[0].response_ids for g in want]
    # the counters credit the long prompt with the 6 tokens it found stored, not with its own prefill
    assert (store.lookups, store.reused_tokens) == (2, 6 + common)


def _prefix_kv(policy, ids):
    """Per-layer keys and values ``[kv_heads, len(ids), head_dim]`` of ``ids`` computed by ``policy``'s model."""
    from transformers import DynamicCache

    cache = DynamicCache(config=policy.model.config)
    with torch.no_grad():
        policy.model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
    return [layer.keys[0] for layer in cache.layers], [layer.values[0] for layer in cache.layers]

@pytest.mark.parametrize("n, temperature", [(1, 0.0), (3, 1.0)])
def test_multi_step_episodes_reuse_the_conversation_and_play_the_same_tokens(tiny_model_dir, n, temperature):
    """TextWorldExpress episodes (real games), greedy and a seeded group of 3 samples: every prompt after an
    episode's first turn continues from the cached conversation, and the turns' token streams equal those played
    without reuse (float32); the store is emptied when the rollout ends."""
    tasks = get_benchmark("twx", DATA_DIR).load(split="train")[:2]
    streams = {}
    policies = {}
    for size in (131072, 0):
        policy = policies[size] = TransformersPolicy(str(tiny_model_dir), dtype="float32", prefix_cache_tokens=size,
                                                     continuous_batching=False)  # the lock-step loop's store
        torch.manual_seed(5)
        trajs = play_episodes(tasks, policy, RolloutSpec(n=n, temperature=temperature, max_new_tokens=6)).trajectories
        streams[size] = [[(t.prompt_ids, t.response_ids) for t in traj.turns] for traj in trajs]
    assert streams[131072] == streams[0]
    assert max(len(s) for s in streams[0]) >= 3
    if n > 1:
        assert len({tuple(s[0][1]) for s in streams[0][:n]}) > 1  # a group's samples differ: they were sampled
    cache = policies[131072].prefix_cache
    assert cache.lookups > 2 * len(tasks) and cache.hits >= cache.lookups - len(tasks)
    assert cache.reused_tokens > cache.prompt_tokens / 2
    assert not cache.entries and cache.tokens == 0


def test_decode_attention_is_sdpa_attention_on_grouped_heads_and_padding():
    """``attention.decode_attention`` (single-token queries on the CPU) decodes the tokens SDPA decodes: greedy,
    float32, a grouped-query model (4 query heads over 2 KV heads), a left-padded batch."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from genenv.runtime._builtin.attention import NAME, use_decode_attention

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(3, 300, (3, 40))
    mask = torch.ones_like(ids)
    mask[0, :15] = 0
    mask[2, :3] = 0
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=12, min_new_tokens=12, do_sample=False,
                  pad_token_id=0)
    with torch.no_grad():
        want, prefill = model.generate(**kwargs), model(input_ids=ids, attention_mask=mask).logits
        use_decode_attention(model)
        assert model.config._attn_implementation == NAME
        got = model.generate(**kwargs)
        assert torch.equal(model(input_ids=ids, attention_mask=mask).logits, prefill)  # multi-token queries: SDPA
    assert torch.equal(got, want)


@pytest.mark.parametrize("sdpa", [True, False])
def test_bfloat16_decode_attention_reads_a_cache_view_as_float32_attention_does(sdpa, monkeypatch):
    """In bfloat16 ``decode_attention`` runs SDPA with grouped-query heads (a CPU with AMX) or the matmuls (other
    CPUs; ``sdpa_decodes_bfloat16`` chooses) on the cache view (the first ``T`` columns of a larger buffer whose
    later columns hold large stale states): either way the float32 matmul path's result, to bfloat16 precision,
    padding masked."""
    from genenv.runtime._builtin import attention
    from genenv.runtime._builtin.attention import decode_attention

    monkeypatch.setattr(attention, "sdpa_decodes_bfloat16", lambda: sdpa)

    torch.manual_seed(0)
    rows, kv, heads, dim, filled = 3, 2, 6, 16, 30
    keys, values = torch.randn(rows, kv, 48, dim), torch.randn(rows, kv, 48, dim)
    keys[:, :, filled:], values[:, :, filled:] = 40.0, 1e4
    query = torch.randn(rows, heads, 1, dim)
    mask = torch.ones(rows, 1, 1, filled, dtype=torch.bool)
    mask[0, :, :, :7] = False  # a left-padded row
    module = torch.nn.Module().eval()
    exact, _ = decode_attention(module, query, keys[:, :, :filled], values[:, :, :filled], mask)
    fused = torch.nn.functional.scaled_dot_product_attention
    with mock.patch.object(torch.nn.functional, "scaled_dot_product_attention", side_effect=fused) as calls:
        low, _ = decode_attention(module, query.bfloat16(), keys.bfloat16()[:, :, :filled],
                                  values.bfloat16()[:, :, :filled], mask)
    assert calls.call_count == int(sdpa)  # the kernel chosen for this CPU
    assert low.dtype == torch.bfloat16 and low.shape == exact.shape == (rows, 1, heads, dim)
    assert torch.allclose(low.float(), exact, atol=3e-2, rtol=3e-2) and exact.abs().max() < 10


def test_bfloat16_scores_read_a_growing_caches_whole_buffer_bit_for_bit():
    """Below float32 ``grouped_attention`` multiplies the query by the whole buffer a decoding cache's key view
    starts (``column_buffer``) and keeps the view's columns: the same bits as over a contiguous copy of the view,
    the stale columns past the fill (here NaN) never reach the result. A key that is no such slice, and any
    float32 key, is multiplied as given."""
    from genenv.runtime._builtin.attention import column_buffer, grouped_attention
    from genenv.runtime._builtin.kv_cache import GrowingLayer

    torch.manual_seed(0)
    rows, kv, groups, dim = 4, 3, 3, 64
    layer = GrowingLayer()
    for step in range(70):  # prompt 40 tokens, then one token a step: 80 positions, then 162
        width = 40 if step == 0 else 1
        layer.update(torch.randn(rows, kv, width, dim, dtype=torch.bfloat16),
                     torch.randn(rows, kv, width, dim, dtype=torch.bfloat16))
    keys, values = layer.keys, layer.values
    buffer = column_buffer(keys)
    assert keys.shape[2] == 109 and buffer is layer._kbuf and buffer.shape[2] == 162
    buffer[:, :, 109:] = float("nan")  # never written: whatever new memory held
    query = torch.randn(rows, kv, groups, dim, dtype=torch.bfloat16)
    blocked = torch.zeros(rows, 1, 1, 109, dtype=torch.bool)
    blocked[0, ..., :5] = True  # a left-padded row
    widths = []
    matmul = torch.matmul
    with mock.patch.object(torch, "matmul", side_effect=lambda a, b: widths.append(b.shape[-1]) or matmul(a, b)):
        got = grouped_attention(query, keys, values, 0.125, blocked)
    assert widths == [162, 64]  # the scores against the whole buffer, then the probabilities times the values
    want = grouped_attention(query, keys.contiguous(), values.contiguous(), 0.125, blocked)
    assert torch.equal(got, want) and not got.isnan().any()
    assert column_buffer(keys.contiguous()) is None and column_buffer(buffer[:, :, 1:110]) is None
    assert column_buffer(buffer[:2, :, :109]) is None  # fewer rows: not the first columns of the whole buffer
    widths.clear()
    with mock.patch.object(torch, "matmul", side_effect=lambda a, b: widths.append(b.shape[-1]) or matmul(a, b)):
        grouped_attention(query.float(), keys.float(), values.float(), 0.125, blocked)
    assert widths == [109, 64]


def test_sliding_window_models_are_not_stored():
    """A sliding-window layer keeps only its last window, so its positions cannot be matched to token ids: a
    generate call on such a model leaves the store empty (every prompt is then prefilled in full)."""
    from transformers import DynamicCache, MistralConfig, MistralForCausalLM

    from genenv.runtime._builtin.prefix_cache import sliding

    cfg = MistralConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, sliding_window=4)
    model = MistralForCausalLM(cfg).eval()
    store = PrefixCache()
    cache, ids, mask, _ = store.batch([[1, 2, 3, 4, 5, 6, 7, 8]], cfg, 0, "cpu")
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, past_key_values=cache, max_new_tokens=3,
                             do_sample=False, pad_token_id=0)
    assert sliding(cache) and not sliding(DynamicCache())
    store.keep_rows(cache, mask, [out[0].tolist()])
    assert not store.entries and store.prefill_alone(model, [list(range(1, 20))], min_tokens=4) == 0
    assert not store.entries
