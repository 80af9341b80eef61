"""One layer's attention, forward and backward, of an update's pass over a shared prompt's cache: SDPA with the
explicit causal mask aligned to the last key (what transformers builds) against
`causal_attention` (the fused causal kernel without a mask, the queries preceded by
zero rows), SmolLM2-135M's heads (9 query heads over 3 KV heads of 64), float32 (a benchmark script that prints
figures, not a test). Shows where ``decode_attention`` takes the causal kernel: with ``K`` keys and ``Q`` queries,
only where ``2 K <= 3 Q``; the zero rows cost more than the mask saves past that.

``--dtype bfloat16`` measures in bf16 (the update's precision on a CPU with native bf16) and ``--matmuls`` adds the
same causal attention written as two batched matmuls with the scores and softmax in float32 (the grouped heads
reading their KV head in place, the mask applied to the full ``Q x K`` scores): the formulation that would hand the
work to the CPU's matrix kernels instead of SDPA's fused loop.

    python lab/benches/bench_causal_attention.py
    python lab/benches/bench_causal_attention.py --dtype bfloat16 --matmuls
"""
from __future__ import annotations

import argparse
import time

import torch

SHAPES = ((4, 300, 1200), (4, 300, 900), (4, 300, 600), (4, 300, 300), (4, 300, 150), (8, 550, 50), (1, 1000, 1200))
"""(rows, cached prompt tokens, response tokens)."""


def main(argv: list[str] | None = None) -> None:
    """Command line (see the module docstring)."""
    from genenv.runtime.attention import causal_attention

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    p.add_argument("--matmuls", action="store_true", help="add the two-matmul formulation (matmul_attention)")
    args = p.parse_args(argv)
    heads, kv, dim = 9, 3, 64
    dtype = getattr(torch, args.dtype)

    def seconds(fn) -> float:
        fn()
        start = time.perf_counter()
        for _ in range(args.repeats):
            fn()
        return (time.perf_counter() - start) / args.repeats

    print(f"torch threads {torch.get_num_threads()}, {args.dtype}")
    extra = (" matmuls ms |", "---|") if args.matmuls else ("", "")
    print(f"| rows | prompt | response | K / Q | mask ms | causal ms | ratio |{extra[0]}\n"
          f"|---|---|---|---|---|---|---|{extra[1]}")
    for n, prompt, response in SHAPES:
        torch.manual_seed(0)
        q = torch.randn(n, heads, response, dim, dtype=dtype, requires_grad=True)
        k, v = (torch.randn(n, kv, prompt + response, dim, dtype=dtype, requires_grad=True) for _ in range(2))
        mask = torch.ones(response, prompt + response, dtype=torch.bool).tril(prompt)

        def masked():
            torch.nn.functional.scaled_dot_product_attention(
                q, k.repeat_interleave(heads // kv, 1), v.repeat_interleave(heads // kv, 1), attn_mask=mask
            ).sum().backward()

        def causal():
            causal_attention(q, k, v).sum().backward()

        a, b = seconds(masked), seconds(causal)
        c = f" {seconds(lambda: matmul_attention(q, k, v, mask).sum().backward()) * 1e3:.0f} |" if args.matmuls else ""
        print(f"| {n} | {prompt} | {response} | {(prompt + response) / response:.2f} | {a * 1e3:.0f} | {b * 1e3:.0f} "
              f"| {b / a:.2f} |{c}")


def matmul_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, allowed: torch.Tensor
                     ) -> torch.Tensor:
    """Attention as two batched matmuls, the scores and the softmax in float32, the result in ``value``'s dtype:
    `grouped_attention` (the decoding attention's matmuls) with each KV head's
    query heads and queries as one run of rows.

    Args:
        query: ``[B, H, Q, D]``; key / value: ``[B, KV, K, D]``, ``H`` a multiple of ``KV`` (query head ``h`` reads
            KV head ``h // (H / KV)``, as ``repeat_kv`` does, without copying the KV heads).
        allowed: ``[Q, K]`` boolean, True where a query attends a key.
    Returns:
        ``[B, H, Q, D]``.
    """
    from genenv.runtime.attention import grouped_attention

    b, h, q, d = query.shape
    g = h // key.shape[1]
    out = grouped_attention(query.reshape(b, key.shape[1], g * q, d), key, value, d ** -0.5,
                            blocked=~allowed.repeat(g, 1))  # rows: a KV head's query heads, each its Q queries
    return out.reshape(b, h, q, d)


if __name__ == "__main__":
    main()
