"""Seconds of one environment-policy GRPO update with and without running each group's prompt once.

The update of the TextWorldExpress environment-policy experiment (docs/results.md): ``--groups`` prompts of ``--prompt-tokens`` tokens,
each with ``--group-size`` responses of ``--response-tokens`` tokens (random tokens: only the cost matters), on
the embedded SmolLM2-135M-Instruct (``genenv.trainer.updates.policy_update``, micro-batches of 4, with the
reference pass). "separate" runs every sample's prompt itself (the behaviour before
`genenv.trainer.updates.batch.shared_prompt_logprobs`); "shared" is the default. Prints the median of
``--repeats`` updates each, alternating, and the weights' difference between the two after one update.

Usage: ``python lab/benches/bench_shared_prompt.py --threads 1``
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import time
from unittest import mock

import torch


def main(argv: list[str] | None = None) -> None:
    """Command line (see the module docstring)."""
    from transformers import AutoModelForCausalLM

    from genenv.runtime.models import resolve_model_path
    from genenv.trainer.updates import Sample, policy_update
    from genenv.trainer.updates import batch as batch_module

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=550)
    parser.add_argument("--response-tokens", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--model", default="smollm2", help="model name or folder (resolve_model_path)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    path = resolve_model_path(args.model)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    ref = copy.deepcopy(model)
    samples = []
    for g in range(args.groups):
        prompt = torch.randint(10, 40000, (args.prompt_tokens,)).tolist()
        for k in range(args.group_size):
            n = max(1, args.response_tokens + (k % 3 - 1) * 10)
            samples.append(Sample(prompt, torch.randint(10, 40000, (n,)).tolist() + [2], float(k % 2), f"p{g}"))

    def separate(model, rows, r, keep=None, response_mask=None):
        """Every sample runs its own prompt: the full forward over prompt + the first r response tokens."""
        from verl.utils.torch_functional import logprobs_from_logits

        P = rows["prompts"].shape[1]
        keep = torch.arange(r) if keep is None else keep
        logits = model(input_ids=rows["input_ids"][:, :P + r], attention_mask=rows["attention_mask"][:, :P + r],
                       position_ids=rows["position_ids"][:, :P + r], use_cache=False,
                       logits_to_keep=keep + P - 1).logits  # position P-1+j predicts response token j
        return logprobs_from_logits(logits.float(), rows["input_ids"][:, P + keep])

    def one_update(shared: bool) -> tuple[float, torch.nn.Module]:
        policy = copy.deepcopy(model)
        optimizer = torch.optim.SGD(policy.parameters(), lr=1e-3)
        ctx = (contextlib.nullcontext() if shared
               else mock.patch.object(batch_module, "shared_prompt_logprobs", separate))
        with ctx:
            start = time.perf_counter()
            policy_update(policy, ref, optimizer, samples, 0, kl_coef=0.001, micro_batch_size=4)
            return time.perf_counter() - start, policy

    times: dict[str, list[float]] = {"shared": [], "separate": []}
    last = {}
    for _ in range(args.repeats):
        for name in ("shared", "separate"):
            seconds, last[name] = one_update(name == "shared")
            times[name].append(seconds)
    diff = max(float((a - b).detach().abs().max())
               for a, b in zip(last["shared"].parameters(), last["separate"].parameters()))
    for name, values in times.items():
        print(f"{name}: median {statistics.median(values):.1f} s over {len(values)} updates "
              f"({len(samples)} samples, {args.groups} prompts of {args.prompt_tokens} tokens)")
    print(f"speed-up {statistics.median(times['separate']) / statistics.median(times['shared']):.2f}x; "
          f"largest weight difference after one update {diff:.2e}")


if __name__ == "__main__":
    main()
