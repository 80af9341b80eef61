"""The in-place KV cache of the sampling paths (``runtime/_builtin/kv_cache.py``): the same attention inputs as
transformers' ``DynamicCache`` through appends, crops, batch selection and repetition, and the same greedy tokens in
generation."""
from __future__ import annotations

import torch
from transformers import DynamicCache

from genenv.runtime._builtin.kv_cache import GrowingLayer, growing_cache


def _states(b: int, s: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, 2, s, 4, generator=g), torch.randn(b, 2, s, 4, generator=g)


def test_growing_layers_return_what_dynamic_layers_return_through_every_cache_operation(tiny_model_dir):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tiny_model_dir)
    grow, plain = growing_cache(config), DynamicCache(config=config)
    assert all(isinstance(layer, GrowingLayer) for layer in grow.layers)

    def step(s: int, seed: int) -> None:
        k, v = _states(grow.layers[0].keys.shape[0] if grow.get_seq_length() else 3, s, seed)
        for cache in (grow, plain):
            out = cache.update(k, v, 0)
        assert torch.equal(out[0], grow.layers[0].keys) and torch.equal(plain.layers[0].keys, grow.layers[0].keys)
        assert torch.equal(plain.layers[0].values, grow.layers[0].values)

    step(5, 0)  # prefill
    for i in range(70):  # decoding past the first buffer's capacity (64 positions)
        step(1, i + 1)
    assert grow.get_seq_length() == plain.get_seq_length() == 75
    buffer = grow.layers[0]._kbuf
    for cache in (grow, plain):
        cache.crop(60)
    step(2, 100)  # the cropped positions are overwritten in the same buffer
    assert grow.layers[0]._kbuf is buffer and grow.get_seq_length() == 62
    for cache in (grow, plain):
        cache.batch_select_indices(torch.tensor([2, 0]))
    step(1, 101)  # a selected batch gets a fresh buffer holding the selected rows
    for cache in (grow, plain):
        cache.batch_repeat_interleave(3)
    step(3, 102)
    assert grow.layers[0].keys.shape == (6, 2, 66, 4)


def test_filled_growing_cache_holds_the_given_states(tiny_model_dir):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(tiny_model_dir)
    states = [_states(2, 7, i) for i in range(config.num_hidden_layers)]
    cache = growing_cache(config, states)
    assert cache.get_seq_length() == 7
    for layer, (k, v) in zip(cache.layers, states):
        assert torch.equal(layer.keys, k) and torch.equal(layer.values, v)


def test_generation_decodes_the_same_greedy_tokens_as_with_transformers_cache(tiny_model_dir):
    """float32 greedy: a left-padded batch decodes exactly the tokens transformers decodes with its own cache."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from genenv.runtime.policies import left_padded

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    rows = [tok("Name three rivers of Europe and their lengths.")["input_ids"], tok("Hi.")["input_ids"]]
    ids, mask = left_padded(rows, tok.pad_token_id or 0)
    kw = dict(max_new_tokens=80, do_sample=False, pad_token_id=tok.pad_token_id or 0, eos_token_id=None)
    with torch.no_grad():
        theirs = model.generate(input_ids=ids, attention_mask=mask, **kw)
        ours = model.generate(input_ids=ids, attention_mask=mask, past_key_values=growing_cache(model.config), **kw)
    assert ours.shape[1] == ids.shape[1] + 80 and torch.equal(ours, theirs)


def test_decode_retires_finished_rows_and_returns_generates_greedy_tokens(tiny_model_dir):
    """``runtime/decoding.decode`` on a left-padded batch whose rows stop at different steps (a stop token that
    the tiny model samples early in some rows, and per-row caps): the same greedy tokens as ``generate`` cut at the
    first stop token and the cap, every row retired once with the KV states a fresh prefill of its prompt and fed
    response gives."""
    from collections import Counter

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from genenv.runtime._builtin.decoding import decode
    from genenv.runtime.policies import left_padded

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    rows = [tok(text)["input_ids"] for text in ("Name three rivers of Europe.", "Hi.", "Count: one, two, three,",
                                                "The capital of France is")]
    ids, mask = left_padded(rows, 0)
    with torch.no_grad():
        full = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=30, do_sample=False,
                              pad_token_id=0, eos_token_id=None)[:, ids.shape[1]:].tolist()
    # stop tokens: every token a row turns to after its first step (the tiny model repeats a token, then may
    # switch), so a row that switches ends there; caps end two more rows early
    firsts = {seq[0] for seq in full}
    stops = {seq[j] for seq in full for j in range(1, 30) if seq[j] != seq[j - 1]} - firsts or {-1}
    caps = [None, 5, None, 12]
    expected = []
    for r, seq in enumerate(full):
        cut = seq[:caps[r] or 30]
        end = next((j for j, t in enumerate(cut) if t in stops), None)
        expected.append(cut if end is None else cut[:end + 1])
    assert len({len(e) for e in expected}) > 1  # the rows do finish at different steps
    retired = Counter()

    def check(row, fed, keys, values, row_mask, response):
        retired[row] += 1
        seq = rows[row] + response[:fed]
        with torch.no_grad():
            fresh = model(input_ids=torch.tensor([seq]), use_cache=True).past_key_values
        pad = int((row_mask == 0).sum())
        got = torch.cat([keys[0][:, pad:row_mask.shape[0]], keys[0][:, row_mask.shape[0]:row_mask.shape[0] + fed]], 1)
        assert torch.allclose(got, fresh.layers[0].keys[0], atol=1e-5)

    with torch.no_grad():
        out = decode(model, ids, mask, growing_cache(model.config), 30, 0.0, sorted(stops), caps, on_retire=check)
    assert out == expected
    assert retired == Counter(range(len(rows)))
