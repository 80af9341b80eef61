"""Token batches in veRL's layout and the per-token log-probabilities both updates need.

A batch is a `verl.DataProto` with veRL's keys: ``prompts`` (left-padded, ``[B, P]``), ``responses``
(right-padded, ``[B, R]``), ``input_ids`` = prompts ⧺ responses (``[B, P+R]``), ``attention_mask``,
``position_ids``, ``response_mask`` (``[B, R]``, 1 on generated tokens), plus any extra per-sample tensors and
non-tensor fields (e.g. ``uid``, the GRPO group key).
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Sequence

import numpy as np
import torch

from genenv.runtime.models import model_device

__all__ = [
    "PASS_TOKENS", "build_batch", "place_batch", "prompt_groups", "response_logprobs", "shared_prompt_logprobs",
    "trained_columns", "trained_tokens", "unpadded_span",
]


def build_batch(prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], pad_id: int,
                tensors: dict[str, torch.Tensor] | None = None, non_tensors: dict[str, Sequence[Any]] | None = None,
                response_masks: Sequence[Sequence[int] | None] | None = None):
    """Pad token lists into a ``DataProto`` (see module docstring for keys and shapes).

    ``response_masks`` (optional, per sample, ``None`` = all ones) zero out environment tokens of multi-turn
    responses in ``response_mask``; ``attention_mask`` still covers them.

    Raises:
        ValueError: lengths differ, or a response is empty.
    """
    from verl import DataProto

    if len(prompt_ids) != len(response_ids) or not prompt_ids:
        raise ValueError(f"need equally many prompts and responses, got {len(prompt_ids)} / {len(response_ids)}")
    if any(len(r) == 0 for r in response_ids):
        raise ValueError("empty response in batch")
    B, P, R = len(prompt_ids), max(map(len, prompt_ids)), max(map(len, response_ids))
    prompts = torch.full((B, P), pad_id, dtype=torch.long)
    responses = torch.full((B, R), pad_id, dtype=torch.long)
    pmask = torch.zeros((B, P), dtype=torch.long)
    rmask = torch.zeros((B, R), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompt_ids, response_ids)):
        prompts[i, P - len(p):] = torch.tensor(list(p))
        pmask[i, P - len(p):] = 1
        responses[i, :len(r)] = torch.tensor(list(r))
        own = response_masks[i] if response_masks is not None and response_masks[i] is not None else None
        if own is not None and len(own) != len(r):
            raise ValueError(f"response mask of sample {i} has {len(own)} entries for {len(r)} tokens")
        rmask[i, :len(r)] = torch.tensor(list(own)) if own is not None else 1
    amask = torch.zeros((B, R), dtype=torch.long)
    for i, r in enumerate(response_ids):
        amask[i, :len(r)] = 1
    attention = torch.cat([pmask, amask], dim=1)
    data = {"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": attention, "position_ids": (attention.cumsum(-1) - 1).clamp(min=0),
            "response_mask": rmask, **(tensors or {})}
    for key, values in (non_tensors or {}).items():
        data[key] = np.array(list(values), dtype=object)
    return DataProto.from_single_dict(data)


def place_batch(batch, model):
    """Move every tensor of ``batch`` (a ``DataProto``) to ``model``'s device, in place, and return it: the one
    place where update batches meet the model's device (built on the CPU by `build_batch`; on a GPU the
    log-probs, advantages and masks must share ``cuda:0``, else veRL's ``masked_mean`` fails)."""
    device = model_device(model)
    if batch.batch is not None and batch.batch.device != device:
        batch.to(device)
    return batch


def response_logprobs(model, batch, micro_batch_size: int = 4, grad: bool = False,
                      autocast_dtype: torch.dtype | None = torch.bfloat16) -> torch.Tensor:
    """Log-probability of every trained response token under ``model`` (``[B, R]``, on the model's device;
    mask them with ``response_mask``: padding and the positions no sample of a micro-batch trains on are 0).
    Uses veRL's ``logprobs_from_logits``; ``grad=False`` runs under no_grad. The batch is placed on the model's
    device first (`place_batch`).

    Logits are computed only at the response positions some sample of the micro-batch trains on
    (`trained_columns`; transformers' ``logits_to_keep`` with an index tensor): a multi-turn response is
    mostly the environment's observations, whose tokens need no logits (SmolLM2's 49,152 x 576 output layer is
    a fifth of its forward FLOPs, and its float32 logits the largest activation of the update).

    Each micro-batch runs on `unpadded_span` of its columns only (the columns every one of its samples
    pads are dropped), so a micro-batch of short samples costs what its own tokens cost, not the batch's
    longest sample; samples whose padding would cost more than more passes run one pass each, up to their last
    trained token (`own_prompt_logprobs`, `PASS_TOKENS`). Samples of a micro-batch that share their
    prompt (a GRPO group: one prompt, several responses) run the prompt once (`shared_prompt_logprobs`: the
    responses run on its key/value cache, up to their last trained token), so a group costs one prompt plus its
    responses. Both give the full-width result (padding is masked out of attention) up to floating-point
    rounding; gradients flow through the shared prompt once.

    For a gradient step call it per micro-batch yourself (pass a sliced batch) so activations stay bounded.
    """
    outs = []
    R = batch.batch["responses"].shape[1]
    device = place_batch(batch, model).batch.device
    for start in range(0, len(batch), micro_batch_size):
        mb = batch.slice(start, start + micro_batch_size)
        cols, r = unpadded_span(mb)
        keep = trained_columns(mb, r)
        ctx = torch.enable_grad() if grad else torch.no_grad()
        amp = (torch.autocast(device_type=device.type, dtype=autocast_dtype) if autocast_dtype is not None
               else nullcontext())
        t = {k: mb.batch[k] for k in ("input_ids", "attention_mask", "position_ids", "prompts")}
        P = t["prompts"].shape[1]
        with ctx, amp:
            groups = prompt_groups(t["prompts"], t["attention_mask"][:, :P])
            alone = [g for g in groups if len(g) == 1]  # samples with a prompt of their own run together
            parts = []
            for rows in [g for g in groups if len(g) > 1] + ([torch.cat(alone)] if alone else []):
                sub = {k: v[rows] for k, v in t.items()}
                if len(rows) > 1 and bool((sub["prompts"] == sub["prompts"][:1]).all()):
                    parts.append((rows, shared_prompt_logprobs(model, sub, r, keep,
                                                               mb.batch["response_mask"][rows])))
                else:
                    parts.append((rows, own_prompt_logprobs(model, sub, cols, keep,
                                                            mb.batch["response_mask"][rows])))
            if len(parts) == 1:
                lp = parts[0][1]
            else:
                order = torch.cat([rows for rows, _ in parts])
                lp = torch.cat([x for _, x in parts]).index_select(0, torch.argsort(order))
        outs.append(lp.new_zeros((lp.shape[0], R)).index_copy(1, keep, lp))
    return torch.cat(outs, dim=0)


def trained_columns(batch, r: int) -> torch.Tensor:
    """The response columns (``LongTensor``, ascending, on the batch's device) among the first ``r`` where some
    sample of ``batch`` has ``response_mask`` 1: the tokens a loss reads. All ``r`` for single-turn responses;
    a multi-turn response's environment tokens are left out. Never empty (column 0 when no sample trains on
    any token)."""
    cols = batch.batch["response_mask"][:, :r].any(dim=0).nonzero().flatten()
    return cols if len(cols) else torch.zeros(1, dtype=torch.long, device=cols.device)


def prompt_groups(prompts: torch.Tensor, prompt_mask: torch.Tensor) -> list[torch.Tensor]:
    """Row indices (``LongTensor``s, in first-appearance order) of the samples with identical prompts: equal
    tokens where ``prompt_mask`` (``[B, P]``) is 1 and equal masks. ``prompts``: ``[B, P]`` token ids."""
    keys: dict[tuple[int, ...], list[int]] = {}
    for i, (row, mask) in enumerate(zip(prompts.tolist(), prompt_mask.tolist())):
        keys.setdefault(tuple(tok if m else -1 for tok, m in zip(row, mask)), []).append(i)
    return [torch.tensor(rows, dtype=torch.long, device=prompts.device) for rows in keys.values()]


PASS_TOKENS = 256
"""About what one more forward pass costs, in tokens fed: a pass reads every weight whatever it carries. The value is
the ratio of a pass's fixed cost to a prompt token's cost in a least-squares fit of a rollout's passes (the fit and
its figures: ``lab/notes/cpu-profiles.md``, "trainer/updates/batch.py"). Samples run one
pass each (`shared_prompt_logprobs`, `own_prompt_logprobs`) when batching them would pad more than
``PASS_TOKENS`` cells per extra pass."""


def trained_tokens(response_mask: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, list[int | None]]:
    """The tokens each sample trains on among the columns ``keep`` (``[n, r]`` bool, from ``response_mask``'s
    first ``r`` columns) and each sample's last such column (``None`` where it trains on none)."""
    r = response_mask.shape[1]
    trained = response_mask.bool() & torch.zeros(r, dtype=torch.bool, device=keep.device).index_fill(0, keep, True)
    return trained, [int(t.nonzero()[-1]) if bool(t.any()) else None for t in trained]


def one_pass(rows: int, width: int, fed: Sequence[int]) -> bool:
    """Whether ``rows`` samples run in one pass padded to ``width`` tokens each rather than one pass each for those
    that feed tokens (``fed``, tokens each): the padding costs no more than `PASS_TOKENS` per extra pass."""
    return rows * width - sum(fed) <= PASS_TOKENS * (len(fed) - 1)


def placed(values: torch.Tensor, columns: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """A ``[len(keep)]`` row with ``values`` (``[m]``) at the positions of ``columns`` (ascending, a subset of
    ``keep``) and 0 elsewhere; differentiable in ``values``."""
    return values.new_zeros(len(keep)).index_copy(0, torch.searchsorted(keep, columns), values)


def shared_prompt_logprobs(model, rows: dict[str, torch.Tensor], r: int, keep: torch.Tensor,
                           response_mask: torch.Tensor) -> torch.Tensor:
    """Log-probs of the response tokens ``keep`` (ascending columns below ``r``) of samples
    sharing one prompt (``[n, len(keep)]``, float32; mask them with ``response_mask``: a column that no sample of
    the group trains on is 0, and one that only another sample trains on may hold any finite value).

    ``rows``: ``input_ids``, ``attention_mask``, ``position_ids`` (``[n, P+R]``) and ``prompts`` (``[n, P]``)
    of ``n`` samples whose prompts are identical (`prompt_groups`); ``response_mask``: their ``[n, R]``
    trained tokens. The prompt runs once with
    ``use_cache=True``; the responses run on its key/value cache. Position ``P-1`` of the prompt predicts response
    token 0; response positions ``0..r-2`` predict tokens ``1..r-1``: the same log-probs as a full forward over
    ``prompt ⧺ response`` (veRL's ``logprobs_from_logits``).

    The responses run up to the last position a trained token reads, in one pass (the cache repeated for each,
    ``DynamicCache.batch_repeat_interleave``, shorter ones right-padded), or one pass each when the padding would
    cost more than the extra passes (`PASS_TOKENS`); a pass of its own computes logits only at its
    sample's trained tokens. Attention is transformers' own (SDPA with the mask). Gradients flow through the shared
    prompt once.
    """
    from transformers import DynamicCache
    from verl.utils.torch_functional import logprobs_from_logits

    n, P = rows["prompts"].shape
    ids = rows["input_ids"]
    trained, last = trained_tokens(response_mask[:, :r], keep)
    used = rows["attention_mask"][0, :P].nonzero()
    first = int(used[0]) if len(used) else P - 1
    head = model(input_ids=ids[:1, first:P], attention_mask=rows["attention_mask"][:1, first:P],
                 position_ids=rows["position_ids"][:1, first:P], use_cache=True, logits_to_keep=1)
    head_lp = logprobs_from_logits(head.logits[:, -1, :].float().expand(n, -1), ids[:, P])  # response token 0
    ends = [c or 0 for c in last]  # each tail's length: up to the input that predicts the last trained token
    width = max(ends)
    first_col = [head_lp[:, None]] if int(keep[0]) == 0 else []
    later = keep[(keep > 0) & (keep <= width)]
    if not len(later):  # no sample trains past response token 0
        return torch.cat(first_col + [head_lp.new_zeros(n, len(keep) - len(first_col))], dim=1)

    def tail(select: slice, end: int, cols: torch.Tensor, cache) -> torch.Tensor:
        """Log-probs of response columns ``cols`` (>= 1) of rows ``select``, from their tail up to column ``end``."""
        out = model(input_ids=ids[select, P:P + end], attention_mask=rows["attention_mask"][select, first:P + end],
                    position_ids=rows["position_ids"][select, P:P + end], past_key_values=cache, use_cache=True,
                    logits_to_keep=cols - 1)
        return logprobs_from_logits(out.logits.float(), ids[select, P + cols])

    if one_pass(n, width, ends):  # one pass, the cache repeated for each row
        cache = head.past_key_values
        cache.batch_repeat_interleave(n)
        past = head_lp.new_zeros(n, int((keep > width).sum()))  # columns only other groups train
        return torch.cat(first_col + [tail(slice(None), width, later, cache), past], dim=1)
    layers = [(layer.keys, layer.values) for layer in head.past_key_values.layers]
    out = []
    for i in range(n):
        own = trained[i].nonzero().flatten()
        later = own[own > 0]
        lp = head_lp[i:i + 1] if len(own) and int(own[0]) == 0 else head_lp.new_zeros(0)
        if ends[i] > 0:
            lp = torch.cat([lp, tail(slice(i, i + 1), ends[i], later, DynamicCache(layers, config=model.config))[0]])
        out.append(placed(lp, own, keep))
    return torch.stack(out)


def own_prompt_logprobs(model, rows: dict[str, torch.Tensor], cols: slice, keep: torch.Tensor,
                        response_mask: torch.Tensor) -> torch.Tensor:
    """Log-probs of the response tokens ``keep`` (ascending columns) of samples with prompts of their own
    (``[n, len(keep)]``, float32; mask them with ``response_mask``, ``[n, R]``, as for
    `shared_prompt_logprobs`).

    ``rows``: ``input_ids``, ``attention_mask``, ``position_ids`` (``[n, P+R]``) and ``prompts`` (``[n, P]``);
    ``cols``: the columns some of them fill (`unpadded_span`). They run in one pass over ``cols`` (input
    column ``P-1+j`` predicts response token ``j``; left-padded prompts and right-padded responses, under the
    mask), or one pass each, every sample on its own tokens up to its last trained one, when the padding would
    cost more than the extra passes (`PASS_TOKENS`): without padding a pass needs no mask, and SDPA runs
    its fused causal kernel.
    """
    from verl.utils.torch_functional import logprobs_from_logits

    n, P = rows["prompts"].shape
    ids = rows["input_ids"]
    trained, last = trained_tokens(response_mask[:, :cols.stop - P], keep)
    starts = [int(m.nonzero()[0]) if bool(m.any()) else P for m in rows["attention_mask"][:, :P]]
    ends = [None if c is None else P + c for c in last]  # inputs up to the one that predicts the last trained
    fed = [end - start for start, end in zip(starts, ends) if end is not None]
    if n == 1 or one_pass(n, cols.stop - cols.start, fed):
        logits = model(input_ids=ids[:, cols], attention_mask=rows["attention_mask"][:, cols],
                       position_ids=rows["position_ids"][:, cols], use_cache=False,
                       logits_to_keep=keep + (P - 1 - cols.start)).logits
        return logprobs_from_logits(logits.float(), ids[:, P + keep])
    out = []
    for i, (start, end) in enumerate(zip(starts, ends)):
        own = trained[i].nonzero().flatten()
        if end is None:
            out.append(torch.zeros(len(keep), device=ids.device))
            continue
        logits = model(input_ids=ids[i:i + 1, start:end], position_ids=rows["position_ids"][i:i + 1, start:end],
                       use_cache=False, logits_to_keep=own + (P - 1 - start)).logits
        out.append(placed(logprobs_from_logits(logits.float(), ids[i:i + 1, P + own])[0], own, keep))
    return torch.stack(out)


def unpadded_span(batch) -> tuple[slice, int]:
    """The columns of ``input_ids`` (``[B, P+R]``) that hold a token of at least one sample of ``batch``, and
    ``r``, its longest response (tokens): ``(slice(first, P + r), r)``. Prompts are left-padded and responses
    right-padded (`build_batch`), so the dropped columns are padding in every row; ``position_ids`` keep
    their values on the kept columns."""
    prompt_mask = batch.batch["attention_mask"][:, :batch.batch["prompts"].shape[1]]
    P = prompt_mask.shape[1]
    used = prompt_mask.any(dim=0).nonzero()
    first = int(used[0]) if len(used) else P
    r = int(batch.batch["attention_mask"][:, P:].sum(dim=1).max())
    return slice(first, P + r), r
