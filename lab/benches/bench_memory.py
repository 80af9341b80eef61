"""Resident memory of the co-evolution loop, iteration by iteration: what the process holds, what glibc's heap
holds in use and free (a benchmark script that prints figures, not a test).

    python lab/benches/bench_memory.py --arm static --iterations 3 --out memory_figures.json
    python lab/benches/bench_memory.py --arm static --iterations 3 --trim
    MALLOC_MMAP_THRESHOLD_=4194304 python lab/benches/bench_memory.py --arm static --iterations 3

Each run is the powered TextWorldExpress config of ``bench_iteration.py`` (``POWERED``) with ``arm`` and
``iterations``, in this process, in a fresh run folder. After each iteration it records the resident size
(``VmRSS``), its peak since the previous record (sampled every 0.5 s by a thread), and glibc's ``mallinfo2``: bytes
in use (``uordblks`` + ``hblkhd``, the mmapped chunks) and bytes free in the heaps (``fordblks``). ``--trim``
first returns the free heap pages to the system after each iteration (glibc's ``malloc_trim(0)``) and records its
seconds. glibc's own settings (``MALLOC_MMAP_THRESHOLD_`` and the like, ``mallopt(3)``) come from the environment.
Linux with glibc only; figures in ``lab/notes/cpu-profiles.md``, "Resident memory of a long run".
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_iteration import with_overrides  # noqa: E402  (a sibling bench)


class MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (``malloc.h``, glibc >= 2.33), every field a ``size_t`` in bytes."""
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def rss_bytes() -> int:
    """This process's resident size (``VmRSS`` of ``/proc/self/status``), bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


@functools.cache
def libc() -> ctypes.CDLL:
    """glibc, with ``mallinfo2`` and ``malloc_trim`` typed (loaded once). Raises ``OSError`` where ``libc.so.6`` is
    not glibc's (musl, macOS): the bench reads glibc's own heap figures (``mallinfo2``, glibc >= 2.33)."""
    lib = ctypes.CDLL("libc.so.6")
    lib.mallinfo2.restype = MallInfo2
    lib.malloc_trim.argtypes, lib.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lib


def heap_figures() -> dict[str, int]:
    """glibc's heap figures now: ``in_use`` (bytes handed out, mmapped chunks included) and ``free`` (bytes free
    inside the heaps)."""
    m = libc().mallinfo2()
    return {"in_use": m.uordblks + m.hblkhd, "free": m.fordblks}


class Peak(threading.Thread):
    """The highest `rss_bytes` seen since the last `take`, sampled every ``every`` seconds."""

    def __init__(self, every: float = 0.5):
        super().__init__(daemon=True)
        self.every, self.peak = every, 0

    def run(self) -> None:
        """Sample until the process ends."""
        while True:
            self.peak = max(self.peak, rss_bytes())
            time.sleep(self.every)

    def take(self) -> int:
        """The peak since the previous call, and start a new one."""
        peak, self.peak = max(self.peak, rss_bytes()), 0
        return peak


def run(arm: str, iterations: int, trim: bool, extra: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One run of ``arm`` for ``iterations`` iterations in this process; one record per iteration (GB, seconds)."""
    from genenv.trainer.cli import compose_config
    from genenv.trainer.loop import CoEvolutionTrainer

    gb = 1 / 2 ** 30
    peak = Peak()
    peak.start()
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as work:
        cfg = compose_config(with_overrides([f"arm={arm}", f"iterations={iterations}", f"run_dir={work}/run",
                                             *extra]))
        trainer = CoEvolutionTrainer(cfg)
        step = trainer.run_iteration

        def recorded():
            t0 = time.perf_counter()
            row = step()
            seconds = time.perf_counter() - t0
            t1 = time.perf_counter()
            if trim:
                libc().malloc_trim(0)
            trim_seconds = time.perf_counter() - t1
            h = heap_figures()
            records.append({"iteration": len(records), "seconds": round(seconds, 1),
                            "trim_seconds": round(trim_seconds, 3) if trim else None,
                            "rss_gb": round(rss_bytes() * gb, 2), "peak_gb": round(peak.take() * gb, 2),
                            "heap_in_use_gb": round(h["in_use"] * gb, 2), "heap_free_gb": round(h["free"] * gb, 2)})
            print(json.dumps(records[-1]), flush=True)
            return row

        trainer.run_iteration = recorded
        trainer.run()
    return records


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--arm", default="static")
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--trim", action="store_true", help="malloc_trim(0) after each iteration")
    p.add_argument("--out", default=None, help="a .json file to add this run to")
    p.add_argument("overrides", nargs="*", help="more genenv-train overrides")
    args = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    records = run(args.arm, args.iterations, args.trim, args.overrides)
    if args.out:
        from genenv.trainer.experiments.provenance import code_version, host

        out = Path(args.out)
        runs = json.loads(out.read_text())["runs"] if out.is_file() else []
        runs.append({"arm": args.arm, "trim": args.trim, "overrides": args.overrides,
                     "malloc_env": {k: v for k, v in os.environ.items() if k.startswith(("MALLOC_", "GLIBC_"))},
                     "host": host(), "tree": code_version(), "iterations": records})
        out.write_text(json.dumps({"runs": runs}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
