"""Batched decoding that retires finished rows: the local engine's sampler, for free text and under a grammar.

``transformers``' ``generate`` keeps computing every row of its batch until the last row stops (a finished row
gets padding tokens, ``transformers/generation/utils.py: _sample``), so a batch whose responses differ in length
spends most of its decoding steps on rows that are done: measured on a default Bamboogle rollout (24 rows, up to
96 tokens, 29 on average), 54 % of the decoded rows were finished ones (``lab/benches/bench_rollout.py``'s ``useful
decode rows``). `decode` samples exactly as ``generate`` does (the last position's logits in float32, divided
by the temperature, softmax, ``torch.multinomial``; ``argmax`` at temperature 0) but drops finished rows from the
batch and from its KV cache, so each step computes only unfinished sequences. A retired row's KV states are handed
to ``on_retire`` first (the prefix cache keeps them for the episode's next turn,
`keep_row`).

Dropping rows copies the remaining rows' cache (``DynamicCache.batch_select_indices``), so rows are dropped in
bunches: once a quarter of the batch (at least one row) has finished, or when every row has.

Seeded samples differ from ``generate``'s once a row retires (the batch of the ``multinomial`` draw changes), while
each sample still comes from the same distribution; greedy tokens are ``generate``'s (tested in float32).
Under a grammar (structured decoding) each row has its own matcher, named by the row's input index so that it
survives the batch shrinking (`RowMatchers`): the logits a row's grammar forbids are
set to ``-inf`` before sampling, as xgrammar's logits processor does inside ``generate``.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

__all__ = ["decode", "sample_tokens"]

RetireHook = Callable[[int, int, list[torch.Tensor], list[torch.Tensor], torch.Tensor, list[int]], None]
"""``on_retire(row, fed, keys, values, mask, response)``: ``row`` the row's index in the input batch, ``fed`` the
response tokens whose KV states exist (the last sampled token is never fed), ``keys`` / ``values`` per layer
``[kv_heads, T, head_dim]`` (the row's cache: ``W`` prompt columns, then ``fed`` response columns, then columns of
rows that decoded longer), ``mask`` the row's ``[W]`` prompt attention mask, ``response`` its tokens."""


def sample_tokens(logits: torch.Tensor, temperature: float, inverse_cdf: bool = False) -> torch.Tensor:
    """One token per row of ``logits`` (``[B, V]``, float32): ``argmax`` when ``temperature == 0``, else a draw
    from ``softmax(logits / temperature)`` (``generate``'s sampling without top-k / top-p). Returns ``[B]`` (long).

    The draw is ``torch.multinomial``'s (as ``generate``), which spends one exponential random number per
    vocabulary entry (SmolLM2: 49,152 a row, a cost paid on every decoding step; figures:
    ``lab/notes/cpu-profiles.md``, "runtime/decoding.py"), or with ``inverse_cdf`` one uniform
    number per row looked up in the cumulative probabilities (``torch.searchsorted``, right side, so a token of
    probability 0 is never drawn): the same distribution up to float32 rounding of the cumulative sum, other
    random numbers."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    if not inverse_cdf:
        return torch.multinomial(probs, num_samples=1).squeeze(1)
    cdf = probs.cumsum(dim=-1)
    u = torch.rand((probs.shape[0], 1), device=probs.device) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).squeeze(1).clamp_(max=probs.shape[1] - 1)


def decode(model, input_ids: torch.Tensor, attention: torch.Tensor, cache, max_new_tokens: int,
           temperature: float, stop_ids: Sequence[int], caps: Sequence[int | None] | None = None,
           on_retire: RetireHook | None = None, grammar=None) -> list[list[int]]:
    """Continue every row of a left-padded batch until it samples a stop token or reaches its cap.

    Args:
        input_ids / attention: ``[B, W]`` (long), left-padded; the first ``C = cache.get_seq_length()`` columns
            are already in ``cache`` (their ids are not fed again).
        cache: a ``DynamicCache`` holding ``[B, kv_heads, C, head_dim]`` per layer (``C`` may be 0); it is consumed
            (rows are dropped from it as they finish).
        max_new_tokens: tokens per row at most; ``caps``: a lower cap per row (``None``: none).
        temperature: 0 for greedy.
        stop_ids: tokens that end a row (kept as its last token).
        on_retire: called once per row as it finishes, before its states leave the cache (`RetireHook`).
        grammar: a `RowMatchers` with one matcher per input row (``None``: free).
    Returns:
        ``B`` lists of response token ids (each ending with its stop token when it stopped).
    Raises:
        ValueError: ``attention`` and ``input_ids`` differ in shape, or ``C >= W`` (nothing to feed).
    """
    if attention.shape != input_ids.shape:
        raise ValueError(f"attention mask {tuple(attention.shape)} for input ids {tuple(input_ids.shape)}")
    b, width = input_ids.shape
    cached = cache.get_seq_length()
    if cached >= width:
        raise ValueError(f"the cache holds {cached} of the {width} columns: nothing left to feed")
    stops = set(int(t) for t in stop_ids)
    limits = [min(max_new_tokens, c) if c is not None else max_new_tokens for c in (caps or [None] * b)]
    prompt_mask = attention.cpu()
    responses: list[list[int]] = [[] for _ in range(b)]
    active = list(range(b))  # input rows still decoding, in cache order
    done: list[int] = []  # finished rows still in the cache
    mask = attention
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids[:, cached:], attention_mask=mask, position_ids=positions[:, cached:],
                past_key_values=cache, use_cache=True, logits_to_keep=1)
    next_pos = positions[:, -1:] + 1
    fed = 0
    while True:
        logits = out.logits[:, -1, :].float()
        if grammar is not None:
            grammar.mask(logits, active)
        tokens = sample_tokens(logits, temperature)
        for slot, row in enumerate(active):
            if row in done:
                continue
            tok = int(tokens[slot])
            responses[row].append(tok)
            if grammar is not None:
                grammar.accept(row, tok)
            if tok in stops or len(responses[row]) >= limits[row]:
                done.append(row)
        live = [slot for slot, row in enumerate(active) if row not in done]
        if done and (not live or len(done) >= max(1, len(active) // 4)):
            if on_retire is not None:
                for slot, row in enumerate(active):
                    if row in done:
                        layers = cache.layers
                        on_retire(row, min(fed, len(responses[row]) - 1), [layer.keys[slot] for layer in layers],
                                  [layer.values[slot] for layer in layers], prompt_mask[row], responses[row])
            if not live:
                return responses
            keep = torch.tensor(live, dtype=torch.long, device=tokens.device)
            cache.batch_select_indices(keep)
            mask, next_pos, tokens = mask[keep], next_pos[keep], tokens[keep]
            active = [active[slot] for slot in live]
            done = []
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        out = model(input_ids=tokens[:, None], attention_mask=mask, position_ids=next_pos, past_key_values=cache,
                    use_cache=True)
        next_pos = next_pos + 1
        fed += 1
