"""Where a run was made: the code and the host of each sitting, so that a comparison pairs only runs that can be
bitwise paired.

Two arms of one seed start from the same weights, RNG state and seed tasks, so with the same code on the same kind
of machine their iteration 0 is identical until a strategy acts (tested). Other code, or another CPU (bf16 kernels
round differently on AMX and on AVX-512 bf16 hosts, and AVX2 hosts sample in float32), departs in the first
iteration's rollouts (measured at `87575eb`: 3,827 against 3,970 tokens on one seed, AVX-512 bf16 against AMX), and
a lever compared against such a run measures that departure as well as the lever. Each sitting of an experiment's
run appends `provenance` to its ``sittings.jsonl``; `check_paired` refuses to compare arms whose
recorded code differs unless told otherwise, and says what it found. Runs made before the record existed have none
(``unknown``): they are compared with a note. The same code and host are not always enough (a run that shared its
cores with another process departed in one environment-policy sample of eight; TextWorldExpress draws a door game's
gold path from an unseeded random walk, so whether a written ``steps`` is reachable can differ), so
`check_first_iteration` also compares, arm by arm, what the environment policy wrote and what the agent's
rollouts gave at iteration 0, and says at which seeds they differ; `check_hosts` lists each seed's host and
names a seed whose arms ran on more than one.
"""
from __future__ import annotations

import functools
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = [
    "check_first_iteration", "check_hosts", "check_paired", "code_version", "cpu_kernels", "cpu_model",
    "first_rollouts", "first_writes", "host", "provenance", "recorded",
]


@functools.cache
def code_version(tree: Path | str | None = None) -> str:
    """The package's git commit (``<sha>``, ``<sha>+dirty`` with uncommitted changes to tracked files) when it runs
    from a git checkout, else ``genenv <installed version>``; with ``tree``, that source tree's commit the same way
    (``"unknown"`` when it is not a git checkout)."""
    root = Path(tree) if tree is not None else Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        if tree is not None:
            return "unknown"
        import importlib.metadata

        try:
            return f"genenv {importlib.metadata.version('genenv')}"
        except importlib.metadata.PackageNotFoundError:
            return "unknown"


@functools.cache
def cpu_model() -> str:
    """The CPU's model name: ``/proc/cpuinfo``'s ``model name`` (e.g. ``"AMD EPYC"``), else the platform's own
    (``platform.processor()``, else ``platform.machine()``) where there is no such file (not Linux)."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    return next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                platform.processor() or platform.machine())


def cpu_kernels() -> str:
    """The kernels torch computes with on this CPU: its SIMD level (``torch.backends.cpu.get_cpu_capability()``)
    and its native bfloat16 path (`genenv.runtime.models.bfloat16_path`: ``amx``, ``avx512_bf16`` or none),
    e.g. ``"AVX512, avx512_bf16"`` or ``"AVX2"``. Raises ``ImportError`` without torch."""
    import torch

    from genenv.runtime.models import bfloat16_path

    path = bfloat16_path("cpu")
    return f"{torch.backends.cpu.get_cpu_capability()}{', ' + path if path else ''}"


@functools.cache
def host() -> str:
    """`cpu_model`, `cpu_kernels` and the torch version, e.g. ``"AMD EPYC; AVX512, avx512_bf16; torch
    2.13.0+cpu"`` (the model name alone without torch).

    One model name covers CPUs whose kernels differ (2-core "AMD EPYC" hosts with AVX2 only and with AVX-512 bf16
    were both seen), and they round differently, so a run's record names the kernels."""
    try:
        import torch

        return f"{cpu_model()}; {cpu_kernels()}; torch {torch.__version__}"
    except ImportError:
        return cpu_model()


def provenance() -> dict[str, Any]:
    """``{"code": code_version(), "host": host(), "threads": n}`` for a sitting's record: ``n`` is torch's intra-op
    thread count where torch is loaded (a reduction split over another number of threads rounds differently, so
    runs made with other counts are not bitwise paired), else ``None``."""
    torch = sys.modules.get("torch")
    return {"code": code_version(), "host": host(), "threads": torch.get_num_threads() if torch else None}


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


def check_hosts(hosts: Mapping[int, Mapping[str, set[str]]]) -> str:
    """Which host each seed's arms ran on (``hosts`` = ``{seed: {arm name: recorded(sittings, "host")}}``); returns a
    one-line note for the report: the seeds of each host, then any seed whose arms (or one arm's sittings) recorded
    more than one host, which is not bitwise paired (module docstring). It does not raise."""
    by_host: dict[str, list[int]] = {}
    mixed: list[str] = []
    for seed in sorted(hosts):
        found = set().union(*hosts[seed].values()) if hosts[seed] else {"unknown"}
        if len(found) > 1:
            mixed.append(f"{seed} (" + "; ".join(f"{arm}: {', '.join(sorted(h))}" for arm, h in hosts[seed].items())
                         + ")")
        else:
            by_host.setdefault(next(iter(found)), []).append(seed)
    note = "host: " + "; ".join(f"{h} at seed{'s' if len(s) > 1 else ''} {', '.join(map(str, s))}"
                                for h, s in by_host.items())
    return note + (f"; **arms on different hosts** at seed {', '.join(mixed)}" if mixed else "")


def first_writes(generations: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The environment policy's texts at iteration 0, in order, from a run's ``generations.jsonl`` rows; empty
    where it wrote nothing there (a task source without a writer at iteration 0)."""
    return tuple(str(r.get("text")) for r in generations if r.get("iteration") == 0)


def first_rollouts(metrics: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    """What the agent's iteration-0 rollouts gave, from a run's ``metrics.jsonl`` rows: ``(agent/generated_tokens,
    agent/reward_mean)`` (tokens, mean episode reward in [0, 1]); empty without an iteration-0 row."""
    row = next((r for r in metrics if r.get("iteration") == 0), None)
    return () if row is None else (row.get("agent/generated_tokens"), row.get("agent/reward_mean"))


def check_first_iteration(found: Mapping[str, Mapping[int, tuple[Any, ...]]], what: str = "environment-policy texts"
                          ) -> str:
    """Whether arms (``{arm name: {seed: first_writes(...) or first_rollouts(...)}}``) gave the same ``what`` at
    iteration 0, seed by seed, among the arms that have it there; returns a one-line note for the report. Arms of
    one seed whose task sources write alike (``genenv``, ``random_env``, their ``n8`` arms) must write the same
    texts, and arms that also roll out alike (``genenv`` and ``random_env``) the same rollouts; a split such as
    ``genenv | random_env`` names the groups of arms that agree. It does not raise: arms whose task sources write
    differently (``genenv_released``) or roll out more episodes (``n8``) split by design."""
    seeds = sorted(set().union(*(v.keys() for v in found.values()))) if found else []
    splits: dict[str, list[int]] = {}
    for seed in seeds:
        groups: dict[tuple[Any, ...], list[str]] = {}
        for arm, by_seed in found.items():
            if by_seed.get(seed):
                groups.setdefault(by_seed[seed], []).append(arm)
        if sum(map(len, groups.values())) >= 2:
            key = "the same" if len(groups) == 1 else "split " + " | ".join(", ".join(g) for g in groups.values())
            splits.setdefault(key, []).append(seed)
    if not splits:
        return f"iteration 0's {what}: not checked (fewer than two arms at one seed)"
    return f"iteration 0's {what}: " + "; ".join(
        f"{key} at seed{'s' if len(s) > 1 else ''} {', '.join(map(str, s))}" for key, s in splits.items())
