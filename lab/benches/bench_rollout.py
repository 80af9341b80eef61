"""Where a training rollout's time goes, and how close the episode loop comes to the engine's best for the same
work (a benchmark script that prints figures, not a test).

    python lab/benches/bench_rollout.py --benchmarks bamboogle,twx --powered-twx --out lab/figures/rollout_figures.json

Per benchmark: its default training rollout as ``genenv-train benchmark=<name>`` configures it (the composed
config's ``agent.batch_tasks`` tasks of the seed pool x ``agent.n`` episodes at ``agent.temperature``,
``agent.max_new_tokens`` per turn, the response budget and the run's env options), through
`play_episodes` with the local policy, as the trainer's rollout runs it;
``--powered-twx``: TextWorldExpress as the shipped powered experiment runs it (``results/twx_informative.tar.xz``:
4-room Coin Collector games, 4 tasks x 4 rollouts, 16 tokens per command, a 2,048-token response budget).

Printed per benchmark:

- the split of the wall time: ``engine`` seconds are the policy's ``generate`` calls inside the loop, ``env`` the
  env resets and steps (parsing, execution and the reward), ``other`` the rest (prompt building, chat-template
  encoding, bookkeeping);
- the profile of the model's forward passes inside the loop (every call is timed): ``decode steps`` (single-token
  passes), the rows they computed against the tokens kept (``useful decode rows``: rows of a finished sequence are
  still computed until its batch ends), ``prefill tokens`` (prompt tokens fed, padding excluded; reused KV states
  are not fed again, `prefix_cache`) and the ``padding share`` of the fed positions, the
  seconds in decode steps, in prefill passes and in generation outside the model (sampling, logits processing,
  cache bookkeeping);
- the engine's best for the same work, measured in the same run: one ``generate`` call of one full batch (all
  the rollout's episodes, no episode logic) from the episodes' first prompts, every row generating exactly the
  mean tokens an episode generated (``min_new_tokens`` = ``max_new_tokens``), at the rollout's temperature; and
  one unpadded prefill pass of the same number of tokens per row. ``loop / engine`` = the loop's generated
  tokens/s over the reference's. A multi-turn loop must also prefill each turn's observation, which the one-batch
  reference does not: ``loop / engine (work)`` prices the loop's prefill tokens at the reference's prefill rate
  and its generated tokens at the reference's decoding rate, and divides that time by the loop's wall time.

Each benchmark is measured once per episode loop of ``--paths`` (default ``continuous,lock-step``, interleaved):
``continuous``, the policy's continuous batch (`continuous`; its packed passes are read
from its counters: a pass that feeds prompt tokens counts as a prefill pass, the decoding rows riding along), and
``lock-step``, one ``generate`` call per turn, and ``static``, lock step through transformers' ``generate`` with a
static KV cache (compiled decoding on a GPU; ``TransformersPolicy(static_cache=True)``; its forward passes are
not timed one by one, which would break the compiled graph, so its profile is empty). ``longest episode tokens``: the most tokens one episode generated;
its turns are sequential, so no loop decodes them in fewer passes, while the one-batch reference decodes only the
mean: ``loop / engine (sequential)`` prices the longest episode's tokens at the reference's seconds per decoding
step and the observation prefill as ``(work)`` does, over the loop's wall time. ``engine at the episodes' lengths``
measures that bound instead of pricing it: one batch of the same first prompts through the engine's decoding loop,
each row generating exactly as many tokens as its episode did (`engine_reference_lengths`; the same prompts
and lengths, no episode logic, no observations to prefill), and ``loop / engine (lengths)`` is the loop's
tokens/s over its.

``--held-out N`` also plays the first N test tasks of each benchmark (or of ``--held-out-benchmarks``) greedily through each path, as a held-out
evaluation does (`measure_held_out`), and prints their time and a digest of the responses.

``prompt tokens reused``: the share of prompt tokens whose KV states came from an earlier turn instead of a new
prefill. ``--before-reuse`` runs the engine as it was before that reuse and the CPU decoding attention
(`attention`), for before/after tables. ``--out FILE.json`` writes the rows with the host's
CPU model, core count, torch threads and the policy's dtype.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Sequence

from genenv.benchmarks.registry import get_benchmark
from genenv.envs.data import write_json

POWERED_TWX = ["+benchmark.seed_options.params.coin='numLocations=4,numDistractorItems=0,includeDoors=0'",
               "agent.batch_tasks=4", "agent.n=4", "agent.max_new_tokens=16", "agent.response_length=2048"]
"""The shipped powered TextWorldExpress experiment's rollout settings (``results/twx_informative.tar.xz``)."""


@contextmanager
def forward_profile(model, enabled: bool = True):
    """Time every forward pass of ``model`` while the block runs; yields the list it fills with one
    ``(rows, width, fed_tokens, seconds)`` per pass (``width``: positions fed per row, ``fed_tokens``: those not
    padding, from the pass's attention mask over its last ``width`` columns); ``enabled`` false: the list stays
    empty and the model untouched."""
    calls: list[tuple[int, int, int, float]] = []
    if not enabled:
        yield calls
        return
    inner = model.forward

    @functools.wraps(inner)
    def timed(*args, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        mask = kwargs.get("attention_mask")
        rows, width = ids.shape
        fed = int(mask[:, -width:].sum()) if mask is not None and mask.dim() == 2 else rows * width
        t0 = time.perf_counter()
        out = inner(*args, **kwargs)
        calls.append((rows, width, fed, time.perf_counter() - t0))
        return out

    model.forward = timed
    try:
        yield calls
    finally:
        del model.forward  # the class's forward again


def profile(calls: Sequence[tuple[int, int, int, float]], generated: int, generate_seconds: float
            ) -> dict[str, Any]:
    """Decode and prefill figures of one rollout's forward passes (see the module docstring)."""
    decode = [c for c in calls if c[1] == 1]
    prefill = [c for c in calls if c[1] > 1]
    decode_rows = sum(c[0] for c in decode)
    fed = sum(c[2] for c in prefill)
    positions = sum(c[0] * c[1] for c in prefill)
    forward_s = sum(c[3] for c in calls)
    return {"decode_steps": len(decode), "decode_rows": decode_rows,
            "mean_rows_per_step": decode_rows / max(1, len(decode)),
            "useful_decode_share": generated / max(1, decode_rows),
            "decode_seconds": sum(c[3] for c in decode), "prefill_passes": len(prefill), "prefill_tokens": fed,
            "padding_share": 1 - fed / max(1, positions), "prefill_seconds": sum(c[3] for c in prefill),
            "prefill_tokens_per_second": fed / max(1e-9, sum(c[3] for c in prefill)),
            "generate_outside_model_seconds": max(0.0, generate_seconds - forward_s)}


def synchronize(device) -> None:
    """Wait for the GPU's queued work (timings on a GPU); nothing on the CPU."""
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize(device)


def engine_reference(policy, first_prompts: Sequence[Sequence[int]], new_tokens: int, temperature: float
                     ) -> dict[str, Any]:
    """The engine alone on the rollout's batch: one ``generate`` call of every first prompt, each row generating
    exactly ``new_tokens`` tokens (seconds and tokens/s), and one unpadded prefill pass of the prompts cut to the
    shortest (prefill tokens/s)."""
    import torch

    from genenv.runtime._builtin.kv_cache import growing_cache
    from genenv.runtime.policies import left_padded, sampling_kwargs

    model, tok = policy.model, policy.tokenizer
    ids, mask = left_padded(first_prompts, tok.pad_token_id)
    kwargs: dict[str, Any] = dict(min_new_tokens=new_tokens, max_new_tokens=new_tokens, eos_token_id=tok.stop_token_ids,
                                  pad_token_id=tok.pad_token_id, **sampling_kwargs(temperature))
    shortest = min(map(len, first_prompts))
    rows = torch.tensor([list(p[:shortest]) for p in first_prompts], dtype=torch.long)
    with torch.no_grad(), policy.precision():
        t0 = time.perf_counter()
        model(input_ids=rows.to(policy.device), logits_to_keep=1)
        synchronize(policy.device)
        prefill_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        model.generate(input_ids=ids.to(policy.device), attention_mask=mask.to(policy.device),
                       past_key_values=growing_cache(model.config), **kwargs)
        synchronize(policy.device)
        generate_s = time.perf_counter() - t0
    tokens = len(first_prompts) * new_tokens
    return {"rows": len(first_prompts), "new_tokens_per_row": new_tokens, "seconds": generate_s,
            "tokens_per_second": tokens / generate_s, "prefill_tokens_per_second": rows.numel() / prefill_s}


def engine_reference_lengths(policy, first_prompts: Sequence[Sequence[int]], lengths: Sequence[int],
                             temperature: float) -> dict[str, Any]:
    """The engine alone on the rollout's prompts *and lengths*: one batch of every first prompt through the local
    engine's decoding loop (`decode`, rows retire when done), row ``i`` generating
    exactly ``lengths[i]`` tokens (its episode's generated tokens; no stop token ends it), no episode logic.
    Returns ``seconds``, ``tokens`` and ``tokens_per_second``."""
    import torch

    from genenv.runtime._builtin.decoding import decode
    from genenv.runtime._builtin.kv_cache import growing_cache
    from genenv.runtime.policies import left_padded

    model, tok = policy.model, policy.tokenizer
    keep = [i for i, n in enumerate(lengths) if n > 0]
    ids, mask = left_padded([first_prompts[i] for i in keep], tok.pad_token_id)
    caps = [int(lengths[i]) for i in keep]
    with torch.no_grad(), policy.precision():
        t0 = time.perf_counter()
        out = decode(model, ids.to(policy.device), mask.to(policy.device), growing_cache(model.config), max(caps),
                     temperature, stop_ids=[], caps=caps)
        seconds = time.perf_counter() - t0
    tokens = sum(map(len, out))
    return {"rows": len(keep), "seconds": seconds, "tokens": tokens, "tokens_per_second": tokens / seconds}


def continuous_profile(counts: dict[str, float], generated: int, generate_seconds: float) -> dict[str, Any]:
    """`profile`'s figures from a continuous batch's counters (``counts``: the change of
    ``policy.continuous_counters`` over the rollout, `COUNTERS`). Its passes
    are packed (no padding); a pass that feeds prompt tokens counts as a prefill pass, its decoding rows riding
    along, so ``decode_steps`` counts every pass and ``prefill_seconds`` the passes with prompt tokens."""
    forward_s = counts["decode_seconds"] + counts["prefill_seconds"]
    return {"decode_steps": counts["passes"], "decode_rows": counts["decode_rows"],
            "mean_rows_per_step": counts["decode_rows"] / max(1, counts["passes"]),
            "useful_decode_share": generated / max(1, counts["decode_rows"]),
            "decode_seconds": counts["decode_seconds"], "prefill_passes": counts["prefill_passes"],
            "prefill_tokens": counts["prefill_tokens"], "padding_share": 0.0,
            "prefill_seconds": counts["prefill_seconds"],
            "prefill_tokens_per_second": counts["prefill_tokens"] / max(1e-9, counts["prefill_seconds"]),
            "generate_outside_model_seconds": max(0.0, generate_seconds - forward_s)}


def measure(bench: str, policy, overrides: Sequence[str] = (), reference: bool = True,
            path: str = "continuous") -> dict[str, Any]:
    """One default training rollout of ``bench`` (``genenv-train`` config with ``overrides``), after an untimed
    gold episode; returns ``episodes``, ``turns``, ``tokens`` (generated), ``prompt_tokens`` (the turns' prompts),
    ``reused_prompt_share`` (0-1: prompt tokens whose KV states came from earlier calls; 0 without a prefix
    cache), ``wall`` / ``engine`` / ``env`` / ``other`` seconds, the loop's and the engine's tokens/s, the
    forward-pass ``profile`` (`profile`) and, with ``reference``, the engine's best for the same work
    (`engine_reference`) with the two ratios of the module docstring. ``path``: ``continuous`` (the
    policy's continuous batch, `continuous`), ``lock-step`` (one ``generate`` call per
    turn) or ``static`` (lock step into a static KV cache, the policy's ``static_cache``)."""
    from genenv.trainer.cli import compose_config
    from genenv.runtime.episodes import RolloutSpec, play_episodes
    from genenv.runtime.policies import GoldPolicy
    from genenv.trainer.settings import env_kwargs

    cfg = compose_config([f"benchmark={bench}", *overrides])
    spec = get_benchmark(bench, cfg.data_dir)
    a = cfg.agent
    pool = spec.load(split="train", **spec.pool_options(cfg.benchmark.get("seed_options")))  # the loop's seed pool
    # untimed: one gold episode of a task outside the measured ones pays the first-use costs a training process
    # has paid before its rollouts (imports such as bfcl-eval's checker, data loading)
    play_episodes(pool[-1:], GoldPolicy(), RolloutSpec(env_kwargs=env_kwargs(cfg)))
    policy.batch_size = int(a.policy.gen_batch_size)  # rows per generate call, as the run's agent has them
    with sampling_path(policy, path):
        return _measure(bench, policy, cfg, pool, reference, path, overrides)


@contextmanager
def sampling_path(policy, path: str):
    """Within the block ``policy`` samples through ``path``: ``continuous``, ``lock-step`` or ``static``
    (`use_static_cache`); its settings return afterwards."""
    saved = policy.static_cache, policy.continuous_batching
    policy.use_static_cache(path == "static")
    policy.continuous_batching = path == "continuous"
    try:
        yield
    finally:
        policy.use_static_cache(saved[0])
        policy.continuous_batching = saved[1]


def _measure(bench: str, policy, cfg, pool, reference: bool, path: str, overrides: Sequence[str]) -> dict[str, Any]:
    """`measure` once the policy is set up for ``path``."""
    from genenv.runtime.episodes import RolloutSpec, play_episodes
    from genenv.trainer.settings import env_kwargs, response_budget

    a = cfg.agent
    counted = dict(policy.continuous_counters)
    before, generate_before = policy.generated_tokens, policy.generate_seconds
    store = getattr(policy, "prefix_cache", None)
    looked, reused = (store.prompt_tokens, store.reused_tokens) if store is not None else (0, 0)
    start = time.perf_counter()
    with forward_profile(policy.model, enabled=path != "static") as calls:
        rollout = play_episodes(pool[:a.batch_tasks], policy,
                                RolloutSpec(n=a.n, temperature=a.temperature, max_new_tokens=a.max_new_tokens,
                                            env_kwargs=env_kwargs(cfg), max_response_tokens=response_budget(cfg)),
                                chunk_size=policy.batch_size)
    wall = time.perf_counter() - start
    trajs, tokens = rollout.trajectories, policy.generated_tokens - before
    engine, env = rollout.timings.generate_seconds, rollout.timings.env_seconds
    prompt_tokens = sum(t.usage.get("prompt_tokens", 0) for traj in trajs for t in traj.turns)
    reused_share = (store.reused_tokens - reused) / max(1, store.prompt_tokens - looked) if store is not None else 0.0
    generate_s = policy.generate_seconds - generate_before
    counts = {k: v - counted.get(k, 0) for k, v in policy.continuous_counters.items()}
    if path == "continuous":
        reused_share = counts["reused_tokens"] / max(1, counts["prompt_tokens"])
    row = {"benchmark": bench, "path": path, "overrides": list(overrides), "episodes": len(trajs),
           "longest_episode_tokens": max((sum(len(t.response_ids) for t in traj.turns) for traj in trajs), default=0),
           "turns": sum(len(t.turns) for t in trajs), "tokens": tokens,
           "prompt_tokens": prompt_tokens, "reused_prompt_share": reused_share,
           "wall": wall, "engine": engine, "env": env, "other": wall - engine - env,
           "loop_tokens_per_second": tokens / wall, "engine_tokens_per_second": tokens / engine if engine else 0.0,
           "profile": (continuous_profile(counts, tokens, generate_s) if path == "continuous"
                       else profile(calls, tokens, generate_s))}
    played = [traj for traj in trajs if traj.turns and traj.turns[0].prompt_ids]
    firsts = [traj.turns[0].prompt_ids for traj in played]
    if reference and firsts and tokens:
        own = engine_reference_lengths(policy, firsts, [sum(len(t.response_ids) for t in traj.turns)
                                                        for traj in played], float(a.temperature))
        row.update(reference_lengths=own,
                   loop_over_engine_lengths=row["loop_tokens_per_second"] / own["tokens_per_second"])
        ref = engine_reference(policy, firsts, max(1, round(tokens / len(trajs))), float(a.temperature))
        first_tokens = sum(map(len, firsts))
        observation_tokens = max(0, row["profile"]["prefill_tokens"] - first_tokens)
        work_seconds = ref["seconds"] * tokens / (ref["rows"] * ref["new_tokens_per_row"]) \
            + observation_tokens / ref["prefill_tokens_per_second"]
        sequential_seconds = ref["seconds"] / ref["new_tokens_per_row"] * row["longest_episode_tokens"] \
            + observation_tokens / ref["prefill_tokens_per_second"]
        row.update(reference=ref, loop_over_engine=row["loop_tokens_per_second"] / ref["tokens_per_second"],
                   loop_over_engine_work=work_seconds / wall, loop_over_engine_sequential=sequential_seconds / wall)
    return row


def measure_held_out(bench: str, policy, limit: int | None, path: str) -> dict[str, Any]:
    """Greedy play of the first ``limit`` tasks of ``bench``'s test split (one episode each, the run's
    ``agent.max_new_tokens``, rows per batch as the run's agent has them), as a held-out evaluation plays them,
    through ``path`` (``continuous`` / ``lock-step`` / ``static``). Returns ``tasks``, ``tokens``, ``wall``,
    tokens/s, the mean reward and ``responses`` (a SHA-256 of every turn's response token ids: two paths that played
    the same episodes give the same digest)."""
    import hashlib
    import json

    from genenv.runtime.episodes import RolloutSpec, play_episodes
    from genenv.trainer.cli import compose_config
    from genenv.trainer.settings import env_kwargs

    cfg = compose_config([f"benchmark={bench}"])
    spec = get_benchmark(bench, cfg.data_dir)
    tasks = spec.load(split="test")[:limit]
    policy.batch_size = int(cfg.agent.policy.gen_batch_size)
    before = policy.generated_tokens
    start = time.perf_counter()
    with sampling_path(policy, path):
        trajs = play_episodes(tasks, policy, RolloutSpec(n=1, temperature=0.0,
                                                         max_new_tokens=int(cfg.agent.max_new_tokens),
                                                         env_kwargs=env_kwargs(cfg)), chunk_size=policy.batch_size
                              ).trajectories
    wall = time.perf_counter() - start
    tokens = policy.generated_tokens - before
    digest = hashlib.sha256(json.dumps([[t.response_ids for t in traj.turns] for traj in trajs]).encode()).hexdigest()
    return {"benchmark": bench, "path": path, "tasks": len(tasks), "tokens": tokens, "wall": wall,
            "tokens_per_second": tokens / wall, "mean_reward": sum(t.reward for t in trajs) / max(1, len(trajs)),
            "responses": digest}


def table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown: one row per benchmark (the time split), then one per benchmark of the profile and reference."""
    lines = ["| benchmark | path | episodes | turns | tokens | prompt tokens reused | wall s | engine s | env s | other s | "
             "loop tok/s | engine tok/s | loop / engine | env share |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['benchmark']} | {r.get('path', 'lock-step')} | {r['episodes']} | {r['turns']} | {r['tokens']} | "
                     f"{100 * r.get('reused_prompt_share', 0.0):.0f} % | {r['wall']:.1f} | "
                     f"{r['engine']:.1f} | {r['env']:.1f} | {r['other']:.1f} | {r['loop_tokens_per_second']:.1f} | "
                     f"{r['engine_tokens_per_second']:.1f} | "
                     f"{r['loop_tokens_per_second'] / max(r['engine_tokens_per_second'], 1e-9):.2f} | "
                     f"{100 * r['env'] / r['wall']:.1f} % |")
    lines += ["", "| benchmark | path | decode steps | rows / step | useful decode rows | decode s | prefill tokens | "
              "padding | prefill s | prefill tok/s | generate outside model s | engine best tok/s (batch x tokens) | "
              "engine prefill tok/s | loop / engine | loop / engine (work) | longest episode tokens | "
              "loop / engine (sequential) | engine at the episodes' lengths tok/s | loop / engine (lengths) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        p, ref = r["profile"], r.get("reference")
        best = (f"{ref['tokens_per_second']:.1f} ({ref['rows']} x {ref['new_tokens_per_row']}) | "
                f"{ref['prefill_tokens_per_second']:.0f} | {r['loop_over_engine']:.2f} | "
                f"{r['loop_over_engine_work']:.2f} | {r['longest_episode_tokens']} | "
                f"{r['loop_over_engine_sequential']:.2f} | {r['reference_lengths']['tokens_per_second']:.1f} | "
                f"{r['loop_over_engine_lengths']:.2f}") if ref else "— | — | — | — | — | — | — | —"
        lines.append(f"| {r['benchmark']} | {r.get('path', 'lock-step')} | {p['decode_steps']} | {p['mean_rows_per_step']:.1f} | "
                     f"{100 * p['useful_decode_share']:.0f} % | {p['decode_seconds']:.1f} | {p['prefill_tokens']} | "
                     f"{100 * p['padding_share']:.0f} % | {p['prefill_seconds']:.1f} | "
                     f"{p['prefill_tokens_per_second']:.0f} | {p['generate_outside_model_seconds']:.1f} | {best} |")
    return "\n".join(lines)


def host() -> dict[str, Any]:
    """The machine the figures come from: the CPU model and the kernels torch computes with there (SIMD level and
    native bfloat16 path: `provenance`'s ``cpu_model`` and ``cpu_kernels``),
    usable cores, torch threads and version."""
    import torch

    from genenv.trainer.experiments.provenance import cpu_kernels, cpu_model

    return {"cpu": cpu_model(), "kernels": cpu_kernels(), "cores": len(os.sched_getaffinity(0)),
            "torch_threads": torch.get_num_threads(), "torch": torch.__version__}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--benchmarks", default="bfcl,bamboogle,twx,alfworld")
    p.add_argument("--policy", default="smollm2", help="a local model: smollm2 | hf:PATH | PATH")
    p.add_argument("--before-reuse", action="store_true",
                   help="the engine as it was before KV reuse across turns: every prompt prefilled in full, SDPA decoding")
    p.add_argument("--powered-twx", action="store_true",
                   help="twx with the shipped powered experiment's rollout settings (POWERED_TWX)")
    p.add_argument("--paths", default="continuous,lock-step",
                   help="episode loops to measure, interleaved per benchmark: continuous | lock-step | static")
    p.add_argument("--held-out", type=int, default=0, metavar="N",
                   help="also play the first N test tasks of each benchmark greedily through every path "
                        "(measure_held_out); 0: no")
    p.add_argument("--held-out-benchmarks", default=None, help="the benchmarks --held-out plays (default: --benchmarks)")
    p.add_argument("--dtype", default="auto", help="the policy's weights: auto | float32 | bfloat16")
    p.add_argument("--device", default="auto", help="cpu | cuda | auto (one GPU when present, else the CPU)")
    p.add_argument("overrides", nargs="*", help="genenv-train overrides for every benchmark, e.g. agent.n=8")
    p.add_argument("--out", default=None, help="a .json file (or a folder: FOLDER/bench_rollout.json)")
    args = p.parse_args(argv)

    import torch

    from genenv.runtime.policies import TransformersPolicy
    from genenv.runtime.threads import prepare_cpu

    prepare_cpu("auto")
    torch.manual_seed(0)
    before = {"prefix_cache_tokens": 0, "decode_attention": False} if args.before_reuse else {}
    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    policy = TransformersPolicy(args.policy.removeprefix("hf:"), dtype=args.dtype, device=device, **before)
    rows = []
    for bench in [b.strip() for b in args.benchmarks.split(",") if b.strip()]:
        extra = POWERED_TWX if bench == "twx" and args.powered_twx else []
        for path in [x.strip() for x in args.paths.split(",") if x.strip()]:
            rows.append(measure(bench, policy, [*extra, *args.overrides], path=path))
            print(table(rows[-1:]), flush=True)
    held_out = []
    held_benches = args.held_out_benchmarks or args.benchmarks
    for bench in [b.strip() for b in held_benches.split(",") if b.strip()] if args.held_out else []:
        for path in [x.strip() for x in args.paths.split(",") if x.strip()]:
            held_out.append(measure_held_out(bench, policy, args.held_out, path))
            h = held_out[-1]
            print(f"held-out {bench} {path}: {h['tasks']} tasks, {h['tokens']} tokens in {h['wall']:.1f} s "
                  f"({h['tokens_per_second']:.1f} tokens/s), mean reward {h['mean_reward']:.3f}, "
                  f"responses {h['responses'][:12]}", flush=True)
    print("\n" + table(rows))
    if args.out:
        out = Path(args.out)
        write_json(out if out.suffix == ".json" else out / "bench_rollout.json",
                   {"host": host(), "device": device, "policy": args.policy, "dtype": str(policy.model.dtype),
                    "autocast": policy.autocast_dtype, "before_reuse": args.before_reuse, "rows": rows,
                    "held_out": held_out})
    return 0


if __name__ == "__main__":
    sys.exit(main())
