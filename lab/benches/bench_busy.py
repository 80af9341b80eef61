"""Wall time of the README's jobs on a quiet machine and beside one busy process, per CPU-thread setting (a
benchmark script that prints figures, not a test).

    python lab/benches/bench_busy.py                       # both jobs, settings before / after, quiet and busy
    python lab/benches/bench_busy.py --job eval --setting threads_only --setting passive_only --limit 5

Jobs (each a fresh process): ``eval`` = the README's main evaluation, ``genenv-eval --benchmarks bfcl,bamboogle
--policy smollm2 --limit 20``; ``train`` = one co-evolution iteration, ``genenv-train benchmark=bamboogle
iterations=1`` (its held-out evaluation included). The busy process is one Python loop spinning on one core (what a
test run or a second experiment does to a 2-core machine). Settings, as environment variables the jobs read
(``runtime/threads.py``: a set ``OMP_NUM_THREADS`` counts as an explicit thread count):

- ``before``: ``OMP_NUM_THREADS=<usable cores>``: torch's default, one thread per core, as every run had;
- ``after``: nothing set: ``threads: auto``, the default now (the free cores when the job starts);
- ``passive``: ``after`` with ``OMP_WAIT_POLICY=PASSIVE`` (OpenMP threads sleep at barriers instead of spinning);
- ``passive_only``: ``before`` with ``OMP_WAIT_POLICY=PASSIVE``.

Prints one row per (job, setting, machine state): wall seconds and the ratio busy / quiet.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Sequence

from genenv.runtime.threads import usable_cores

SETTINGS = {
    "before": {"OMP_NUM_THREADS": str(usable_cores())},
    "after": {},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
    "passive_only": {"OMP_NUM_THREADS": str(usable_cores()), "OMP_WAIT_POLICY": "PASSIVE"},
}


def job_command(job: str, limit: int, workdir: str) -> list[str]:
    """The command line of ``job`` (``eval`` or ``train``), writing under ``workdir``."""
    if job == "eval":
        return [sys.executable, "-m", "genenv.eval.leaderboard", "--benchmarks", "bfcl,bamboogle", "--policy",
                "smollm2", "--limit", str(limit), "--out", os.path.join(workdir, "eval")]
    if job == "train":
        return [sys.executable, "-m", "genenv.trainer.cli", "benchmark=bamboogle", "iterations=1",
                f"run_dir={os.path.join(workdir, 'train')}", "resume=false", "tensorboard=false"]
    raise ValueError(f"unknown job {job!r}; choose eval or train")


def timed(command: list[str], env: dict[str, str], busy: bool, timeout: float | None = None) -> float:
    """Wall seconds of ``command`` with ``env`` over this process's environment (the thread variables cleared
    first), beside one spinning process when ``busy``; ``inf`` when it ran past ``timeout`` seconds (stopped).
    Raises CalledProcessError when the job fails."""
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        time.sleep(1.0 if busy else 0.0)
        t0 = time.perf_counter()
        try:
            subprocess.run(command, env={**clean, **env}, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=timeout)
        except subprocess.TimeoutExpired:
            return float("inf")
        return time.perf_counter() - t0
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--job", action="append", choices=["eval", "train"], help="default: both")
    p.add_argument("--setting", action="append", choices=list(SETTINGS), help="default: before and after")
    p.add_argument("--limit", type=int, default=20, help="eval: tasks per benchmark (the README's 20)")
    p.add_argument("--states", default="quiet,busy", help="comma list of quiet, busy")
    p.add_argument("--timeout", type=float, default=None, help="seconds after which a job is stopped (shown as inf)")
    p.add_argument("--repeats", type=int, default=1, help="rounds over the settings (interleaved); medians shown")
    args = p.parse_args(argv)
    states = args.states.split(",")
    print(f"usable cores: {usable_cores()}\n"
          "| job | setting | quiet s | busy s | busy / quiet | every run (quiet; busy) |\n|---|---|---|---|---|---|",
          flush=True)
    for job in args.job or ["eval", "train"]:
        runs: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repeats):  # interleaved, so that a slow spell of the machine hits every setting
            for setting in args.setting or ["before", "after"]:
                for state in states:
                    with tempfile.TemporaryDirectory() as tmp:
                        seconds = timed(job_command(job, args.limit, tmp), SETTINGS[setting], state == "busy",
                                        args.timeout)
                        runs.setdefault((setting, state), []).append(seconds)
        for setting in args.setting or ["before", "after"]:
            q, b = (statistics.median(runs[(setting, st)]) if (setting, st) in runs else None
                    for st in ("quiet", "busy"))
            ratio = f"{b / q:.1f}" if q and b else ""
            every = "; ".join(", ".join(f"{x:.0f}" for x in runs.get((setting, st), [])) for st in ("quiet", "busy"))
            print(f"| {job} | {setting} | {q or 0:.1f} | {b or 0:.1f} | {ratio} | {every} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
