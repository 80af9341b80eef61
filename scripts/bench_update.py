"""What computing logits only where an update trains saves: the agent update's reference pass and gradient pass on
real multi-turn episodes, with logits at the trained response columns
(:func:`~genenv.trainer.updates.batch.trained_columns`, the default) against logits at every response column,
alternated in one process (a benchmark script that prints figures, not a test).

    python scripts/bench_update.py --tasks 8 --repeats 3

The episodes: the first ``--tasks`` seed tasks of ``--benchmark`` (default TextWorldExpress with the 4-room games of
the outcome experiment), ``agent.n`` episodes each, played by the local engine's bf16 sampling copy as
``genenv-train`` configures it. Rewards are replaced by alternating 0/1 so that every group trains. Each repeat
times, for both variants, the reference log-prob pass (no gradient) and the gradient pass (forward and backward
over micro-batches of ``agent.policy.micro_batch_size``); the optimiser does not step, so every repeat sees the same
weights. A first round of both variants warms up and is not timed. Prints the batch (samples, tokens, trained
tokens), the gap between the sampler's log-probs and the trainer's on the trained tokens
(:func:`~genenv.trainer.updates.update.sampler_gap`, as the update reports it) and per variant the mean seconds
of each pass (``--repeats 0``: the gap only).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Sequence

import torch

FOUR_ROOMS = "+benchmark.seed_options.params={coin: 'numLocations=4,numDistractorItems=0,includeDoors=0'}"


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--benchmark", default="twx")
    p.add_argument("--tasks", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("overrides", nargs="*", help="genenv-train overrides (default for twx: the 4-room games)")
    args = p.parse_args(argv)

    from genenv.benchmarks.registry import get_benchmark
    from genenv.trainer.cli import compose_config
    from genenv.trainer.engines.local import build_local_backend
    from genenv.runtime.episodes import RolloutSpec
    from genenv.trainer.updates.sample import agent_samples
    from genenv.trainer.settings import run_settings
    from genenv.trainer.updates import batch as batches
    from genenv.trainer.updates.update import group_length_order, prepare_update, sampler_gap

    overrides = args.overrides or ([FOUR_ROOMS] if args.benchmark == "twx" else [])
    cfg = compose_config([f"benchmark={args.benchmark}", *overrides])
    st = run_settings(cfg)
    spec = get_benchmark(args.benchmark, st.data_dir)
    pool = spec.load(split="train", **spec.pool_options(st.seed_options))
    torch.manual_seed(0)
    backend = build_local_backend(st)
    a = st.agent
    trajs = backend.rollout(pool[:args.tasks], RolloutSpec(n=a.n, temperature=a.temperature,
                                                           max_new_tokens=a.max_new_tokens, env_kwargs=st.env_kwargs,
                                                           max_response_tokens=a.response_budget)).trajectories
    samples = agent_samples(trajs)
    for i, s in enumerate(samples):
        s.reward = float(i % 2)
    batch, _ = prepare_update(samples, backend.tokenizers["agent"].pad_token_id, "grpo", sampler_log_probs=True)
    batch.reorder(group_length_order(batch))
    mask = batch.batch["response_mask"]
    print(f"{len(batch)} samples, {int(batch.batch['attention_mask'].sum())} tokens, {int(mask.sum())} trained, "
          f"longest response {mask.shape[1]}", flush=True)
    model, ref = backend.models["agent"], backend.refs["agent"]
    mbs = st.roles["agent"].micro_batch_size
    amp = getattr(torch, backend.autocast_dtype) if backend.autocast_dtype else None
    if "rollout_log_probs" in batch.batch.keys():  # what the update reports: sampler vs trainer, same tokens
        gap = sampler_gap(batch, batches.response_logprobs(model, batch, mbs, autocast_dtype=amp))
        print("sampler vs trainer: " + ", ".join(f"{k} {v:.4g}" for k, v in gap.items()), flush=True)
    if args.repeats < 1:
        return 0
    trained = batches.trained_columns
    variants = {"trained columns": trained,
                "every column": lambda mb, r: torch.arange(r, device=mb.batch["response_mask"].device)}
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)  # GPU kernels run async
    times: dict[str, dict[str, list[float]]] = {v: {"reference": [], "gradient": []} for v in variants}
    try:
        for repeat in range(args.repeats + 1):  # round 0 warms up (kernels, allocator) and is not timed
            for name, columns in variants.items():
                batches.trained_columns = columns
                t0 = time.perf_counter()
                if ref is not None:
                    batches.response_logprobs(ref, batch, mbs, autocast_dtype=amp)
                sync()
                t1 = time.perf_counter()
                model.train()
                for start in range(0, len(batch), mbs):
                    mb = batch.slice(start, start + mbs)
                    lp = batches.response_logprobs(model, mb, mbs, grad=True, autocast_dtype=amp)
                    (lp * mb.batch["response_mask"]).sum().backward()
                sync()
                model.zero_grad(set_to_none=True)
                model.eval()
                if repeat:
                    times[name]["reference"].append(t1 - t0)
                    times[name]["gradient"].append(time.perf_counter() - t1)
    finally:
        batches.trained_columns = trained
    print("| logits at | reference pass s | gradient pass s |\n|---|---|---|")
    for name, t in times.items():
        print(f"| {name} | {statistics.mean(t['reference']):.2f} | {statistics.mean(t['gradient']):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
