"""``genenv-eval``: run a policy over benchmarks through the environments and print a leaderboard.

Example::

    genenv-eval --benchmarks bfcl,bamboogle --policy smollm2 --limit 20
    genenv-eval --benchmarks bfcl --categories all --policy oracle        # proves env and checker agree
    genenv-eval --benchmarks bamboogle --policy openai:http://localhost:8000/v1#Qwen2.5-7B-Instruct

Writes ``<out>/tasks.jsonl`` (per task: prompt, raw output, parsed action, reward, error), ``summary.json``,
``summary.csv``, ``summary.md`` and ``leaderboard.png``, and prints the table beside the paper's Table 1 rows.
Every metric carries its protocol label; the paper's columns follow other protocols (see README).
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.spec import Metric
from genenv.envs.data import is_packaged, resolve_data_dir


@dataclass
class EvalResult:
    """Outcome of :func:`evaluate`: ``metrics`` (labelled), ``headlines`` (benchmark → metric beside the paper's
    column), ``rows`` (per-task records), ``seconds`` and ``tasks_per_second`` per unit."""

    policy: str
    metrics: list[Metric] = field(default_factory=list)
    headlines: dict[str, Metric] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    timing: dict[str, dict[str, float]] = field(default_factory=dict)


def evaluate(policy, benchmarks: Sequence[str], split: str = "test", data_dir: str | None = None,
             limit: int | None = None, options: dict[str, dict[str, Any]] | None = None,
             max_new_tokens: int = 256, progress: bool = True,
             env_kwargs: dict[str, dict[str, Any]] | None = None, env_workers: int | None = None) -> EvalResult:
    """Greedy single-sample evaluation of ``policy`` on each benchmark's units (multi-step envs: one episode
    per task, played to the end).

    Args:
        policy: a :class:`~genenv.trainer.policies.Policy`.
        benchmarks: registry names.
        split: ``"test"`` (official) or ``"heldout"`` (the co-evolution held-out split).
        data_dir: data directory (default ``$GENENV_DATA_DIR``, else the packaged samples).
        limit: at most this many tasks per unit (first ones, file order).
        options: per-benchmark loader options, e.g. ``{"bfcl": {"category": "all"}}``.
        env_kwargs: per-benchmark env constructor options, e.g. ``{"twx": {"max_steps": 30}}``.
        env_workers: multi-step envs: play the episodes in this many worker processes (the CPU budget for the
            envs; ``None`` / 0: in this process).
    """
    from genenv.trainer.rollout import rollout_tasks

    result = EvalResult(policy=getattr(policy, "name", type(policy).__name__))
    for bench in benchmarks:
        spec = get_benchmark(bench)
        bench_metrics: list[Metric] = []
        for unit, opts in spec.eval_units((options or {}).get(bench, {})):
            tasks = spec.load(data_dir=data_dir, **{"split": split, **opts})[:limit]  # a unit may fix its split
            start = time.perf_counter()
            trajs = rollout_tasks(tasks, policy, n=1, temperature=0.0, max_new_tokens=max_new_tokens,
                                  progress=unit if progress else None, env_kwargs=env_kwargs,
                                  env_workers=env_workers)
            seconds = time.perf_counter() - start
            result.timing[unit] = {"tasks": len(tasks), "seconds": seconds,
                                   "tasks_per_second": len(tasks) / seconds if seconds > 0 else float("inf")}
            bench_metrics += spec.summarize(unit, trajs)
            for t in trajs:
                result.rows.append({
                    "unit": unit, "task_id": t.task.id, "prompt": t.task.prompt, "raw_output": t.text,
                    "parsed_action": t.info.get("parsed_action"), "reward": t.reward, "success": t.success,
                    "error": t.info.get("error", ""),
                    **{k: t.info[k] for k in ("em", "f1", "error_type") if k in t.info}})
        result.metrics += bench_metrics
        head = spec.headline(bench_metrics)
        if head:
            result.headlines[bench] = head
    return result


def parse_options(items: Sequence[str], base: dict[str, dict[str, Any]] | None = None
                  ) -> dict[str, dict[str, Any]]:
    """``["twx.games=coin", "twx.episodes=5"]`` → ``{"twx": {"games": "coin", "episodes": 5}}`` (values parsed
    as YAML), merged over ``base``.

    Raises:
        SystemExit: an item is not ``BENCH.KEY=VALUE``.
    """
    import yaml

    out = {k: dict(v) for k, v in (base or {}).items()}
    for item in items:
        key, sep, value = item.partition("=")
        bench, dot, name = key.partition(".")
        if not (sep and dot and bench and name):
            raise SystemExit(f"option {item!r} is not BENCH.KEY=VALUE")
        out.setdefault(bench, {})[name] = yaml.safe_load(value)
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``genenv-eval``."""
    p = argparse.ArgumentParser(prog="genenv-eval", description="Evaluate a policy and print a leaderboard.")
    p.add_argument("--benchmarks", default="bfcl,bamboogle", help="comma-separated registry names")
    p.add_argument("--policy", default="smollm2",
                   help="oracle | random[:SEED] (text games) | smollm2 | hf:PATH | PATH | openai:BASE_URL#MODEL")
    p.add_argument("--categories", default="simple_python",
                   help="BFCL categories: comma list or 'all' (default simple_python)")
    p.add_argument("--option", action="append", default=[], metavar="BENCH.KEY=VALUE",
                   help="loader option of one benchmark, e.g. twx.games=coin (repeatable; VALUE is YAML)")
    p.add_argument("--env-option", action="append", default=[], metavar="BENCH.KEY=VALUE",
                   help="env constructor option, e.g. twx.max_steps=30 (repeatable; VALUE is YAML)")
    p.add_argument("--split", default="test", choices=["test", "heldout", "train"])
    p.add_argument("--limit", type=int, default=None, help="at most N tasks per category / benchmark")
    p.add_argument("--data-dir", default=None, help="data dir (default $GENENV_DATA_DIR, else packaged samples)")
    p.add_argument("--out", default=None, help="results folder (default results/<policy>-<time>)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=16, help="local models: prompts per generate call")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--env-workers", type=int, default=0,
                   help="multi-step envs: worker processes for the episodes (the envs' CPU budget; 0 = in-process)")
    args = p.parse_args(argv)

    from genenv.eval.report import leaderboard_markdown, write_results
    from genenv.trainer.policies import make_policy

    benchmarks = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
    for b in benchmarks:
        get_benchmark(b)  # fail fast on a typo
    data_dir = resolve_data_dir(args.data_dir)
    if is_packaged(data_dir):
        print(f"note: evaluating on the packaged samples in {data_dir} (set GENENV_DATA_DIR for the full data)",
              file=sys.stderr)
    policy = make_policy(args.policy, dtype=args.dtype, device=args.device, batch_size=args.batch_size)
    options = parse_options(args.option, {"bfcl": {"category": args.categories}})
    result = evaluate(policy, benchmarks, split=args.split, data_dir=str(data_dir), limit=args.limit,
                      options=options, max_new_tokens=args.max_new_tokens,
                      env_kwargs=parse_options(args.env_option), env_workers=args.env_workers)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or f"results/{args.policy.replace('/', '_').replace(':', '_')}-{stamp}")
    write_results(result, out, data_dir=str(data_dir), split=args.split)
    print(leaderboard_markdown(result, data_dir=str(data_dir)))
    for unit, t in result.timing.items():
        print(f"{unit}: {t['tasks']} tasks in {t['seconds']:.1f} s ({t['tasks_per_second']:.2f} tasks/s)")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
