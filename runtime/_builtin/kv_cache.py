"""A KV cache for decoding on the CPU that appends in place: transformers' ``DynamicCache`` with layers whose
key/value tensors live in buffers of doubling capacity.

transformers' ``DynamicLayer.update`` appends each decoding step's key/value states with ``torch.cat``
(``transformers/cache_utils.py``), so every step copies the layer's whole cache: at 16 rows and 800 cached tokens
that is 16 x 800 x 46 KiB (SmolLM2-135M, float32: 30 layers x 2 x 3 KV heads x 64) = 590 MB written per step,
as much memory traffic as reading the weights twice. `GrowingLayer` writes the new states into spare
capacity instead (amortised O(1) copies per token) and hands attention views of the filled part, the same values
in the same layout. transformers' ``StaticCache`` also writes in place, but holds one fixed length for every row
and attends over all of it; the growing layer keeps ``DynamicCache``'s semantics (crop, batch selection and
repetition, any length), which the prefix cache (`prefix_cache`) and the episode loop rely
on.

Each decoding step is faster with it than with ``DynamicCache``, the more so the more rows and cached tokens
(SmolLM2-135M float32 with `decode_attention`; figures: ``lab/notes/cpu-profiles.md``, "runtime/kv_cache.py";
``lab/benches/bench_rollout.py`` prints the loop's).

Only the sampling paths use it (under ``torch.no_grad``): the update's log-prob passes keep transformers' own
cache, where autograd must see every tensor it built.
"""
from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

__all__ = ["GrowingLayer", "growing_cache"]

MIN_CAPACITY = 64
"""Token positions a layer's first buffer holds at least."""


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``keys`` / ``values`` (``[B, KV, T, D]``) are views of buffers of capacity
    ``>= T`` (doubled when full). Any operation that replaces ``keys`` with a new tensor (``batch_select_indices``,
    ``batch_repeat_interleave``, an assignment) is noticed at the next `update`, which copies the states into
    a fresh buffer; ``crop`` keeps the view and the next update overwrites the cropped positions."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append ``key_states`` / ``value_states`` (``[B, KV, S, D]``) and return all states (``[B, KV, T + S,
        D]``, views of the buffers)."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n, add = self.get_seq_length(), key_states.shape[-2]
        kbuf = getattr(self, "_kbuf", None)
        if (kbuf is None or self.keys.data_ptr() != kbuf.data_ptr() or kbuf.shape[0] != key_states.shape[0]
                or n + add > kbuf.shape[-2]):
            b, heads, _, dim = key_states.shape
            capacity = max(2 * (n + add), MIN_CAPACITY)
            kbuf = key_states.new_empty((b, heads, capacity, dim))
            vbuf = value_states.new_empty((b, value_states.shape[1], capacity, value_states.shape[-1]))
            if n:
                kbuf[..., :n, :] = self.keys
                vbuf[..., :n, :] = self.values
            self._kbuf, self._vbuf = kbuf, vbuf
        self._kbuf[..., n:n + add, :] = key_states
        self._vbuf[..., n:n + add, :] = value_states
        self.keys, self.values = self._kbuf[..., :n + add, :], self._vbuf[..., :n + add, :]
        return self.keys, self.values


def growing_cache(config, layers: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> DynamicCache:
    """A ``DynamicCache`` for ``config``'s model whose full-attention layers are `GrowingLayer`\\ s
    (sliding-window layers keep transformers' own class), optionally filled with ``layers`` (per layer ``(keys,
    values)``, ``[B, KV, T, D]``)."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    for layer, (keys, values) in zip(cache.layers, layers or []):
        layer.update(keys, values)
    return cache
