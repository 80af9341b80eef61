"""One layer's attention of a decoding step in bfloat16 on the CPU, the two ways
`decode_attention` can compute it: SDPA with grouped-query heads (what it takes
where `sdpa_decodes_bfloat16`, a CPU with AMX) against two matmuls with the scores
and the softmax in float32 (`grouped_attention`, elsewhere; its scores against the
key's whole buffer). SmolLM2-135M's heads
(9 query heads over 3 KV heads of 64); the keys and values are views of the first ``T`` columns of larger buffers,
as a growing KV cache hands them over (a benchmark script that prints figures, not a test).

    python lab/benches/bench_decode_attention.py [--seconds 1]

Prints per shape (rows x cached tokens) the milliseconds of each way, twice alternated, the largest difference of
each from float32 SDPA on the same inputs, and the kernel this host's ``decode_attention`` uses.
"""
from __future__ import annotations

import argparse
import time

import torch

SHAPES = ((8, 1000), (16, 400), (16, 1300), (4, 6000), (32, 300))
"""(rows, cached tokens): a writer's 8 generations over a long prompt, a turn's rows, a long single conversation."""


def main(argv: list[str] | None = None) -> None:
    """Command line (see the module docstring)."""
    from genenv.runtime._builtin.attention import grouped_attention, sdpa_decodes_bfloat16

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    args = p.parse_args(argv)
    heads, kv, dim = 9, 3, 64

    def ms(fn) -> float:
        fn()
        start, count = time.perf_counter(), 0
        while time.perf_counter() - start < args.seconds:
            fn()
            count += 1
        return (time.perf_counter() - start) / count * 1e3

    print(f"torch threads {torch.get_num_threads()}; decode_attention in bf16 uses "
          f"{'SDPA' if sdpa_decodes_bfloat16() else 'the matmuls'} here")
    print("| rows | cached tokens | SDPA ms | matmuls ms | SDPA max error | matmuls max error |\n"
          "|---|---|---|---|---|---|")
    for rows, cached in SHAPES:
        torch.manual_seed(0)
        capacity = cached + cached // 4
        keys, values = (torch.randn(rows, kv, capacity, dim) for _ in range(2))
        query = torch.randn(rows, heads, 1, dim)
        exact = torch.nn.functional.scaled_dot_product_attention(query, keys[:, :, :cached], values[:, :, :cached],
                                                                 enable_gqa=True)
        q, k, v = query.bfloat16(), keys.bfloat16()[:, :, :cached], values.bfloat16()[:, :, :cached]

        def sdpa():
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)

        def matmuls():
            return grouped_attention(q.reshape(rows, kv, heads // kv, dim), k, v, dim ** -0.5
                                     ).reshape(rows, heads, 1, dim)

        times = {"sdpa": [], "matmuls": []}
        for _ in range(2):
            times["sdpa"].append(ms(sdpa))
            times["matmuls"].append(ms(matmuls))
        error = {name: (fn().float() - exact).abs().max().item() for name, fn in (("sdpa", sdpa), ("matmuls", matmuls))}
        print(f"| {rows} | {cached} | {' / '.join(f'{t:.2f}' for t in times['sdpa'])} | "
              f"{' / '.join(f'{t:.2f}' for t in times['matmuls'])} | {error['sdpa']:.4f} | {error['matmuls']:.4f} |")


if __name__ == "__main__":
    main()
