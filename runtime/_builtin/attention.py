"""Attention for decoding on the CPU: one query token against a long KV cache as two matmuls and a softmax (in
float32, and in bfloat16 except on a CPU with AMX, where SDPA with grouped-query heads is faster).

``torch.nn.functional.scaled_dot_product_attention`` is many times slower per decoding step than the same attention
as grouped matmuls (SmolLM2-135M shapes: 9 query heads over 3 KV heads of 64, thousands of cached tokens, 30
layers), in bfloat16 most of all: a gap that made a multi-step episode's decoding, not its prefill, the cost of a
long conversation once the KV cache is reused across turns (`prefix_cache`). So the local policy registers this
function with transformers' ``AttentionInterface`` (its extension point for attention kernels) and uses it for every
call whose query is a single token on the CPU; every other call (prefill, training's log-prob passes, GPUs) goes to
transformers' own ``sdpa_attention_forward`` unchanged (figures: ``lab/notes/cpu-profiles.md``,
"runtime/attention.py").

In bfloat16 (chosen only where the CPU computes it natively, AVX-512 BF16 or AMX) the kernel depends on the CPU
(`sdpa_decodes_bfloat16`). PyTorch's bf16 matmul through oneDNN (``aten/src/ATen/native/mkldnn/Matmul.cpp``)
copies an operand that is neither contiguous nor transposed in its last two dims, and a cache view (the first ``T``
of its buffer's columns) is neither.
``scaled_dot_product_attention`` with ``enable_gqa`` reads the view in place without repeating the KV heads (which
transformers' ``sdpa_attention_forward`` does): on a CPU with AMX it is faster than both the matmuls over the view
and transformers' SDPA path. On a CPU with AVX-512 BF16 and no AMX SDPA is the slow one, so the matmuls stay there,
and their scores are taken against the key's whole buffer, which oneDNN reads in place (`grouped_attention`),
faster than over the view; both stay within 0.004 of float32 SDPA (``python lab/benches/bench_decode_attention.py``).
The whole buffer was not measured on a CPU with AMX. In float32 the matmuls stay everywhere (on a CPU with AMX too
they are faster than both SDPA paths). Figures of both kinds of CPU: ``lab/notes/cpu-profiles.md``,
"runtime/attention.py".

The computation is exactly attention (softmax of scaled scores, masked, times values), with the scores and the
softmax in float32: greedy tokens are the same as with SDPA in float32 (tested). A continuous batch's packed
pass (`continuous`) passes its layout as the ``genenv_packed`` keyword, which transformers
hands through to the attention function; such a call is computed by the layout
(`attend`).
"""
from __future__ import annotations

import functools

import torch

__all__ = [
    "NAME", "column_buffer", "decode_attention", "grouped_attention", "reads_whole_buffer",
    "sdpa_decodes_bfloat16", "use_decode_attention",
]

NAME = "genenv_cpu_decode"
"""The attention implementation's registered name (``model.config._attn_implementation``)."""


def decode_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                     is_causal: bool | None = None, **kwargs):
    """transformers' attention-function signature.

    Args:
        query: ``[B, H, Q, D]``; key / value: ``[B, KV, K, D]`` (``H`` a multiple of ``KV``: grouped-query heads,
            head ``h`` reading KV head ``h // (H / KV)`` as ``repeat_kv`` does).
        attention_mask: SDPA's mask, ``[B, 1, Q, K]`` boolean (True: attend) or additive float, or ``None``.
        scaling: the score scale (default ``D ** -0.5``).
        genenv_packed (keyword): a `Packed` layout; then ``query`` is the packed
            pass's ``[1, H, T, D]``, ``key`` / ``value`` the batch's buffers ``[R, KV, capacity, D]``, and the mask
            is unused.
    Returns:
        ``(out [B, Q, H, D], None)``.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    packed = kwargs.get("genenv_packed")
    if packed is not None:  # a continuous batch's pass: several rows' tokens in one sequence
        return packed.attend(query, key, value, scaling), None
    if query.shape[2] != 1 or query.device.type != "cpu" or (module.training and dropout > 0):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    b, h, q, d = query.shape
    kv, k_len = key.shape[1], key.shape[2]
    scale = d ** -0.5 if scaling is None else scaling
    mask = attention_mask[:, :, :, -k_len:] if attention_mask is not None else None  # [B, 1, 1, K]
    if query.dtype != torch.float32 and sdpa_decodes_bfloat16():  # SDPA reads the bf16 cache view in place
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale,
                                                               enable_gqa=True)
        return out.transpose(1, 2).contiguous(), None
    if mask is not None:
        mask = mask.reshape(mask.shape[0], 1, 1, k_len)
    blocked = ~mask if mask is not None and mask.dtype == torch.bool else None
    bias = mask if mask is not None and mask.dtype != torch.bool else None
    out = grouped_attention(query.reshape(b, kv, h // kv, d), key, value, scale, blocked, bias)  # [B, KV, G, D]
    return out.reshape(b, h, 1, d).transpose(1, 2).contiguous(), None


@functools.cache
def sdpa_decodes_bfloat16() -> bool:
    """Whether `decode_attention` computes a bfloat16 single-token call with SDPA (a CPU with AMX, where the
    matmuls over a cache view were the slower) rather than `grouped_attention` (every other CPU, where SDPA was
    the slower, by far; figures: ``lab/notes/cpu-profiles.md``, "runtime/attention.py"). Decided by
    `bfloat16_path` (``"amx"``), so one host always takes the same kernel and its runs stay reproducible."""
    from genenv.runtime.models import bfloat16_path

    return bfloat16_path("cpu") == "amx"


def grouped_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scale: float,
                      blocked: torch.Tensor | None = None, bias: torch.Tensor | None = None) -> torch.Tensor:
    """One query token per row and grouped-query head as two matmuls and a softmax, the scores and the softmax in
    float32 (the single-token path of `decode_attention` and of a continuous batch's packed pass,
    `attend`).

    Args:
        query: ``[B, KV, G, D]`` (the ``G`` query heads that read each KV head); key / value: ``[B, KV, K, D]``,
            views allowed.
        scale: the score scale.
        blocked: a boolean mask broadcast to ``[B, KV, G, K]``, True where a key is not attended, or ``None``.
        bias: an additive float mask broadcast to the scores, or ``None``.
    Returns:
        ``[B, KV, G, D]`` in ``value``'s dtype.

    Below float32, when ``key`` is the first ``K`` columns of a contiguous buffer (`column_buffer`: a decoding
    cache's view, `kv_cache`), the scores are computed against the whole buffer and their
    first ``K`` columns kept. oneDNN's bfloat16 matmul takes an operand only contiguous or with its last two dims
    transposed, and copies any other one first: the transposed view of ``key`` cost a transposing copy, the whole
    buffer none (its extra columns are computed and dropped). The result is bit for bit the view's, and on a CPU
    with AVX-512 BF16 the whole buffer was the faster at every shape measured, with buffers up to twice the cached
    tokens (figures: ``lab/notes/cpu-profiles.md``, "runtime/attention.py"). In float32 the matmuls read the view
    in place and it is kept (the whole buffer was slower there).
    """
    k_len = key.shape[2]
    whole = column_buffer(key) if reads_whole_buffer(key.dtype) else None
    keys = key if whole is None else whole
    scores = torch.matmul(query, keys.transpose(-1, -2))[..., :k_len].float() * scale  # [B, KV, G, K]
    if blocked is not None:
        scores = scores.masked_fill(blocked, float("-inf"))
    if bias is not None:
        scores = scores + bias.float()
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    return torch.matmul(probs, value)


def reads_whole_buffer(dtype: torch.dtype) -> bool:
    """Whether single-token attention in ``dtype`` multiplies by a KV buffer's every column rather than a view of its
    filled ones: below float32, where PyTorch's oneDNN matmul copies such a view first (`grouped_attention`
    over a cache view; `attend` over the batch's buffers, its unfilled
    columns masked). Float32 matmuls read the view in place, and there the whole buffer was slower."""
    return dtype != torch.float32


def column_buffer(view: torch.Tensor) -> torch.Tensor | None:
    """The contiguous tensor ``buf`` (``[B, KV, C, D]``) of which ``view`` (``[B, KV, K, D]``) is ``buf[:, :, :K]``,
    or ``None`` when ``view`` is not such a slice (a tensor of its own, or a view of another shape or offset).
    Read from the view's ``_base`` (PyTorch's link from a view to the tensor it was taken from)."""
    base = view._base
    if (base is None or base.dim() != 4 or not base.is_contiguous() or base.data_ptr() != view.data_ptr()
            or base.shape[:2] != view.shape[:2] or base.shape[3] != view.shape[3] or view.stride() != base.stride()):
        return None
    return base


def use_decode_attention(model) -> None:
    """Register `decode_attention` (once) and switch ``model`` to it where it runs on the CPU with SDPA
    (a model already on another kernel, e.g. flash attention on a GPU, is left alone)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    from genenv.runtime.models import model_device

    if NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(NAME, decode_attention)
        ALL_MASK_ATTENTION_FUNCTIONS.register(NAME, sdpa_mask)
    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) not in ("sdpa", NAME):
        return
    if model_device(model).type != "cpu":
        return
    model.set_attn_implementation(NAME)
