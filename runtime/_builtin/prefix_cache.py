"""KV-cache reuse across turns for the local engine: the KV states of recent sequences (a prompt and the response
generated for it), and the batched cache a new ``generate`` call starts from.

A multi-step episode's next prompt is the previous prompt, the response and the environment's reply: it extends a
sequence the engine has just computed. `PrefixCache` keeps each generated row's KV states (per layer
``[kv_heads, length, head_dim]``) keyed by its token ids; the next call looks up, for every prompt, the stored
sequence with the longest common prefix (so a chat template that re-tokenises the response differently, or a
prompt window that dropped old turns, still reuses what matches) and only the rest of the prompt is prefilled. The
same lookup serves the lock-step runner and the veRL agent loop (both go through
`generate_from_ids`), and prompts of one benchmark that
share a system prompt share its prefill.

Batching rows whose reused prefixes differ in length: each row's KV states are left-padded to the longest
prefix ``C``, then the rest of the prompts follow, left-padded to the longest rest ``S``. The attention mask is 0 on
both paddings and transformers derives position ids from the mask (``cumsum - 1``,
``transformers/generation/utils.py: _prepare_position_ids_for_generation``), so every real token keeps the
position it had when its KV states were computed. Tested: greedy tokens in float32 are identical with and without
reuse.

Why our own store: transformers offers the cache classes and continuation from ``past_key_values`` (used here) but
no cross-call prefix matching; vLLM's automatic prefix caching does this on GPU (``engine=verl_ray``), and
llama.cpp's server keeps one slot's prefix per request (``genenv.eval.model_server``), neither usable inside the
trainer's local engine, whose sampled token ids and weights must be the trainer's own.

Invalidation: entries are valid for one set of weights; the store is emptied when the model's parameters change
(any in-place update bumps a tensor's version counter: an optimiser step, the sampling copy's weight sync) and by
`clear` (the episode loop calls it when a rollout ends, releasing the memory).

Models with sliding-window attention layers are not stored (`sliding`).

Memory: ``2 x layers x kv_heads x head_dim`` values per token (SmolLM2-135M in bf16: 23 KiB per token, so the
default ``max_tokens`` of 131072 holds up to 2.9 GiB); least recently used entries are dropped beyond it.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from genenv.runtime._builtin.kv_cache import growing_cache
from genenv.runtime.models import model_device, weights_version

__all__ = ["PrefixCache", "common_prefix", "sliding"]


def common_prefix(a: Sequence[int] | np.ndarray, b: Sequence[int] | np.ndarray) -> int:
    """The number of leading tokens ``a`` and ``b`` (token ids: lists or integer arrays) share."""
    m = min(len(a), len(b))
    diff = np.flatnonzero(np.asarray(a[:m]) != np.asarray(b[:m]))
    return int(diff[0]) if diff.size else m


@dataclass
class Entry:
    """One stored row: ``ids`` (``[L]`` token ids) and per layer ``keys`` / ``values`` (``[kv_heads, L, head_dim]``)."""

    ids: np.ndarray
    keys: list[torch.Tensor]
    values: list[torch.Tensor]


def sliding(cache) -> bool:
    """Whether ``cache`` has sliding-window layers (they keep only the last window, so positions cannot be matched
    to token ids: such models are not stored, and every prompt is prefilled in full)."""
    return any(getattr(layer, "is_sliding", False) for layer in cache.layers)


class PrefixCache:
    """The store of KV states (see the module docstring).

    Args:
        max_tokens: tokens kept across entries (least recently used dropped first); 0 keeps none.
    Counters: ``lookups`` (prompts looked up), ``hits`` (prompts that reused a prefix), ``reused_tokens`` (prompt
    tokens not prefilled again), ``prompt_tokens`` (prompt tokens looked up).
    """

    def __init__(self, max_tokens: int = 131072):
        self.max_tokens = int(max_tokens)
        self.entries: OrderedDict[int, Entry] = OrderedDict()
        self.tokens = 0
        self.version: tuple[int, int] | None = None
        self._next = 0
        self._prefilled_alone: dict[tuple, int] = {}  # prompt -> tokens it reused before its prefill alone
        self.lookups = self.hits = self.reused_tokens = self.prompt_tokens = 0

    def clear(self) -> None:
        """Drop every entry (the counters stay)."""
        self.entries.clear()
        self._prefilled_alone.clear()
        self.tokens = 0

    def check_weights(self, model) -> None:
        """Empty the store if ``model``'s weights changed since the entries were computed."""
        version = weights_version(model)
        if version != self.version:
            self.clear()
            self.version = version

    def lookup(self, ids: Sequence[int], count: bool = True) -> tuple[Entry | None, int]:
        """The entry sharing the longest prefix with ``ids`` and the number of its tokens to reuse (at most
        ``len(ids) - 1``: the last prompt token is always fed, its logits start the response); ``(None, 0)`` when
        nothing matches. ``count``: add to the counters."""
        query = np.asarray(ids, dtype=np.int64)
        best, best_n = None, 0
        for key, entry in self.entries.items():
            m = min(len(entry.ids), len(query) - 1)
            if m <= best_n:
                continue
            n = common_prefix(entry.ids[:m], query[:m])
            if n > best_n:
                best, best_n = key, n
        if count:
            self.lookups += 1
            self.prompt_tokens += len(query)
        if best is None:
            return None, 0
        self.entries.move_to_end(best)
        if count:  # a prompt just prefilled alone counts what it reused from earlier calls, not its own prefill
            reused = self._prefilled_alone.pop(tuple(ids), best_n)
            self.hits += reused > 0
            self.reused_tokens += reused
        return self.entries[best], best_n

    def prefill_alone(self, model, prompts: Sequence[Sequence[int]], min_tokens: int = 1024) -> int:
        """Prefill, one prompt at a time and without padding, every prompt that would leave more than
        ``min_tokens`` tokens to prefill after its reused prefix, and store its KV states (the batch then reuses
        them). Without padding there is no attention mask, so SDPA runs its fused causal kernel, much faster on long
        prompts than a batch whose mask marks even a few padding tokens of one row (figures:
        ``lab/notes/cpu-profiles.md``, "runtime/prefix_cache.py"). Returns the tokens prefilled."""
        from transformers import DynamicCache

        done, seen, device = 0, set(), model_device(model)
        for ids in prompts:
            key = tuple(ids)
            if key in seen:
                continue
            seen.add(key)
            entry, n = self.lookup(ids, count=False)
            if len(ids) - 1 - n <= min_tokens:
                continue
            cache = DynamicCache([(k[None, :, :n].to(device), v[None, :, :n].to(device))
                                  for k, v in zip(entry.keys, entry.values)] if n else None, config=model.config)
            rest = torch.tensor([list(ids[n:-1])], dtype=torch.long, device=device)
            model(input_ids=rest, position_ids=torch.arange(n, len(ids) - 1, device=device)[None],
                  past_key_values=cache, use_cache=True, logits_to_keep=1)
            if sliding(cache):
                return done
            self.store(list(ids[:-1]), [layer.keys[0] for layer in cache.layers],
                       [layer.values[0] for layer in cache.layers])
            self._prefilled_alone[key] = n
            done += len(ids) - 1 - n
        return done

    def store(self, ids: Sequence[int], keys: list[torch.Tensor], values: list[torch.Tensor]) -> None:
        """Keep the KV states of ``ids`` (per layer ``[kv_heads, len(ids), head_dim]``), dropping entries that are a
        prefix of it (it serves every lookup they would) and the least recently used beyond ``max_tokens``."""
        arr = np.asarray(ids, dtype=np.int64)
        if len(arr) == 0 or len(arr) > self.max_tokens:
            return
        for key in [k for k, e in self.entries.items()
                    if len(e.ids) <= len(arr) and np.array_equal(e.ids, arr[:len(e.ids)])]:
            self.tokens -= len(self.entries.pop(key).ids)
        self.entries[self._next] = Entry(arr, keys, values)
        self._next += 1
        self.tokens += len(arr)
        while self.tokens > self.max_tokens:
            self.tokens -= len(self.entries.popitem(last=False)[1].ids)

    def batch(self, prompts: Sequence[Sequence[int]], config, pad_token_id: int, device
              ) -> tuple[object, torch.Tensor, torch.Tensor, list[int]]:
        """The start of a batched ``generate`` call for ``prompts`` (``B`` token-id lists).

        Returns ``(cache, input_ids, attention_mask, reused)``: a ``DynamicCache`` that appends in place
        (`growing_cache`) holding each row's reused prefix left-padded to ``C``
        positions (empty when nothing is reused), ``input_ids`` / ``attention_mask`` ``[B, C + S]`` (the first ``C`` columns stand for the cached positions; then each prompt's remaining
        tokens, left-padded to ``S``), and ``reused`` (``B`` prefix lengths).
        """
        found = [self.lookup(ids) for ids in prompts]
        reused = [n for _, n in found]
        c = max(reused, default=0)
        s = max(len(ids) - n for ids, n in zip(prompts, reused))
        b = len(prompts)
        input_ids = torch.full((b, c + s), pad_token_id, dtype=torch.long)
        attention = torch.zeros((b, c + s), dtype=torch.long)
        for row, (ids, n) in enumerate(zip(prompts, reused)):
            rest = list(ids[n:])
            input_ids[row, c + s - len(rest):] = torch.tensor(rest, dtype=torch.long)
            attention[row, c + s - len(rest):] = 1
            attention[row, c - n:c] = 1
        if c == 0:
            return growing_cache(config), input_ids.to(device), attention.to(device), reused
        sample = next(e for e, n in found if n)
        layers = []
        for layer in range(len(sample.keys)):
            heads, _, dim = sample.keys[layer].shape
            kv = []
            for part in ("keys", "values"):
                out = torch.zeros((b, heads, c, dim), dtype=sample.keys[layer].dtype, device=device)
                for row, (entry, n) in enumerate(found):
                    if n:
                        out[row, :, c - n:] = getattr(entry, part)[layer][:, :n]
                kv.append(out)
            layers.append(tuple(kv))
        return growing_cache(config, layers), input_ids.to(device), attention.to(device), reused

    def keep_rows(self, cache, attention: torch.Tensor, sequences: Sequence[Sequence[int]]) -> None:
        """Store each row of a finished ``generate`` call.

        Args:
            cache: the call's ``DynamicCache`` after generation (per layer ``[R, kv_heads, T, head_dim]``).
            attention: the call's input mask ``[R, W]`` (``W`` ≤ ``T``; positions past ``W`` are generated tokens).
            sequences: per row, the prompt's token ids followed by the response's kept tokens; only the first
                ``prompt + T - W`` of them have KV states (the last sampled token is never fed), the rest is cut.
        """
        if sliding(cache):
            return
        fed = cache.get_seq_length() - attention.shape[1]
        real = attention.bool().cpu()
        for row, seq in enumerate(sequences):
            self.keep_row(seq, fed, [layer.keys[row] for layer in cache.layers],
                          [layer.values[row] for layer in cache.layers], real[row])

    def keep_row(self, sequence: Sequence[int], fed: int, keys: list[torch.Tensor], values: list[torch.Tensor],
                 mask: torch.Tensor) -> None:
        """Store one decoded row: ``sequence`` (its prompt's token ids, then its response's), ``fed`` the response
        tokens whose KV states exist, ``keys`` / ``values`` the row's states per layer (``[kv_heads, T,
        head_dim]``: the ``W`` columns of its left-padded prompt, then the response columns), ``mask`` its ``[W]``
        prompt attention mask (0 on padding). Only the first ``prompt + fed`` tokens are kept."""
        width = mask.shape[0]
        prompt_positions = torch.nonzero(mask).flatten()
        n_prompt = len(prompt_positions)
        n_resp = max(0, min(len(sequence) - n_prompt, fed, keys[0].shape[1] - width))
        index = torch.cat([prompt_positions, torch.arange(width, width + n_resp)]).to(keys[0].device)
        self.store(sequence[:n_prompt + n_resp], [k.index_select(1, index) for k in keys],
                   [v.index_select(1, index) for v in values])
