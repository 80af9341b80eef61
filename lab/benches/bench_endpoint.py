"""Throughput of the endpoint policy against a real server, beside the local transformers policy, on the same
benchmark slices (a benchmark script that prints figures, not a test).

    python lab/benches/bench_endpoint.py --server --benchmarks bfcl,bamboogle --option bfcl.category=simple_python \\
        --limit 40 --levels 1,4,16
    python lab/benches/bench_endpoint.py --url openai:http://127.0.0.1:8000/v1#Qwen2.5-7B-Instruct --policy hf:PATH

``--server`` starts llama.cpp's server on the embedded GGUF (`LlamaServer`);
``--url`` names a running endpoint instead. ``--policy`` is the local reference (default ``smollm2``; ``none`` skips
it). For each concurrency level the same greedy evaluation runs through `evaluate`;
the table gives tasks/s per unit and the score, and how often the endpoint's greedy text equals the local policy's
(exactly, and in its first word: `output_agreement`) — the two differ in numerics
(llama.cpp computes with the Q4_1 weights, transformers with their de-quantised float32 copy). ``--out DIR`` writes
``bench_endpoint.json``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from genenv.envs.data import resolve_data_dir, write_json
from genenv.eval.leaderboard import add_eval_arguments, parse_options, policy_from_args
from genenv.runtime.episodes import RolloutSpec
from genenv.runtime.evaluation import EvalResult, evaluate, output_agreement


def run(policy, label: str, benchmarks: Sequence[str], **eval_kwargs: Any) -> tuple[EvalResult, dict[str, Any]]:
    """One greedy evaluation; returns the result and its table entry (``label``, wall seconds, per-unit
    ``tasks`` / ``seconds`` / ``tasks_per_second``, headline scores, tokens generated)."""
    t0 = time.perf_counter()
    res = evaluate(policy, benchmarks, progress=False, **eval_kwargs)
    entry = {"label": label, "seconds": time.perf_counter() - t0, "timing": res.timing,
             "scores": {b: m.value for b, m in res.headlines.items()},
             "completion_tokens": sum(r.get("completion_tokens", 0) for r in res.rows)}
    return res, entry


def table(entries: Sequence[dict[str, Any]]) -> str:
    """Markdown: one row per run and unit (tasks, seconds, tasks/s, the benchmark's headline score), the run's
    completion tokens/s and its agreement with the local policy."""
    lines = ["| policy | unit | tasks | seconds | tasks/s | score (%) | completion tokens/s (run) | agreement with local |",
             "|---|---|---|---|---|---|---|---|"]
    for e in entries:
        agree = e.get("agreement")
        agree_s = f"{100 * agree['exact']:.0f} % exact, {100 * agree['first_word']:.0f} % first word" if agree else ""
        for unit, t in e["timing"].items():
            score = e["scores"].get(unit.split("/")[0])
            score_s = f"{100 * score:.1f}" if score is not None else ""
            lines.append(f"| {e['label']} | {unit} | {t['tasks']} | {t['seconds']:.1f} | {t['tasks_per_second']:.2f} "
                         f"| {score_s} | {e['completion_tokens'] / e['seconds']:.1f} | {agree_s} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_eval_arguments(p)
    p.set_defaults(limit=40)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", action="store_true", help="start llama.cpp's server on the embedded GGUF")
    where.add_argument("--url", help="a running endpoint: openai:BASE_URL#MODEL")
    p.add_argument("--levels", default="1,4,16", help="comma-separated concurrency levels")
    p.add_argument("--out", default=None, help="folder for bench_endpoint.json")
    args = p.parse_args(argv)

    from contextlib import nullcontext

    from genenv.eval.model_server import LlamaServer
    from genenv.runtime.policies import make_policy

    root = resolve_data_dir(args.data_dir)
    benchmarks = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
    eval_kwargs = dict(split=args.split, data_dir=None if root is None else str(root), limit=args.limit,
                       options=parse_options(args.option),
                       spec=RolloutSpec(max_new_tokens=args.max_new_tokens, env_kwargs=parse_options(args.env_option),
                                        env_workers=args.env_workers))
    entries: list[dict[str, Any]] = []
    reference = None
    if args.policy != "none":
        reference, entry = run(policy_from_args(args), f"local {args.policy}", benchmarks, **eval_kwargs)
        entries.append(entry)
        print(table(entries[-1:]), flush=True)
    with LlamaServer() if args.server else nullcontext() as server:
        for level in [int(x) for x in args.levels.split(",")]:
            kwargs = dict(concurrency=level, timeout=args.timeout, max_retries=args.max_retries)
            policy = server.policy(**kwargs) if server else make_policy(args.url, **kwargs)
            res, entry = run(policy, f"endpoint, concurrency {level}", benchmarks, **eval_kwargs)
            if reference is not None:
                entry["agreement"] = output_agreement(reference, res)
            entries.append(entry)
            print(table(entries[-1:]), flush=True)
    print("\n" + table(entries))
    if args.out:
        write_json(Path(args.out) / "bench_endpoint.json", entries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
