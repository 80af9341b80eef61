"""Benchmark (not a test): how many of the environment policy's generations become tasks, constrained vs free
sampling, grounded vs format-only validation, and what each admitted task costs.

    python lab/benches/bench_generation.py [--benchmarks bfcl,bamboogle,...] [--prompts 8] [--n 4]
        [--policy smollm2] [--modes constrained,free] [--out runs/bench_generation]

For each benchmark it builds ``--prompts`` generation prompts exactly as the trainer does
(`genenv.trainer.generation.write_tasks`, GenEnv mode, demonstrations from the real training pool, seeded),
samples ``--n`` generations per prompt twice — under the spec's JSON Schema (``generation.constrained: true``) and
freely — at the benchmark's configured temperature and ``max_new_tokens``, and validates every text twice: with
the grounded rules (the default) and with format, type and execution checks only (``generation.grounded: false``,
the validators before grounding). Prints, per benchmark and sampling mode: generations, admitted under each
validator, generated tokens per second, seconds of generation per admitted (grounded) task, the median response
tokens, the largest token budget (`genenv.trainer.generation.generation_budget`), how many generations ended
at their budget ("cut"), and every rejection reason with its count.
Writes ``results.json``, ``generations.jsonl`` (every
generation: text, tokens, verdict and its detail) and ``examples.md`` (tasks the format-only validator admits that
the grounded one rejects, and admitted tasks) under ``--out``.
"""
from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

from genenv.benchmarks.registry import get_benchmark
from genenv.envs.task import Task
from genenv.trainer.task_pool import TaskPool

DEFAULT_BENCHMARKS = ("bfcl", "bfcl_multi_turn", "bamboogle", "api_bank", "api_bank_plan", "api_bank_response",
                      "alfworld", "travelplanner", "twx")


def generation_config(benchmark: str, constrained: bool, prompts: int, n: int):
    """The ``generation`` block ``genenv-train benchmark=<benchmark>`` composes, with this run's sizes."""
    from genenv.trainer.cli import compose_config

    cfg = compose_config([f"benchmark={benchmark}", f"generation.prompts_per_iteration={prompts}",
                          f"generation.generations_per_prompt={n}", f"generation.constrained={constrained}"])
    return cfg.generation, cfg.benchmark


def run_benchmark(name: str, policy, prompts: int, n: int, seed: int, data_dir: str | None,
                  modes: tuple[str, ...], generations_file: Path) -> dict[str, Any]:
    """The sampling ``modes`` on one benchmark; returns the figures and example rows, and appends every
    generation with its verdict to ``generations_file`` (JSON lines)."""
    from genenv.trainer.generation import genenv_plans, generation_budget, write_tasks

    spec = get_benchmark(name, data_dir)
    format_only = get_benchmark(name, data_dir, grounded=False)  # validation without the grounded rules
    out: dict[str, Any] = {"benchmark": name}
    for constrained in [m == "constrained" for m in modes]:
        g, bench = generation_config(name, constrained, prompts, n)
        tasks = spec.load(split="train", **spec.pool_options(bench.get("seed_options")))
        pool = TaskPool(tasks)
        tokens0, seconds0 = policy.generated_tokens, policy.generate_seconds
        t0 = time.perf_counter()
        plans = genenv_plans(spec, pool, random.Random(seed), g)
        records, rejected = write_tasks(spec, policy, pool, g, 0.5, 0, plans)
        wall = time.perf_counter() - t0
        budgets = [generation_budget(spec.generation_schema(plans[r.prompt_index].seeds), g.max_new_tokens,
                                     constrained) for r in records]
        lengths = sorted(len(r.generation.response_ids) for r in records)
        tokens, seconds = policy.generated_tokens - tokens0, policy.generate_seconds - seconds0
        loose, examples = Counter(), []
        with open(generations_file, "a", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps({"benchmark": name, "mode": "constrained" if constrained else "free",
                                     "tokens": len(r.generation.response_ids), "admitted": r.admitted,
                                     "rejection": r.rejection.reason if r.rejection else None,
                                     "detail": r.rejection.detail if r.rejection else None,
                                     "text": r.generation.text}, ensure_ascii=False) + "\n")
        for r in records:
            verdict: Any = r.task or r.rejection
            if spec.grounding_reasons:  # the spec has grounded rules: validate again without them
                verdict = format_only.parse_generated(r.generation.text, "loose", 0, r.parent)
                if isinstance(verdict, Task):
                    verdict = format_only.near_duplicate(verdict, pool.tasks) or verdict
            loose[getattr(verdict, "reason", "admitted")] += 1
            if isinstance(verdict, Task) and not r.admitted:
                examples.append({"text": r.generation.text, "grounded_rejection": r.rejection.reason,
                                 "detail": r.rejection.detail})
            elif r.admitted and len(examples) < 40:
                examples.append({"text": r.generation.text, "grounded_rejection": None, "detail": "admitted"})
        admitted = sum(r.admitted for r in records)
        out["constrained" if constrained else "free"] = {
            "generations": len(records), "admitted_grounded": admitted, "admitted_format_only": loose["admitted"],
            "rejections_grounded": dict(rejected.most_common()),
            "rejections_format_only": {k: v for k, v in loose.most_common() if k != "admitted"},
            "generated_tokens": tokens, "generate_seconds": round(seconds, 2), "wall_seconds": round(wall, 2),
            "response_tokens": {"median": lengths[len(lengths) // 2] if lengths else None,
                                "max": lengths[-1] if lengths else None},
            "budget_tokens": max(budgets, default=None),
            "ended_at_budget": sum(len(r.generation.response_ids) >= b for r, b in zip(records, budgets)),
            "tokens_per_second": round(tokens / seconds, 1) if seconds else None,
            "seconds_per_admitted_task": round(seconds / admitted, 1) if admitted else None,
            "examples": examples}
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the table; write results.json and examples.md."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--benchmarks", default=",".join(DEFAULT_BENCHMARKS))
    p.add_argument("--prompts", type=int, default=8, help="generation prompts per benchmark and mode")
    p.add_argument("--n", type=int, default=4, help="generations per prompt")
    p.add_argument("--policy", default="smollm2")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default="runs/bench_generation")
    p.add_argument("--modes", default="constrained,free", help="sampling modes: constrained, free or both")
    args = p.parse_args(argv)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    from genenv.runtime.policies import make_policy

    policy = make_policy(args.policy)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "generations.jsonl").unlink(missing_ok=True)
    results = []
    print(f"{'benchmark':17} {'sampling':11} {'gen':>4} {'adm.grounded':>12} {'adm.format':>10} {'tok/s':>6} "
          f"{'s/admitted':>10} {'tok50':>5} {'budget':>6} {'cut':>4}  rejections (grounded)")
    for name in [b.strip() for b in args.benchmarks.split(",") if b.strip()]:
        res = run_benchmark(name, policy, args.prompts, args.n, args.seed, args.data_dir, modes,
                            out_dir / "generations.jsonl")
        results.append(res)
        for mode in modes:
            r = res[mode]
            reasons = ", ".join(f"{k} {v}" for k, v in r["rejections_grounded"].items())
            print(f"{name:17} {mode:11} {r['generations']:4d} {r['admitted_grounded']:12d} "
                  f"{r['admitted_format_only']:10d} {r['tokens_per_second'] or 0:6.1f} "
                  f"{r['seconds_per_admitted_task'] or float('inf'):10.1f} {r['response_tokens']['median'] or 0:5d} "
                  f"{r['budget_tokens'] or 0:6d} {r['ended_at_budget']:4d}  {reasons}", flush=True)
        (out_dir / "results.json").write_text(json.dumps(results, indent=1, ensure_ascii=False))
    with open(out_dir / "examples.md", "w", encoding="utf-8") as fh:
        for res in results:
            fh.write(f"## {res['benchmark']}\n\n")
            for mode in modes:
                for ex in res[mode]["examples"]:
                    verdict = "admitted" if ex["grounded_rejection"] is None else \
                        f"format-only admits, grounded rejects: {ex['grounded_rejection']} ({ex['detail']})"
                    fh.write(f"- [{mode}] {verdict}\n  `{ex['text'][:600]}`\n")
            fh.write("\n")
    print(f"wrote {out_dir / 'results.json'} and {out_dir / 'examples.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
