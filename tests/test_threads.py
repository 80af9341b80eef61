"""CPU threads of a run (``runtime/threads.py``): an explicit number wins, ``auto`` leaves the cores that other
processes keep busy, and the setting reaches torch whether or not it is imported yet."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from genenv.runtime.threads import busy_cores, resolve_threads, usable_cores


def test_an_explicit_number_wins_and_bad_values_are_refused():
    assert resolve_threads(3) == 3 and resolve_threads("2") == 2
    for bad in (0, -1, "x", "2.5", 1.5):
        with pytest.raises(ValueError, match="threads must be a positive number or 'auto'"):
            resolve_threads(bad)


def test_auto_leaves_the_cores_that_other_processes_keep_busy():
    """With every usable core spun by another process, ``auto`` gives 1 thread and the busy cores are counted."""
    n = usable_cores()
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        import time

        time.sleep(0.5)  # let them start spinning
        assert busy_cores(window=0.5) >= n - 0.5
        assert resolve_threads("auto") == 1
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def run_fresh(code: str, **env: str) -> str:
    """``code`` in a new interpreter (torch not imported yet), with ``env`` added; its stdout, stripped."""
    clean = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**clean, **env},
                         timeout=120, check=True)
    return out.stdout.strip()


def test_the_setting_reaches_torch_before_and_after_it_is_imported():
    show = "import torch; print(n, torch.get_num_threads())"
    before = "from genenv.runtime.threads import prepare_cpu; n = prepare_cpu(1); " + show
    assert run_fresh(before) == "1 1"  # set through the environment, before torch loads
    after = "import torch; from genenv.runtime.threads import prepare_cpu; n = prepare_cpu(1); " + show
    assert run_fresh(after) == "1 1"
    explicit = "from genenv.runtime.threads import prepare_cpu; n = prepare_cpu('auto'); " + show
    assert run_fresh(explicit, OMP_NUM_THREADS="1") == "1 1"  # the user's OMP_NUM_THREADS counts as explicit
