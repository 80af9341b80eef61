"""Continuous batching across episodes and turns for the local engine: every unfinished episode decodes in one
batch, and each row keeps its KV states from turn to turn.

The lock-step loop (`play_episodes` with a policy that has no continuous batch)
runs a turn as one call per batch: every row waits for the batch's longest response before the envs step, the
next call prefills each row's observation in a left-padded batch, and the reused KV states of earlier turns are
copied out of the batch into the prefix cache and back (`prefix_cache`). Here a row whose
turn ends leaves the batch only for its env step: the caller steps the env and hands back the next prompt
(`ContinuousBatch.add`); the prompt's new tokens (past the longest prefix it shares with the row's cached
tokens) go into the same row, and the batch decodes on. A finished episode frees its row
(`release`) for a waiting episode; rows nobody refills are dropped from the buffers once a
quarter of the batch is free.

Each `step` is one packed forward pass (`Packed`), as vLLM schedules a step: the
decoding rows' last sampled tokens and the pending prompt tokens of rows starting a turn, concatenated into one
sequence with no padding (a long prompt is fed in chunks of at most ``step_tokens``). The linear layers read the
weights once for all of them; attention reads each token's own row (`Packed.attend`, reached through the
CPU decoding attention, `decode_attention`, which hands it the pass's layout).
The KV layout (`RowCache`): per layer one buffer ``[R, kv_heads, capacity, head_dim]``, row ``r`` holding
its sequence's states in columns ``[0, fill[r])``; a token's position id is its column, as when its sequence is
fed in one piece. The buffers hold the longest row's columns plus one or two steps of `COLUMN_STEP`, and are
cut when the rows that filled them end. The ``n`` episodes of one task that start from the same prompt share one
prefill: the states are copied to the sibling rows and each samples its own tokens from the same logits.

Sampling is `sample_tokens` (as ``generate``: float32 logits / temperature,
softmax; ``argmax`` at 0), drawn by the inverse cumulative distribution (one uniform number a row instead of
``multinomial``'s one exponential number per vocabulary entry, a visible share of a TWX rollout's time; figures:
``lab/notes/cpu-profiles.md``, "runtime/continuous.py"); a turn ends at a stop
token (kept) or at its cap. Greedy episodes are the lock-step loop's (tested on real TWX and Bamboogle tasks in
float32); seeded samples differ, since other random numbers are drawn, while each token comes from the same
distribution.

Why our own: transformers' continuous batching (``generate_batch``) serves independent requests and keeps no
conversation's states between them; vLLM's scheduler does (prefix caching) but is the GPU engine
(``engine=verl_ray``), not the trainer's in-process model whose weights change every iteration.

Limits: free text only (prompts under a JSON Schema use the lock-step path); models without sliding-window layers
on the CPU decoding attention (`continuous` returns ``None``
otherwise, and the loop plays in lock step).
"""
from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Hashable, Sequence

import torch
from transformers import DynamicCache

from genenv.runtime._builtin.attention import grouped_attention, reads_whole_buffer
from genenv.runtime._builtin.decoding import sample_tokens
from genenv.runtime._builtin.prefix_cache import common_prefix

__all__ = ["COLUMN_STEP", "COUNTERS", "ContinuousBatch", "Packed", "TurnOutput", "buffer_columns"]

COUNTERS = ("passes", "decode_rows", "prefill_passes", "prefill_tokens", "prompt_tokens", "reused_tokens",
            "decode_seconds", "prefill_seconds")
"""What a batch counts: forward passes, the decoding tokens they fed (one per decoding row), the passes that fed
prompt tokens and those tokens (there is no padding), the tokens of every turn's prompt and those whose states were
already in the row or came from a sibling's prefill (``reused_tokens``), and the seconds of the model's passes
without prompt tokens (``decode_seconds``) and with them (``prefill_seconds``; decoding rows ride along in them).
Sampling and bookkeeping are outside both."""

PACKED_MASK = torch.ones((1, 1, 1, 1), dtype=torch.bool)
"""The ``attention_mask`` of a packed pass: a 4-D mask is used as given by transformers (no mask is built), and
`Packed.attend` masks by the layout instead."""

COLUMN_STEP = 64
"""The buffers' columns are a multiple of this: a pass that needs ``w`` columns grows them to ``(w // 64 + 2) x 64``
(64-128 columns of room), and a step whose rows fill fewer than ``capacity - 3 x 64`` crops them to the same
formula of the longest row's fill. A decoding pass in bfloat16 reads every column of every row
(`Packed.attend`), so the room is read on every pass: sized at 1.5 times the longest row, a powered
TextWorldExpress rollout's passes read twice the columns its longest rows held (4.08 M against 2.06 M
row-columns over 220 passes), and each column read costs time on every layer, while each growth or crop copies the
buffers once (about one pass's reading; figures: ``lab/notes/cpu-profiles.md``, "runtime/continuous.py")."""


def buffer_columns(width: int) -> int:
    """The columns a buffer gets for rows needing ``width`` columns (`COLUMN_STEP`)."""
    return (int(width) // COLUMN_STEP + 2) * COLUMN_STEP


class RowCache(DynamicCache):
    """The KV states of the batch's rows, each at its own length (see the module docstring).

    Per layer ``keys[l]`` / ``values[l]``: ``[R, kv_heads, capacity, head_dim]``; ``fill``: ``[R]`` (long) columns
    filled per row. Before each forward pass the batch sets `packed` (the pass's `Packed` layout);
    `update` writes the pass's new states (``[1, kv_heads, T, head_dim]``, the packed tokens) at their rows
    and columns and returns the whole buffers, which `Packed.attend` reads row by row. ``fill`` is advanced
    by the batch, not here.
    """

    def __init__(self, config, rows: int):
        super().__init__(config=config)
        self.rows = int(rows)
        self.fill = torch.zeros(self.rows, dtype=torch.long)
        self.keys: list[torch.Tensor | None] = [None] * len(self.layers)
        self.values: list[torch.Tensor | None] = [None] * len(self.layers)
        self.packed: Packed | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write the packed pass's ``key_states`` / ``value_states`` (``[1, kv_heads, T, head_dim]``) at their
        rows and columns; returns the layer's buffers ``[R, kv_heads, capacity, head_dim]``."""
        packed = self.packed
        _, heads, _, dim = key_states.shape
        kbuf, vbuf = self.keys[layer_idx], self.values[layer_idx]
        if kbuf is None or packed.width > kbuf.shape[2] or kbuf.shape[0] != self.rows:
            capacity = buffer_columns(packed.width)
            new_k = key_states.new_zeros((self.rows, heads, capacity, dim))
            new_v = value_states.new_zeros((self.rows, value_states.shape[1], capacity, value_states.shape[-1]))
            if kbuf is not None:
                n, c = min(self.rows, kbuf.shape[0]), min(capacity, kbuf.shape[2])
                new_k[:n, :, :c] = kbuf[:n, :, :c]
                new_v[:n, :, :c] = vbuf[:n, :, :c]
            kbuf, vbuf = self.keys[layer_idx], self.values[layer_idx] = new_k, new_v
        kbuf[packed.token_rows, :, packed.token_cols] = key_states[0].transpose(0, 1)
        vbuf[packed.token_rows, :, packed.token_cols] = value_states[0].transpose(0, 1)
        return kbuf, vbuf

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """The longest row's filled columns."""
        return int(self.fill.max()) if self.rows else 0

    def copy_row(self, src: int, dst: int, columns: int) -> None:
        """Copy row ``src``'s first ``columns`` states into row ``dst`` (a sibling sharing its prompt)."""
        for kbuf, vbuf in zip(self.keys, self.values):
            if kbuf is not None:
                kbuf[dst, :, :columns] = kbuf[src, :, :columns]
                vbuf[dst, :, :columns] = vbuf[src, :, :columns]

    def select_rows(self, keep: torch.Tensor) -> None:
        """Keep only the rows ``keep`` (``[R']`` long), in that order (copies the buffers)."""
        self.keys = [k[keep] if k is not None else None for k in self.keys]
        self.values = [v[keep] if v is not None else None for v in self.values]
        self.fill = self.fill[keep]
        self.rows = len(keep)

    def crop(self) -> None:
        """Cut the buffers to `buffer_columns` of the longest row's fill once they hold more than
        ``COLUMN_STEP`` columns beyond it (the rows that filled them have ended or restarted); copies the
        buffers."""
        kbuf = self.keys[0]
        if kbuf is None:
            return
        columns = buffer_columns(self.get_seq_length())
        if kbuf.shape[2] - columns <= COLUMN_STEP:
            return
        self.keys = [k[:, :, :columns].contiguous() if k is not None else None for k in self.keys]
        self.values = [v[:, :, :columns].contiguous() if v is not None else None for v in self.values]

    def add_rows(self, count: int) -> None:
        """Append ``count`` empty rows (the buffers grow at the next `update`)."""
        self.fill = torch.cat([self.fill, self.fill.new_zeros(count)])
        self.rows += count


@dataclass
class Packed:
    """The layout of one packed forward pass: ``T`` tokens of several rows in one sequence.

    ``segments``: per fed row ``(row, start, length, fill)``: its tokens are ``start .. start + length - 1`` of
    the pass and go to columns ``fill ..`` of its cache row. ``token_rows`` / ``token_cols``: ``[T]`` (long) the
    row and column of every token; ``width``: the columns the pass fills at most (``max(fill + length)``).
    """

    segments: list[tuple[int, int, int, int]]
    rows: int
    token_rows: torch.Tensor = field(init=False)
    token_cols: torch.Tensor = field(init=False)
    width: int = field(init=False)

    def __post_init__(self):
        self.token_rows = torch.cat([torch.full((n,), r, dtype=torch.long) for r, _, n, _ in self.segments])
        self.token_cols = torch.cat([torch.arange(f, f + n) for _, _, n, f in self.segments])
        self.width = max(f + n for _, _, n, f in self.segments)
        ones = [(r, t, f) for r, t, n, f in self.segments if n == 1]
        self._causal = [torch.arange(f + n)[None, :] <= (f + torch.arange(n))[:, None] if n > 1 else None
                        for _, _, n, f in self.segments]  # [n, fill + n]: True where a token attends
        self._single = (torch.tensor([r for r, _, _ in ones], dtype=torch.long),
                        torch.tensor([t for _, t, _ in ones], dtype=torch.long),
                        torch.tensor([f + 1 for _, _, f in ones], dtype=torch.long)) if ones else None
        self._longest = max(f + 1 for _, _, f in ones) if ones else 0
        self._masks: dict[int, torch.Tensor] = {}  # width -> [R, 1, 1, W]: True past a row's single token

    def _single_mask(self, width: int) -> torch.Tensor:
        """The single-token rows' mask over ``width`` columns (``[R, 1, 1, W]`` bool, True: masked out; rows
        without such a token see one column), built once a pass and shared by its layers."""
        mask = self._masks.get(width)
        if mask is None:
            rows, _, lengths = self._single
            limit = torch.ones(self.rows, dtype=torch.long)
            limit[rows] = lengths
            mask = self._masks[width] = (torch.arange(width)[None, :] >= limit[:, None])[:, None, None]
        return mask

    def attend(self, query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, scaling: float | None
               ) -> torch.Tensor:
        """Attention of the packed ``query`` (``[1, H, T, D]``) over each token's own row of ``keys`` /
        ``values`` (``[R, KV, capacity, D]``, ``H`` a multiple of ``KV``: head ``h`` reads KV head ``h // (H /
        KV)``): token ``j`` of a segment sees its row's columns ``<= fill + j``. Single-token segments are
        computed together over every row's buffer (`grouped_attention`, as
        `decode_attention` computes single tokens; the rows without such a token
        compute and drop theirs; below float32 over the whole buffer, whose columns past a row's fill are
        masked), longer segments one by one with ``scaled_dot_product_attention`` and a causal mask offset by the
        row's fill.
        Returns ``[1, T, H, D]``."""
        _, h, t, d = query.shape
        kv = keys.shape[1]
        g = h // kv
        scale = d ** -0.5 if scaling is None else scaling
        out = query.new_empty((1, t, h, d))
        if self._single is not None:
            rows, tokens, _ = self._single
            # float32 matmuls read a slice of the columns in place; in lower precision (oneDNN's bf16 kernels) a
            # slice makes both operands be copied first, so the whole buffer is read and the masked columns drop
            # out of the softmax, the faster of the two (figures: lab/notes/cpu-profiles.md, "runtime/continuous.py")
            width = keys.shape[2] if reads_whole_buffer(keys.dtype) else self._longest
            q = query.new_zeros((self.rows, kv, g, d))
            q[rows] = query[0, :, tokens].transpose(0, 1).reshape(len(tokens), kv, g, d)
            ctx = grouped_attention(q, keys[:self.rows, :, :width], values[:self.rows, :, :width], scale,
                                    self._single_mask(width))  # [R, KV, G, D]
            out[0, tokens] = ctx[rows].reshape(len(tokens), h, d)
        for (row, start, n, fill), mask in zip(self.segments, self._causal):
            if mask is None:
                continue
            ctx = torch.nn.functional.scaled_dot_product_attention(
                query[:, :, start:start + n], keys[row:row + 1, :, :fill + n], values[row:row + 1, :, :fill + n],
                attn_mask=mask, scale=scale, enable_gqa=True)  # [1, H, n, D]
            out[0, start:start + n] = ctx[0].transpose(0, 1)
        return out


@dataclass
class Row:
    """One row of the batch: its sequence's ``key``, the token ``ids`` whose states are cached, the ``pending``
    prompt tokens still to prefill, the sampled ``token`` not yet fed (``None`` when the row is not decoding), the
    turn's ``prompt`` and ``response`` with the sampler's log-prob of each response token (``logprobs``), its
    token ``limit``, the key of the row whose prefill of the same first prompt it waits for (``leader``) and
    whether it took its states from one (``shared``)."""

    key: Hashable
    ids: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    token: int | None = None
    prompt: list[int] = field(default_factory=list)
    response: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    limit: int = 0
    leader: Hashable | None = None
    shared: bool = False


@dataclass(frozen=True)
class TurnOutput:
    """A finished turn: the sequence's ``key``, the ``prompt_ids`` it was given, its ``response_ids`` (ending with
    the stop token when it stopped), whether its prompt's prefill was another row's (``shared``: a sibling of
    the same first prompt, counted once) and the sampler's log-probability of each response token
    (``response_logprobs``, natural log, same length as ``response_ids``: ``log_softmax`` of the model's logits
    before the temperature, the distribution the trainer's log-probs are taken from)."""

    key: Hashable
    prompt_ids: list[int]
    response_ids: list[int]
    shared: bool = False
    response_logprobs: list[float] = field(default_factory=list)


class ContinuousBatch:
    """Rows that decode together across turns (see the module docstring).

    Args:
        model: a causal LM whose layers take ``past_key_values`` (transformers' ``Cache`` API), in eval mode.
        stop_ids: tokens that end a turn (kept as its last token).
        temperature: 0 for greedy.
        max_new_tokens: tokens per turn at most (a turn's own cap may be lower).
        capacity: rows decoding at once at most (`free` says how many more can start).
        precision: the context every forward pass runs in (e.g. ``torch.autocast``).
        counters: a dict the batch adds its counts to (`COUNTERS`; e.g. the policy's running totals), or
            ``None`` for its own.
        step_tokens: prompt tokens a step feeds at most (a longer prompt is fed in chunks; decoding rows always
            feed their token): bounds a pass's activations.
        max_kv_tokens: no new row starts while the rows in use times the longest row's length would pass it (the
            buffers hold every row at the longest row's length: ``2 x layers x kv_heads x head_dim`` values per
            token, SmolLM2-135M float32 46 KiB); one row always may.
    """

    def __init__(self, model, stop_ids: Sequence[int], temperature: float = 0.0, max_new_tokens: int = 256,
                 capacity: int = 64, precision=None, counters: dict[str, float] | None = None,
                 step_tokens: int = 2048, max_kv_tokens: int = 131072):
        self.model, self.temperature = model, float(temperature)
        self.max_new_tokens, self.capacity = int(max_new_tokens), max(1, int(capacity))
        self.step_tokens = max(1, int(step_tokens))
        self.max_kv_tokens = int(max_kv_tokens)
        self.stops = {int(t) for t in stop_ids}
        self.precision = precision or nullcontext
        self.rows: list[Row | None] = []
        self.where: dict[Hashable, int] = {}
        self.cache: RowCache | None = None
        self.device = next(model.parameters()).device
        self.counters = counters if counters is not None else {}
        for name in COUNTERS:
            self.counters.setdefault(name, 0)

    def free(self) -> int:
        """Rows that can start now: ``capacity`` minus the rows in use, or 0 while one more row at the longest
        row's length would pass ``max_kv_tokens``."""
        used = len(self.where)
        longest = int(self.cache.fill.max()) if self.cache is not None and self.cache.rows else 0
        if used and (used + 1) * longest > self.max_kv_tokens:
            return 0
        return self.capacity - used

    def busy(self) -> bool:
        """Whether any row is prefilling or decoding (a `step` has work)."""
        return any(r is not None and (r.pending or r.token is not None) for r in self.rows)

    def add(self, key: Hashable, ids: Sequence[int], cap: int | None = None) -> None:
        """Start a turn of sequence ``key`` from the prompt ``ids`` (all of its tokens, the conversation so far):
        a new key takes a free row; a known key (its previous turn done) keeps its row, whose cached tokens
        beyond the longest prefix shared with ``ids`` are dropped. ``cap``: this turn's token cap below
        ``max_new_tokens``.

        Raises:
            ValueError: ``ids`` is empty; the key's row is still decoding; no row is free for a new key.
        """
        ids = [int(t) for t in ids]
        if not ids:
            raise ValueError(f"an empty prompt for {key!r}")
        limit = min(self.max_new_tokens, cap) if cap is not None else self.max_new_tokens
        if key in self.where:
            row = self.rows[self.where[key]]
            if row.token is not None or row.pending:
                raise ValueError(f"{key!r} is still in its turn")
            keep = min(common_prefix(row.ids, ids), len(ids) - 1)  # the last prompt token is fed: its logits start
            del row.ids[keep:]
            self.cache.fill[self.where[key]] = keep
            row.pending, row.prompt, row.response, row.logprobs, row.limit = ids[keep:], ids, [], [], limit
            row.leader, row.shared = None, False
            self._count(prompt_tokens=len(ids), reused_tokens=keep)
            return
        if self.free() <= 0:
            raise ValueError(f"no free row for {key!r} (capacity {self.capacity})")
        row = Row(key, pending=ids, prompt=ids, limit=limit)
        row.leader = next((r.key for r in self.rows if r is not None and r.leader is None and not r.ids
                           and r.token is None and r.pending == ids), None)  # the n samples of one first prompt
        slot = next((i for i, r in enumerate(self.rows) if r is None), None)
        if slot is None:
            self.rows.append(row)
            slot = len(self.rows) - 1
        else:
            self.rows[slot] = row
            if self.cache is not None:
                self.cache.fill[slot] = 0
        self.where[key] = slot
        self._count(prompt_tokens=len(ids))

    def release(self, key: Hashable) -> None:
        """The sequence ``key`` has ended: free its row (unknown keys are ignored); its columns no longer count
        as filled (`free`, `RowCache.crop`)."""
        slot = self.where.pop(key, None)
        if slot is not None:
            self.rows[slot] = None
            if self.cache is not None and slot < self.cache.rows:
                self.cache.fill[slot] = 0

    def step(self) -> list[TurnOutput]:
        """One packed forward pass: every decoding row's last sampled token and up to ``step_tokens`` pending
        prompt tokens (a long prompt goes in chunks over several steps); returns the turns that ended in it
        (their rows wait for `add` or `release`)."""
        with torch.no_grad(), self.precision():
            self._ensure_cache()
            self._compact()
            return self._step()

    def _count(self, **amounts: float) -> None:
        for name, amount in amounts.items():
            self.counters[name] += amount

    # -- internals -----------------------------------------------------------------------------------------------

    def _ensure_cache(self) -> None:
        if self.cache is None:
            self.cache = RowCache(self.model.config, len(self.rows))
        elif self.cache.rows < len(self.rows):
            self.cache.add_rows(len(self.rows) - self.cache.rows)

    def _compact(self) -> None:
        """Drop free rows once they are a quarter of the batch (at least one); a prompt waiting for a row takes
        a free one before the step (`add`). Cut the columns no row fills (`RowCache.crop`)."""
        if self.cache is not None:
            self.cache.crop()
        empty = [i for i, r in enumerate(self.rows) if r is None]
        if not empty or self.cache is None or len(empty) < max(1, len(self.rows) // 4):
            return
        keep = [i for i, r in enumerate(self.rows) if r is not None]
        self.cache.select_rows(torch.tensor(keep, dtype=torch.long))
        self.rows = [self.rows[i] for i in keep]
        self.where = {r.key: i for i, r in enumerate(self.rows)}

    def _step(self) -> list[TurnOutput]:
        rows, cache = self.rows, self.cache
        segments, ids, sample_at = [], [], []  # sample_at: (slot, token index) of rows whose logits are drawn
        budget = self.step_tokens
        prompt_fed = decode_fed = 0
        for i, r in enumerate(rows):
            if r is None:
                continue
            if r.leader is not None and r.leader not in self.where:  # its leader is gone: prefill its own prompt
                r.leader = None
            if r.token is not None:
                chunk = [r.token]
                decode_fed += 1
            elif r.pending and r.leader is None and budget > 0:
                chunk = r.pending[:budget]
                budget -= len(chunk)
                prompt_fed += len(chunk)
            else:
                continue
            segments.append((i, len(ids), len(chunk), int(cache.fill[i])))
            ids += chunk
        if not segments:
            return []
        packed = Packed(segments, len(rows))
        positions = torch.cat([torch.arange(f, f + n) for _, _, n, f in segments])
        t0 = time.perf_counter()
        cache.packed = packed
        try:
            hidden = self.model.get_decoder()(
                input_ids=torch.tensor([ids], dtype=torch.long, device=self.device),
                attention_mask=PACKED_MASK.to(self.device), position_ids=positions[None].to(self.device),
                past_key_values=cache, use_cache=True, genenv_packed=packed).last_hidden_state
        finally:
            cache.packed = None
        for i, start, n, _ in segments:
            r = rows[i]
            r.ids += ids[start:start + n]
            cache.fill[i] += n
            if r.token is not None or len(r.pending) == n:
                r.pending = []
                sample_at.append((i, start + n - 1))
            else:
                r.pending = r.pending[n:]
        logits = self.model.get_output_embeddings()(hidden[0, [t for _, t in sample_at]]).float() \
            if sample_at else None
        self._count(**{"prefill_seconds" if prompt_fed else "decode_seconds": time.perf_counter() - t0},
                    passes=1, decode_rows=decode_fed, prefill_tokens=prompt_fed, prefill_passes=int(prompt_fed > 0))
        slots = [i for i, _ in sample_at]
        parts = [logits] if logits is not None else []
        for f, r in enumerate(rows):  # siblings of a prompt whose prefill just ended: its states and logits
            if r is None or r.leader is None or not r.pending:
                continue
            lead = self.where.get(r.leader)
            if lead is None or lead not in slots or rows[lead].pending:
                continue
            cache.copy_row(lead, f, int(cache.fill[lead]))
            cache.fill[f] = cache.fill[lead]
            r.ids, r.pending, r.shared = list(rows[lead].ids), [], True
            self._count(reused_tokens=len(r.prompt))
            parts.append(logits[slots.index(lead)][None])
            slots.append(f)
        if not slots:
            return []
        drawn = torch.cat(parts)
        tokens = sample_tokens(drawn, self.temperature, inverse_cdf=True)
        logprobs = torch.log_softmax(drawn, dim=-1).gather(1, tokens.reshape(-1, 1).to(drawn.device)).flatten()
        return self._accept(slots, tokens.tolist(), logprobs.tolist())

    def _accept(self, slots: list[int], tokens: list[int], logprobs: list[float]) -> list[TurnOutput]:
        """Append each slot's sampled token and its log-prob to its response; end the turns that stopped or reached
        their limit."""
        ended = []
        for i, tok, lp in zip(slots, tokens, logprobs):
            r = self.rows[i]
            r.response.append(int(tok))
            r.logprobs.append(float(lp))
            if int(tok) in self.stops or len(r.response) >= r.limit:
                r.token = None
                ended.append(TurnOutput(r.key, list(r.prompt), list(r.response), r.shared, list(r.logprobs)))
            else:
                r.token = int(tok)
        return ended

