"""One layer's attention, forward and backward, of an update's pass over a shared prompt's cache: SDPA with the
explicit causal mask aligned to the last key (what transformers builds) against
:func:`~genenv.runtime.attention.causal_attention` (the fused causal kernel without a mask, the queries preceded by
zero rows), SmolLM2-135M's heads (9 query heads over 3 KV heads of 64), float32 (a benchmark script that prints
figures, not a test). Shows where ``decode_attention`` takes the causal kernel: with ``K`` keys and ``Q`` queries,
only where ``2 K <= 3 Q``; the zero rows cost more than the mask saves past that.

    python scripts/bench_causal_attention.py
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
    args = p.parse_args(argv)
    heads, kv, dim = 9, 3, 64

    def seconds(fn) -> float:
        fn()
        start = time.perf_counter()
        for _ in range(args.repeats):
            fn()
        return (time.perf_counter() - start) / args.repeats

    print(f"torch threads {torch.get_num_threads()}")
    print("| rows | prompt | response | K / Q | mask ms | causal ms | ratio |\n|---|---|---|---|---|---|---|")
    for n, prompt, response in SHAPES:
        torch.manual_seed(0)
        q = torch.randn(n, heads, response, dim, requires_grad=True)
        k, v = (torch.randn(n, kv, prompt + response, dim, requires_grad=True) for _ in range(2))
        mask = torch.ones(response, prompt + response, dtype=torch.bool).tril(prompt)

        def masked():
            torch.nn.functional.scaled_dot_product_attention(
                q, k.repeat_interleave(heads // kv, 1), v.repeat_interleave(heads // kv, 1), attn_mask=mask
            ).sum().backward()

        def causal():
            causal_attention(q, k, v).sum().backward()

        a, b = seconds(masked), seconds(causal)
        print(f"| {n} | {prompt} | {response} | {(prompt + response) / response:.2f} | {a * 1e3:.0f} | {b * 1e3:.0f} "
              f"| {b / a:.2f} |")


if __name__ == "__main__":
    main()
