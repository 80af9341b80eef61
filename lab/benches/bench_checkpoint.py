"""What a checkpoint costs: bytes and seconds of one co-evolution checkpoint of both policies, written in full and
with an unchanged role's files shared (a benchmark script that prints figures, not a test).

    python lab/benches/bench_checkpoint.py                      # the CPU profile's policies (SmolLM2-135M)
    python lab/benches/bench_checkpoint.py agent.policy.lora_r=16 env_policy.policy.lora_r=16

It builds the local engine as ``genenv-train`` configures it (``overrides`` as on its command line), gives the
agent, then the environment policy, AdamW moments with one update on two short samples, and times
`save_checkpoint`:

- ``env policy never updated``: only the agent updated so far (a frozen task source: ``random_env``, ``envgen``,
  ``static``, ``static_aug``, ``genenv_released``; or ``genenv`` before its first in-band group): a full
  fine-tune still holding its model file's weights writes no files (``saved: false`` in ``backend.json``);
- ``full``: every role written (what every iteration cost before unchanged roles were shared, and what an
  iteration that updated both roles costs now);
- ``agent only``: the agent updated, the environment policy not since the previous checkpoint (an iteration whose
  generated groups all fell outside the difficulty band): the environment policy's files are hard links into the
  previous checkpoint;
- ``load``: `load_checkpoint` of the last one.

``disk`` is what the checkpoint folder holds with ``keep_checkpoints`` folders kept (linked files counted once).
``--paper-params`` prints the same bytes for the paper profile's 7B policies from the formula (float32 weights ``4P``
and AdamW's two float32 moments ``8P`` per fully trained role; Qwen2.5-7B-Instruct has 7.61e9 parameters, its model
card).
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

GB = 1e9


def unique_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder``, each inode counted once (hard links share their bytes)."""
    seen, total = set(), 0
    for f in Path(folder).rglob("*"):
        if f.is_file():
            st = f.stat()
            if st.st_ino not in seen:
                seen.add(st.st_ino)
                total += st.st_size
    return total


def inodes(folder: Path) -> set[int]:
    """The inodes of the files under ``folder`` (empty when it does not exist)."""
    return {f.stat().st_ino for f in Path(folder).rglob("*") if f.is_file()}


def new_bytes(folder: Path, old: set[int]) -> int:
    """Bytes of the files under ``folder`` whose inode is not in ``old`` (what writing it cost)."""
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file() and f.stat().st_ino not in old)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("overrides", nargs="*", help="genenv-train overrides, e.g. agent.policy.lora_r=16")
    p.add_argument("--paper-params", type=float, default=7.61e9, help="parameters per policy at the paper profile")
    p.add_argument("--dir", default=None, help="where to write (default: a temporary folder, removed after)")
    args = p.parse_args(argv)

    from genenv.benchmarks.registry import get_benchmark
    from genenv.trainer.checkpoint import load_checkpoint, save_checkpoint
    from genenv.trainer.cli import compose_config
    from genenv.trainer.engines.local import build_local_backend
    from genenv.trainer.settings import run_settings
    from genenv.trainer.task_pool import TaskPool
    from genenv.trainer.updates import Sample

    cfg = compose_config(list(args.overrides))
    backend = build_local_backend(run_settings(cfg))
    pool = TaskPool(get_benchmark(cfg.benchmark.name, cfg.data_dir).load(split="train"))
    tok = backend.tokenizers["agent"]
    prompt = tok.encode("Write a task for the agent.")
    samples = [Sample(prompt, tok.encode(" first answer") + [2], 1.0, "g"),
               Sample(prompt, tok.encode(" second answer") + [2], 0.0, "g")]
    backend.update("agent", samples, "grpo")
    rng = random.Random(0)
    root = Path(args.dir or tempfile.mkdtemp(prefix="bench-ckpt-"))
    rows = []

    def save(folder: Path, iteration: int, label: str, keep: int) -> Path:
        old = inodes(folder)
        start = time.perf_counter()
        path = save_checkpoint(folder, iteration, backend, pool, {"counters": {}}, rng, keep=keep)
        seconds = time.perf_counter() - start
        rows.append((label, new_bytes(path, old), seconds, keep, unique_bytes(folder)))
        return path

    try:
        save(root / "frozen", 1, "agent only (env policy never updated)", keep=1)
        backend.update("env_policy", samples, "grpo")
        save(root / "before", 1, "full (every iteration before)", keep=2)
        backend.update("agent", samples, "grpo")
        (root / "before" / "latest").unlink()  # no previous checkpoint to share with: the former behaviour
        save(root / "before", 2, "full (every iteration before)", keep=2)
        save(root / "after", 1, "full (both roles updated)", keep=int(cfg.get("keep_checkpoints", 1)))
        backend.update("agent", samples, "grpo")
        last = save(root / "after", 2, "agent only (env policy linked)", keep=int(cfg.get("keep_checkpoints", 1)))
        start = time.perf_counter()
        load_checkpoint(last, backend, rng)
        load_seconds = time.perf_counter() - start
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)

    print("| checkpoint | bytes written | seconds | keep_checkpoints | disk after it |\n|---|---|---|---|---|")
    for label, written, seconds, keep, disk in rows:
        print(f"| {label} | {written / GB:.2f} GB | {seconds:.2f} | {keep} | {disk / GB:.2f} GB |")
    print(f"| load (resume) | | {load_seconds:.2f} | | |")
    per_role = 12 * args.paper_params
    print(f"\npaper profile (full fine-tune, {args.paper_params:.3g} parameters per policy): "
          f"{per_role / GB:.0f} GB per role written (float32 weights + AdamW moments); an iteration that updated "
          f"both roles writes {2 * per_role / GB:.0f} GB, one that left the environment policy alone "
          f"{per_role / GB:.0f} GB; disk with keep_checkpoints=1: {2 * per_role / GB:.0f} GB "
          f"(before: {4 * per_role / GB:.0f} GB with keep_checkpoints=2)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
