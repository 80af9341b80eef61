"""Benchmark (not a test): random and adversarial model text through every env and every generation parser.

    python lab/benches/bench_fuzz.py [--texts 10000] [--seed 0] [--tasks 4] [--data-dir DIR] [--only NAME ...]

Every registered env (`genenv.envs.ENVS`) is made on the first ``--tasks`` tasks of its first split and
wrapped in `TextActionWrapper`; each text is one ``step`` after a ``reset`` (an
episode that ends is reset, so multi-step envs see texts at their first and later steps). Every registered
benchmark spec's ``parse_generated`` (the environment policy's generation parser) gets every text too. The
contract checked (``docs/adding-an-env.md``): no text raises; a text is an action, or an invalid action that
scores 0 with ``info["error"]``, or a generated task, or a `Rejection`.

The texts (`genenv.benchmarks.fuzz.fuzz_texts`, as the test suite's slice uses them) mix: random printable /
Unicode / control-character strings; integer literals of thousands of digits (beyond Python's 4,300-digit int-string
limit) and huge hexadecimal literals inside JSON, Python-literal, ``<tool_call>``, ``API-Request:`` and ReAct forms;
nesting thousands of levels deep; ``NaN`` / ``Infinity`` / ``1e999``; oversized texts; and mutations (truncation,
splices, repeats, injected fragments) of each env's gold texts, so that parsers reach their deeper branches.

Prints one line per env (texts, invalid actions, exceptions, wall s) and per generation parser (texts, tasks
admitted, rejections, exceptions, wall s), then the totals; exit status 1 when any text raised.
"""
from __future__ import annotations

import argparse
from typing import Any, Callable, Sequence

from genenv.benchmarks.fuzz import fuzz_env, fuzz_generation, fuzz_texts, gold_texts


def run(n: int, seed: int = 0, tasks: int = 4, data_dir: str | None = None, only: Sequence[str] = (),
        echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Fuzz every env and generation parser (or those named in ``only``) with ``n`` texts; print and return
    ``{"envs": {name: fuzz_env result}, "parsers": {name: fuzz_generation result}, "texts": n}``."""
    from genenv.benchmarks.registry import BENCHMARKS
    from genenv.envs import ENVS

    texts = fuzz_texts(n, seed, gold_texts(data_dir))
    chars = sum(map(len, texts))
    echo(f"{len(texts)} texts ({chars:,} characters, longest {max(map(len, texts)):,})")
    results: dict[str, Any] = {"envs": {}, "parsers": {}, "texts": len(texts)}
    echo(f"{'env':26} {'texts':>6} {'invalid':>7} {'exceptions':>10} {'wall s':>8}")
    for name in sorted(ENVS):
        if only and name not in only:
            continue
        r = fuzz_env(name, texts, tasks, data_dir)
        results["envs"][name] = r
        echo(f"{name:26} {r['texts']:6d} {r['invalid']:7d} {r['exceptions']:10d} {r['wall_s']:8.1f}")
        for e in r["errors"]:
            echo("  " + e.replace("\n", "\n  "))
    echo(f"{'generation parser':26} {'texts':>6} {'admitted':>8} {'rejected':>8} {'exceptions':>10} {'wall s':>8}")
    for name in sorted(BENCHMARKS):
        if only and name not in only:
            continue
        r = fuzz_generation(name, texts, data_dir)
        results["parsers"][name] = r
        echo(f"{name:26} {r['texts']:6d} {r['admitted']:8d} {sum(r['rejected'].values()):8d} "
             f"{r['exceptions']:10d} {r['wall_s']:8.1f}")
        for e in r["errors"]:
            echo("  " + e.replace("\n", "\n  "))
    every = list(results["envs"].values()) + list(results["parsers"].values())
    echo(f"total: {sum(r['texts'] for r in every)} text evaluations, "
         f"{sum(r['exceptions'] for r in every)} exceptions, {sum(r['wall_s'] for r in every):.1f} s")
    return results


def main(argv: list[str] | None = None) -> int:
    """Command line: run `run`; exit 1 when any text raised."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--texts", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tasks", type=int, default=4, help="tasks per env (the first of its first split)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--only", nargs="*", default=(), help="env / spec names (default: all)")
    args = p.parse_args(argv)
    results = run(args.texts, args.seed, args.tasks, args.data_dir, args.only)
    every = list(results["envs"].values()) + list(results["parsers"].values())
    return 1 if any(r["exceptions"] for r in every) else 0


if __name__ == "__main__":
    raise SystemExit(main())
