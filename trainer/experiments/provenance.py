"""Where a run was made: the code and the host of each sitting, so that a comparison pairs only runs that can be
bitwise paired.

Two arms of one seed start from the same weights, RNG state and seed tasks, so with the same code on the same kind
of machine their iteration 0 is identical until a strategy acts (tested). Other code, or another CPU (bf16 and
float32 kernels round differently on AMX and AVX2 hosts), departs from the first sampled token on, and a lever
compared against such a run measures that departure as well as the lever. Each sitting of an experiment's run
appends :func:`provenance` to its ``sittings.jsonl``; :func:`check_paired` refuses to compare arms whose recorded
code differs unless told otherwise, and says what it found. Runs made before the record existed have none
(``unknown``): they are compared with a note.
"""
from __future__ import annotations

import functools
import platform
import subprocess
from pathlib import Path
from typing import Any, Mapping, Sequence


@functools.cache
def code_version() -> str:
    """The package's git commit (``<sha>``, ``<sha>+dirty`` with uncommitted changes to tracked files) when it runs
    from a git checkout, else ``genenv <installed version>``."""
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        import importlib.metadata

        try:
            return f"genenv {importlib.metadata.version('genenv')}"
        except importlib.metadata.PackageNotFoundError:
            return "unknown"


@functools.cache
def host() -> str:
    """The CPU model (``/proc/cpuinfo``'s ``model name``, else ``platform.processor()``) and the torch version."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:  # not Linux: the platform's own name
        cpuinfo = ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 platform.processor() or platform.machine())
    try:
        import torch

        return f"{model}; torch {torch.__version__}"
    except ImportError:
        return model


def provenance() -> dict[str, str]:
    """``{"code": code_version(), "host": host()}`` for a sitting's record."""
    return {"code": code_version(), "host": host()}


def recorded(sittings: Sequence[Mapping[str, Any]], field: str = "code") -> set[str]:
    """The values of ``field`` over a run's sittings (rows of its ``sittings.jsonl``); ``{"unknown"}`` when no
    sitting recorded it."""
    return {str(s[field]) for s in sittings if s.get(field)} or {"unknown"}


def check_paired(codes: Mapping[str, set[str]], mixed_code: bool = False) -> str:
    """Whether arms (``{arm name: recorded code versions over its paired seeds}``) ran the same code; returns a
    one-line note for the report.

    Raises:
        ValueError: two arms recorded different code and ``mixed_code`` is false.
    """
    known = {arm: c - {"unknown"} for arm, c in codes.items()}
    versions = set().union(*known.values()) if known else set()
    if any(not c for c in known.values()):
        return "code: not recorded for " + ", ".join(a for a, c in known.items() if not c) + " (runs made before " \
               "sittings recorded it); pairing at iteration 0 is not checked"
    if len(versions) <= 1:
        return f"code: {next(iter(versions))} in every arm" if versions else "code: not recorded"
    listing = "; ".join(f"{arm}: {', '.join(sorted(c))}" for arm, c in known.items())
    if not mixed_code:
        raise ValueError(f"runs made with different code ({listing}): their iteration 0 is not the same, so a "
                         "difference mixes the code change with the arms'; pass mixed_code (--mixed-code) to "
                         "compare them anyway")
    return f"code differs, compared as asked: {listing}"
