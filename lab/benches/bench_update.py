"""What the agent update's passes cost on real multi-turn episodes, two or more ways alternated in one process (a
benchmark script that prints figures, not a test): the reference pass and the gradient pass.

    python lab/benches/bench_update.py --tasks 8 --repeats 3
    python lab/benches/bench_update.py --compare passes --tasks 4 --repeats 1 agent.n=4 ...

``--compare columns`` (default): logits at the trained response columns
(`trained_columns`, the default) against logits at every response column.
``--compare passes``: each micro-batch's groups (over their shared prompt's cache) and samples with prompts of
their own in one pass, in one pass per sample, and by the padding rule (`PASS_TOKENS`, the default), on
transformers' SDPA (the update's attention); it also prints the tokens the passes
feed in one pass and one pass each.

The episodes: the first ``--tasks`` seed tasks of ``--benchmark`` (default TextWorldExpress with the 4-room games of
the outcome experiment), ``agent.n`` episodes each, played by the local engine's bf16 sampling copy as
``genenv-train`` configures it. Rewards are replaced by alternating 0/1 so that every group trains. Each repeat
times, for every variant, the reference log-prob pass (no gradient) and the gradient pass (forward and backward
over micro-batches of ``agent.policy.micro_batch_size``); the optimiser does not step, so every repeat sees the same
weights. A first round of the variants warms up and is not timed. Prints the batch (samples, tokens, trained
tokens), the gap between the sampler's log-probs and the trainer's on the trained tokens
(`sampler_gap`, as the update reports it) and per variant the mean seconds
of each pass (``--repeats 0``: the gap only). ``--profile N`` then runs the gradient pass once more under
``torch.profiler`` (the default variant) and prints its ``N`` operators with the most self CPU time.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from typing import Sequence
from unittest import mock

import torch

FOUR_ROOMS = "+benchmark.seed_options.params={coin: 'numLocations=4,numDistractorItems=0,includeDoors=0'}"


def columns(batches, model, ref) -> dict:
    """Logits at the trained columns (`trained_columns`) or at every column."""
    every = lambda mb, r: torch.arange(r, device=mb.batch["response_mask"].device)  # noqa: E731
    return {"trained columns": contextlib.nullcontext,
            "every column": lambda: mock.patch.object(batches, "trained_columns", every)}


def passes(batches, model, ref) -> dict:
    """How a micro-batch's samples run on transformers' SDPA: one pass per group and one for the samples with
    prompts of their own, one pass per sample, or by the padding rule (`PASS_TOKENS`, the default)."""
    return {"one pass": lambda: mock.patch.object(batches, "PASS_TOKENS", float("inf")),
            "one pass each": lambda: mock.patch.object(batches, "PASS_TOKENS", 0),
            f"rule ({batches.PASS_TOKENS})": contextlib.nullcontext}


COMPARISONS = {"columns": columns, "passes": passes}


def tail_tokens(batches, batch, mbs: int) -> dict[str, int]:
    """Tokens the micro-batches' passes feed, summed: for a group sharing a prompt its responses after the prompt
    (in one pass, every response padded to the group's last trained token; in one pass each, every response up to
    its own), and for the samples with prompts of their own their prompts and responses (in one pass, the
    micro-batch's unpadded span for each; in one pass each, every sample up to its last trained token)."""
    one, each = 0, 0
    P = batch.batch["prompts"].shape[1]
    for start in range(0, len(batch), mbs):
        mb = batch.slice(start, start + mbs)
        cols, r = batches.unpadded_span(mb)
        alone = []
        for rows in batches.prompt_groups(mb.batch["prompts"], mb.batch["attention_mask"][:, :P]):
            _, last = batches.trained_tokens(mb.batch["response_mask"][rows, :r], batches.trained_columns(mb, r))
            ends = [c or 0 for c in last]
            if len(rows) > 1:
                one, each = one + len(rows) * max(ends), each + sum(ends)
                continue
            first = int(mb.batch["attention_mask"][rows[0], :P].nonzero()[0])
            alone.append(P + ends[0] - first)
        one, each = one + len(alone) * (cols.stop - cols.start), each + sum(alone)
    return {"one pass": one, "one pass each": each}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--benchmark", default="twx")
    p.add_argument("--tasks", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--compare", choices=sorted(COMPARISONS), default="columns",
                   help="columns: logits at the trained columns or at every column; passes: a micro-batch's "
                        "samples on SDPA with the mask in one pass per group, or on the CPU attention in such "
                        "passes, in one pass each, or by the padding rule (PASS_TOKENS)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="profile one more gradient pass and print its N costliest operators (self CPU time)")
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

    if args.compare == "passes":
        print("tokens the passes feed (prompts of groups left out): " + ", ".join(
            f"{k} {v}" for k, v in tail_tokens(batches, batch, mbs).items()), flush=True)
    amp = getattr(torch, backend.autocast_dtype) if backend.autocast_dtype else None

    def gradient_pass() -> None:
        """Forward and backward over the micro-batches (the optimiser does not step)."""
        model.train()
        for start in range(0, len(batch), mbs):
            mb = batch.slice(start, start + mbs)
            lp = batches.response_logprobs(model, mb, mbs, grad=True, autocast_dtype=amp)
            (lp * mb.batch["response_mask"]).sum().backward()
        model.zero_grad(set_to_none=True)
        model.eval()

    if "rollout_log_probs" in batch.batch.keys():  # what the update reports: sampler vs trainer, same tokens
        gap = sampler_gap(batch, batches.response_logprobs(model, batch, mbs, autocast_dtype=amp))
        print("sampler vs trainer: " + ", ".join(f"{k} {v:.4g}" for k, v in gap.items()), flush=True)
    if args.repeats < 1:
        return 0
    variants = COMPARISONS[args.compare](batches, model, ref)
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)  # GPU kernels run async
    times: dict[str, dict[str, list[float]]] = {v: {"reference": [], "gradient": []} for v in variants}
    for repeat in range(args.repeats + 1):  # round 0 warms up (kernels, allocator) and is not timed
        for name, variant in variants.items():
            with variant():
                t0 = time.perf_counter()
                if ref is not None:
                    batches.response_logprobs(ref, batch, mbs, autocast_dtype=amp)
                sync()
                t1 = time.perf_counter()
                gradient_pass()
                sync()
            if repeat:
                times[name]["reference"].append(t1 - t0)
                times[name]["gradient"].append(time.perf_counter() - t1)
    print(f"| {args.compare} | reference pass s | gradient pass s |\n|---|---|---|")
    for name, t in times.items():
        print(f"| {name} | {statistics.mean(t['reference']):.2f} | {statistics.mean(t['gradient']):.2f} |")
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            gradient_pass()
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
