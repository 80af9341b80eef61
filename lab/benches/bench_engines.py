"""Rollout throughput of the agent's training rollout through each sampler, side by side in one run (a benchmark
script that prints figures, not a test).

    python lab/benches/bench_engines.py --out lab/figures/engine_figures_<host>.json   # GENENV_LLAMA_SERVER or PATH: llama-server

Workloads (``--workloads``), each the agent's training rollout as ``genenv-train`` configures it, played by the
one episode loop (`play_episodes`) as the trainer plays it:

- ``bamboogle``: ``genenv-train benchmark=bamboogle`` (single turn);
- ``twx``: the shipped powered TextWorldExpress experiment's rollout (``bench_rollout.POWERED_TWX``: 4-room Coin
  Collector games, 4 tasks x 4 episodes, 16 tokens per command, multi-turn).

Samplers (``--engines``), interleaved per repeat:

- ``continuous``: the project's own CPU engine as the trainer runs it by default (`TransformersPolicy`, its
  continuous batch, prefix cache and decoding attention);
- ``generate``: transformers' plain ``generate``, one padded batch per turn, SDPA, no KV kept between turns
  (`TransformersPolicy` with the reuse off);
- ``llama-server``: llama.cpp's ``llama-server`` (`LlamaServerSampler`) on the same weights written as GGUF
  (``--gguf-dtype``), one slot per episode, prompt caching across turns; its ``sync`` seconds are one weight sync
  (GGUF written from the state dict, the server restarted on it), measured after the rollouts.

Printed and written per workload and sampler: episodes, generated tokens, wall seconds, tokens/s (median over
``--repeats``), and the ratio to ``continuous``; ``default`` names the fastest sampler of each workload.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_rollout import POWERED_TWX, host  # noqa: E402

from genenv.envs.data import write_json  # noqa: E402

WORKLOADS = {"bamboogle": ["benchmark=bamboogle"], "twx": ["benchmark=twx", *POWERED_TWX]}


def rollout(policy, overrides: Sequence[str]) -> dict[str, Any]:
    """One training rollout of the composed config (``overrides``) through ``policy``: episodes, turns, generated
    tokens (the responses' token ids), wall seconds, tokens/s, mean reward."""
    from genenv.benchmarks.registry import get_benchmark
    from genenv.runtime.episodes import RolloutSpec, play_episodes
    from genenv.trainer.cli import compose_config
    from genenv.trainer.settings import env_kwargs, response_budget

    cfg = compose_config(list(overrides))
    spec = get_benchmark(cfg.benchmark.name, cfg.data_dir)
    a = cfg.agent
    pool = spec.load(split="train", **spec.pool_options(cfg.benchmark.get("seed_options")))
    start = time.perf_counter()
    out = play_episodes(pool[:a.batch_tasks], policy,
                        RolloutSpec(n=a.n, temperature=a.temperature, max_new_tokens=a.max_new_tokens,
                                    env_kwargs=env_kwargs(cfg), max_response_tokens=response_budget(cfg)),
                        chunk_size=int(a.policy.gen_batch_size))
    wall = time.perf_counter() - start
    trajs = out.trajectories
    tokens = sum(len(t.response_ids) for traj in trajs for t in traj.turns)
    return {"episodes": len(trajs), "turns": sum(len(t.turns) for t in trajs), "tokens": tokens, "wall": wall,
            "tokens_per_second": tokens / wall, "mean_reward": sum(t.reward for t in trajs) / max(1, len(trajs)),
            "episodes_per_slot": a.batch_tasks * a.n}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workloads", default="bamboogle,twx")
    p.add_argument("--engines", default="continuous,generate,llama-server")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--gguf-dtype", default="f32", help="the llama-server weights: f32 | f16 | bf16 | q8_0")
    p.add_argument("--server-args", default="", help="more llama-server options, space-separated")
    p.add_argument("--threads", type=int, default=None, help="llama-server threads (default: llama.cpp's)")
    p.add_argument("--out", default=None, help="a .json file")
    args = p.parse_args(argv)

    import torch

    from genenv.runtime.models import smollm2_gguf_path
    from genenv.runtime.policies import TransformersPolicy
    from genenv.runtime.samplers.llama_server import LlamaServerSampler
    from genenv.runtime.threads import prepare_cpu

    prepare_cpu("auto")
    torch.manual_seed(0)
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    own = TransformersPolicy("smollm2")
    plain = TransformersPolicy("smollm2", prefix_cache_tokens=0, decode_attention=False, continuous_batching=False) \
        if "generate" in engines else None
    server = None
    if "llama-server" in engines:
        server = LlamaServerSampler(own.tokenizer, own.model.state_dict(), smollm2_gguf_path(), dtype=args.gguf_dtype,
                                    slots=16, context=4096, threads=args.threads, server_args=args.server_args.split())
    policies = {"continuous": own, "generate": plain, "llama-server": server}
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        for rep in range(args.repeats):
            for w in workloads:
                for e in engines:
                    row = rollout(policies[e], WORKLOADS[w])
                    runs.setdefault((w, e), []).append(row)
                    print(f"repeat {rep} {w:10s} {e:13s} {row['episodes']:3d} episodes {row['tokens']:5d} tokens "
                          f"{row['wall']:7.1f} s {row['tokens_per_second']:7.1f} tok/s reward {row['mean_reward']:.3f}",
                          flush=True)
        sync = [server.load_weights(own.model.state_dict()) for _ in range(2)] if server is not None else []
    finally:
        if server is not None:
            server.close()
    figures: dict[str, Any] = {"host": host(), "gguf_dtype": args.gguf_dtype, "server_args": args.server_args, "torch_dtype": str(own.model.dtype),
                               "autocast": own.autocast_dtype, "repeats": args.repeats, "workloads": {}}
    for w in workloads:
        rows = {e: runs[(w, e)] for e in engines}
        med = {e: statistics.median(r["tokens_per_second"] for r in rs) for e, rs in rows.items()}
        base = med.get("continuous")
        entry = {e: {"tokens_per_second": med[e], "over_continuous": med[e] / base if base else None,
                     "runs": rows[e]} for e in engines}
        if server is not None:
            entry["llama-server"]["sync_seconds"] = statistics.median(sync)
        figures["workloads"][w] = {"engines": entry, "default": max(med, key=med.get)}
        print(f"{w}: " + ", ".join(f"{e} {med[e]:.1f} tok/s" + (f" ({med[e] / base:.2f}x)" if base else "")
                                   for e in engines) + (f"; llama-server sync {statistics.median(sync):.2f} s"
                                                        if sync else ""))
    if args.out:
        write_json(Path(args.out), figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
