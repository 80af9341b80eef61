"""Where a training rollout's time goes: tokens/s through the episode loop against the engine alone, and the share
of wall time in env steps and rewards (a benchmark script that prints figures, not a test).

    python scripts/bench_rollout.py --benchmarks bfcl,bamboogle,twx,alfworld

Per benchmark: its default training rollout as ``genenv-train benchmark=<name>`` configures it (the composed
config's ``agent.batch_tasks`` tasks of the seed pool x ``agent.n`` episodes at ``agent.temperature``,
``agent.max_new_tokens`` per turn, the response budget and the run's env options), through
:func:`~genenv.runtime.episodes.play_episodes` with the local policy, as the trainer's rollout runs it. ``engine`` seconds are the policy's ``generate`` calls inside the loop
(the same calls on the same token streams), ``env`` seconds the env resets and steps (parsing, execution and the
reward), ``other`` the rest (prompt building, chat-template encoding, bookkeeping). Speed goals:
loop tokens/s ≥ 0.9 x engine tokens/s, env ≤ 5 % of the wall time. ``prompt tokens reused``: the share of
prompt tokens whose KV states came from an earlier turn (:mod:`~genenv.runtime.prefix_cache`) instead of a
new prefill. ``--before-reuse`` runs the engine as it was before that reuse and the CPU decoding attention
(:mod:`~genenv.runtime.attention`), for before/after tables. ``--out DIR`` writes ``bench_rollout.json``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from genenv.benchmarks.registry import get_benchmark
from genenv.envs.data import write_json


def measure(bench: str, policy, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """One default training rollout of ``bench`` (``genenv-train`` config with ``overrides``), after an untimed
    oracle episode; returns ``episodes``, ``turns``, ``tokens`` (generated), ``prompt_tokens`` (the turns' prompts),
    ``reused_prompt_share`` (0-1: prompt tokens whose KV states came from earlier calls; 0 without a prefix
    cache), ``wall`` / ``engine`` / ``env`` / ``other`` seconds and the loop's and the engine's tokens/s."""
    from genenv.trainer.cli import compose_config
    from genenv.runtime.episodes import RolloutSpec, play_episodes
    from genenv.runtime.policies import OraclePolicy
    from genenv.trainer.settings import env_kwargs, response_budget

    cfg = compose_config([f"benchmark={bench}", *overrides])
    spec = get_benchmark(bench, cfg.data_dir)
    a = cfg.agent
    pool = spec.load(split="train", **spec.pool_options(cfg.benchmark.get("seed_options")))  # the loop's seed pool
    # untimed: one oracle episode of a task outside the measured ones pays the first-use costs a training process
    # has paid before its rollouts (imports such as bfcl-eval's checker, data loading)
    play_episodes(pool[-1:], OraclePolicy(), RolloutSpec(env_kwargs=env_kwargs(cfg)))
    before = policy.generated_tokens
    store = getattr(policy, "prefix_cache", None)
    looked, reused = (store.prompt_tokens, store.reused_tokens) if store is not None else (0, 0)
    start = time.perf_counter()
    rollout = play_episodes(pool[:a.batch_tasks], policy,
                            RolloutSpec(n=a.n, temperature=a.temperature, max_new_tokens=a.max_new_tokens,
                                        env_kwargs=env_kwargs(cfg), max_response_tokens=response_budget(cfg)))
    wall = time.perf_counter() - start
    trajs, tokens = rollout.trajectories, policy.generated_tokens - before
    engine, env = rollout.timings.generate_seconds, rollout.timings.env_seconds
    prompt_tokens = sum(t.usage.get("prompt_tokens", 0) for traj in trajs for t in traj.turns)
    reused_share = (store.reused_tokens - reused) / max(1, store.prompt_tokens - looked) if store is not None else 0.0
    return {"benchmark": bench, "episodes": len(trajs), "turns": sum(len(t.turns) for t in trajs), "tokens": tokens,
            "prompt_tokens": prompt_tokens, "reused_prompt_share": reused_share,
            "wall": wall, "engine": engine, "env": env, "other": wall - engine - env,
            "loop_tokens_per_second": tokens / wall, "engine_tokens_per_second": tokens / engine if engine else 0.0}


def table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown: one row per benchmark."""
    lines = ["| benchmark | episodes | turns | tokens | prompt tokens reused | wall s | engine s | env s | other s | "
             "loop tok/s | engine tok/s | loop / engine | env share |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['benchmark']} | {r['episodes']} | {r['turns']} | {r['tokens']} | "
                     f"{100 * r.get('reused_prompt_share', 0.0):.0f} % | {r['wall']:.1f} | "
                     f"{r['engine']:.1f} | {r['env']:.1f} | {r['other']:.1f} | {r['loop_tokens_per_second']:.1f} | "
                     f"{r['engine_tokens_per_second']:.1f} | "
                     f"{r['loop_tokens_per_second'] / max(r['engine_tokens_per_second'], 1e-9):.2f} | "
                     f"{100 * r['env'] / r['wall']:.1f} % |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--benchmarks", default="bfcl,bamboogle,twx,alfworld")
    p.add_argument("--policy", default="smollm2", help="a local model: smollm2 | hf:PATH | PATH")
    p.add_argument("--before-reuse", action="store_true",
                   help="the engine as it was before KV reuse across turns: every prompt prefilled in full, SDPA decoding")
    p.add_argument("--dtype", default="auto", help="the policy's weights: auto | float32 | bfloat16")
    p.add_argument("overrides", nargs="*", help="genenv-train overrides for every benchmark, e.g. agent.n=8")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)

    import torch

    from genenv.runtime.policies import TransformersPolicy

    torch.manual_seed(0)
    before = {"prefix_cache_tokens": 0, "decode_attention": False} if args.before_reuse else {}
    policy = TransformersPolicy(args.policy.removeprefix("hf:"), dtype=args.dtype, **before)
    rows = []
    for bench in [b.strip() for b in args.benchmarks.split(",") if b.strip()]:
        rows.append(measure(bench, policy, args.overrides))
        print(table(rows[-1:]), flush=True)
    print("\n" + table(rows))
    if args.out:
        write_json(Path(args.out) / "bench_rollout.json", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
