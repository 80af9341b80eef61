"""Rollout throughput of the agent's training rollout through each sampler, side by side in one run (a benchmark
script that prints figures, not a test).

    python lab/benches/bench_engines.py --out lab/figures/engine_figures_<host>.json   # GENENV_LLAMA_SERVER or PATH: llama-server

Workloads (``--workloads``), each the agent's training rollout as ``genenv-train`` configures it, played by the
one episode loop (`play_episodes`) as the trainer plays it:

- ``bamboogle``: ``genenv-train benchmark=bamboogle`` (single turn);
- ``twx``: the shipped powered TextWorldExpress experiment's rollout (``bench_rollout.POWERED_TWX``: 4-room Coin
  Collector games, 4 tasks x 4 episodes, 16 tokens per command, multi-turn).

Samplers (``--engines``), interleaved per repeat, all on the same SmolLM2 weights:

- ``builtin``: the project's own CPU engine as the trainer runs it by default (``sampler: builtin``: its continuous
  batch, prefix cache and decoding attention);
- ``transformers``: transformers' plain ``generate``, one padded batch per turn, SDPA, no KV kept between turns
  (``sampler: transformers``);
- ``transformers-kv``: transformers' ``generate`` continuing each episode's own ``past_key_values`` from its
  previous turn (`EpisodeCachePolicy`: the library's own ``DynamicCache``, one episode at a time, since episodes'
  caches differ in length);
- ``llama-server``: llama.cpp's ``llama-server`` (``sampler: llama-server``) on the weights written as GGUF
  (``--gguf-dtype``), one slot per episode, prompt caching across turns.

After the rollouts each sampler's weight sync (`Sampler.load_weights` of the float32 master weights: a copy into
the sampling model, or a GGUF written and the server restarted) is timed twice. Printed and written per workload
and sampler: episodes, generated tokens, wall seconds, tokens/s (median over ``--repeats``), the ratio to
``builtin``, the sync seconds; ``default`` names the fastest sampler of each workload.
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


class EpisodeCachePolicy:
    """transformers' ``generate`` that continues each episode from its own previous turn's ``past_key_values``
    (a ``DynamicCache`` kept per token prefix): a prompt that extends a kept sequence feeds only its new tokens.
    Samples are generated one at a time (batch 1), each from a copy of the prompt's cache. Bench-only: the
    measured alternative to the samplers."""

    def __init__(self, policy):
        self.policy, self.name = policy, "transformers-kv"
        self.caches: dict[tuple[int, ...], Any] = {}
        self.generated_tokens, self.generate_seconds = 0, 0.0

    def encode_prompt(self, messages):
        """Token ids of ``messages`` under the wrapped policy's chat template."""
        return self.policy.encode_prompt(messages)

    def clear_prefix_cache(self) -> None:
        """Drop every episode's kept ``past_key_values`` (a rollout ended)."""
        self.caches.clear()

    def load_weights(self, state_dict, fingerprint=None) -> float:
        """Load ``state_dict`` into the wrapped policy (kept KV states are stale, so dropped); returns seconds."""
        self.caches.clear()
        return self.policy.load_weights(state_dict, fingerprint)

    def close(self) -> None:
        """Release the kept KV states."""
        self.caches.clear()

    def generate(self, prompts, n: int = 1, temperature: float = 0.0, max_new_tokens: int = 256):
        """``n`` samples per prompt, each continuing its episode's kept ``past_key_values`` when the prompt extends
        that episode's previous turn (else from scratch); returns one list of `Generation` per prompt."""
        import copy

        import torch
        from transformers import DynamicCache

        from genenv.runtime.policies import Generation, sampling_kwargs

        pol, tok = self.policy, self.policy.tokenizer
        out = []
        for p in prompts:
            ids = list(p.token_ids or pol.encode_prompt(p.messages))
            key = max((k for k in self.caches if len(k) < len(ids) and tuple(ids[:len(k)]) == k), key=len,
                      default=None)
            base = self.caches.pop(key) if key is not None else DynamicCache(config=pol.model.config)
            cap = min(max_new_tokens, p.max_new_tokens or max_new_tokens)
            gens = []
            for k in range(n):
                cache = copy.deepcopy(base) if k < n - 1 else base
                with torch.no_grad(), pol.precision():
                    res = pol.model.generate(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                             past_key_values=cache, max_new_tokens=cap, eos_token_id=tok.stop_token_ids,
                                             pad_token_id=tok.pad_token_id, return_dict_in_generate=True,
                                             **sampling_kwargs(temperature))
                resp = pol.cut_response(res.sequences[0, len(ids):].tolist(), cap)
                seq = ids + resp
                self.caches[tuple(seq[:res.past_key_values.get_seq_length()])] = res.past_key_values
                self.generated_tokens += len(resp)
                gens.append(Generation(tok.decode(resp, skip_special_tokens=True), list(ids), resp,
                                       usage={"prompt_tokens": len(ids) if k == 0 else 0, "completion_tokens": len(resp)}))
            out.append(gens)
        return out


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
    p.add_argument("--engines", default="builtin,transformers,transformers-kv,llama-server")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--gguf-dtype", default="f32", help="the llama-server weights: f32 | f16 | bf16 | q8_0")
    p.add_argument("--server-args", default="", help="more llama-server options, space-separated")
    p.add_argument("--threads", type=int, default=None, help="llama-server threads (default: the free cores)")
    p.add_argument("--out", default=None, help="a .json file")
    args = p.parse_args(argv)

    import torch

    from genenv.runtime.models import load_model_and_tokenizer
    from genenv.runtime.samplers.sampler import make_sampler
    from genenv.runtime.threads import prepare_cpu

    threads = prepare_cpu("auto")
    torch.manual_seed(0)
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    master, tok = load_model_and_tokenizer("smollm2", dtype="float32")  # the trainer's master weights
    sampling, _ = load_model_and_tokenizer("smollm2")  # the sampling copy, in the dtype the host computes fastest
    policies: dict[str, Any] = {}
    for e in engines:
        if e == "llama-server":
            from genenv.runtime.models import smollm2_gguf_path
            from genenv.runtime.samplers.llama_server import LlamaServerSampler

            policies[e] = LlamaServerSampler(tok, master.state_dict(), smollm2_gguf_path(), dtype=args.gguf_dtype,
                                             slots=16, threads=args.threads or threads,
                                             server_args=args.server_args.split())
        else:
            kind = "transformers" if e == "transformers-kv" else e
            policies[e] = make_sampler(kind, sampling, tok, "smollm2", batch_size=64)
            if e == "transformers-kv":
                policies[e] = EpisodeCachePolicy(policies[e])
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    sync: dict[str, list[float]] = {}
    try:
        for rep in range(args.repeats):
            for w in workloads:
                for e in engines:
                    row = rollout(policies[e], WORKLOADS[w])
                    runs.setdefault((w, e), []).append(row)
                    print(f"repeat {rep} {w:10s} {e:15s} {row['episodes']:3d} episodes {row['tokens']:5d} tokens "
                          f"{row['wall']:7.1f} s {row['tokens_per_second']:7.1f} tok/s reward {row['mean_reward']:.3f}",
                          flush=True)
        for e in engines:
            sync[e] = [policies[e].load_weights(master.state_dict()) for _ in range(2)]
    finally:
        for pol in policies.values():
            pol.close()
    figures: dict[str, Any] = {"host": host(), "gguf_dtype": args.gguf_dtype, "server_args": args.server_args,
                               "sampling_dtype": str(sampling.dtype), "threads": threads, "repeats": args.repeats,
                               "workloads": {}}
    for w in workloads:
        rows = {e: runs[(w, e)] for e in engines}
        med = {e: statistics.median(r["tokens_per_second"] for r in rs) for e, rs in rows.items()}
        base = med.get("builtin")
        entry = {e: {"tokens_per_second": med[e], "over_builtin": med[e] / base if base else None,
                     "sync_seconds": statistics.median(sync[e]), "runs": rows[e]} for e in engines}
        figures["workloads"][w] = {"engines": entry, "default": max(med, key=med.get)}
        print(f"{w}: " + ", ".join(f"{e} {med[e]:.1f} tok/s" + (f" ({med[e] / base:.2f}x)" if base else "")
                                   + f" sync {statistics.median(sync[e]):.2f} s" for e in engines))
    if args.out:
        write_json(Path(args.out), figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
