"""How many CPU threads a run uses: the cores this process may use, less the cores other processes keep busy now.

Torch's default is one OpenMP thread per core. Beside another busy process on a 2-core machine, its two threads
wait for a core the other process holds and every parallel region stalls: the README's evaluation ran many times
longer beside one spinning process than on the quiet machine (figures: ``lab/notes/install-measurements.md``, "Busy
machines: CPU threads", and ``lab/notes/cpu-profiles.md``, "runtime/threads.py"). ``threads: auto`` (the default
of ``genenv-eval``, ``genenv-train``, ``genenv-experiment`` and ``python -m genenv.eval.model_server``) therefore
counts the cores that are free when the run starts; an explicit number always wins. OpenMP's passive wait policy
(``OMP_WAIT_POLICY=PASSIVE``), the other remedy, was measured and is not set: it made the same evaluation slower on
the quiet machine (figures: ``lab/notes/install-measurements.md``, "Busy machines: CPU threads").

Written here because no library does it: ``os.sched_getaffinity`` gives the usable cores, ``/proc/stat`` (Linux) the
machine's busy time, from which the busy cores over a short window follow (``os.getloadavg`` lags by a minute).
"""
from __future__ import annotations

import math
import os
import sys
import time

__all__ = ["busy_cores", "prepare_cpu", "resolve_threads", "usable_cores"]

AUTO = "auto"


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask; ``os.cpu_count()`` where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _cpu_times() -> tuple[float, float] | None:
    """``(busy, total)`` jiffies of all CPUs from the first line of ``/proc/stat``; ``None`` where it is missing."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def busy_cores(window: float = 0.25) -> float:
    """How many cores other processes keep busy now: the machine's busy share over ``window`` seconds (this process
    sleeps meanwhile) times its core count, from ``/proc/stat``; where that is missing, the 1-minute load average
    (which lags). Units: cores, ``>= 0``."""
    first = _cpu_times()
    if first is None:
        try:
            return max(0.0, os.getloadavg()[0])
        except (AttributeError, OSError):
            return 0.0
    time.sleep(window)
    second = _cpu_times()
    busy, total = second[0] - first[0], second[1] - first[1]
    return max(0.0, busy / total * (os.cpu_count() or 1)) if total > 0 else 0.0


def resolve_threads(requested: int | str | None = AUTO) -> int:
    """The thread count for ``requested``: a positive int (or its text) as given; ``"auto"`` or ``None``: the
    usable cores less the busy ones rounded (a core counts as busy from half its time), at least 1.

    Raises:
        ValueError: anything else (0, a negative number, other text).
    """
    if requested is None or requested == AUTO:
        return max(1, usable_cores() - math.floor(busy_cores() + 0.5))
    try:
        n = int(requested)
    except (TypeError, ValueError):
        raise ValueError(f"threads must be a positive number or {AUTO!r}, got {requested!r}") from None
    if n < 1 or str(n) != str(requested).strip():
        raise ValueError(f"threads must be a positive number or {AUTO!r}, got {requested!r}")
    return n


def prepare_cpu(requested: int | str | None = AUTO) -> int:
    """Set this process's CPU threads for a run and return their number (`resolve_threads`; with
    ``requested`` ``"auto"``, a set ``OMP_NUM_THREADS`` counts as the user's explicit number). Before torch is
    first imported it sets ``OMP_NUM_THREADS``, which torch reads when it loads, so nothing is imported here;
    after, ``torch.set_num_threads``. The count is taken once: later calls with ``"auto"`` in this process (an
    experiment's next arm) find it in ``OMP_NUM_THREADS``. Raises ValueError as `resolve_threads`."""
    if requested in (None, AUTO) and os.environ.get("OMP_NUM_THREADS", "").strip():
        requested = os.environ["OMP_NUM_THREADS"].strip()
    n = resolve_threads(requested)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)
    else:
        os.environ["OMP_NUM_THREADS"] = str(n)
    return n
