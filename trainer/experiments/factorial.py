"""The held-out outcome of a 2x2 arm design, a lever crossed with the writer: does a setting (the *lever*, e.g.
``generation.rollouts_per_task=8``) raise the agent's held-out score, and how much of that needs a *trained*
environment policy? Computed from the arms' ``metrics.jsonl`` and the experiment's ``baseline.json`` alone.

The four arms of one experiment, paired by seed: ``trained`` (``genenv``), ``frozen`` (``random_env``: the same
environment policy, never updated) and each with the lever on (``genenv_n8``, ``random_env_n8``). Per seed and arm
the **AUC** (`genenv.trainer.experiments.report.run_auc`: the mean held-out score over training, against
agent tasks consumed, from the untrained agent's score) and the **final** held-out score. Three contrasts, each
treatment − control per seed (`CONTRASTS`):

- ``lever, writer trained``: trained with the lever − trained;
- ``lever, writer frozen``: frozen with the lever − frozen;
- ``writer, lever off``: trained − frozen.

**Tested** (the family): the three AUC contrasts, each over seeds (mean with its 95 % t interval, exact two-sided
sign-flip test, `seed_test`), Holm-corrected together
(`correct`). **Described, not tested**: the writer's share of the lever,
(trained with lever − trained) − (frozen with lever − frozen) per seed with its 95 % t interval; the contrasts'
final-score differences with their intervals; each arm's final score per difficulty bin (metric keys holding
``=``, e.g. ``heldout/twx/coin/graded/steps=7+``); each contrast's (seed, evaluation) cells with their
intraclass correlation (`cell_summary`). This is the statistic
pre-registered for the confirmatory run in ``docs/results.md``.

The stop rule is kept by `analyse`: it refuses to compute anything while a planned seed (the experiment's
``seeds``) has not finished in all four arms, unless asked for a partial look (``partial=True``).
"""
from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from genenv.trainer.experiments import outcome
from genenv.trainer.experiments.provenance import check_hosts, check_paired, recorded
from genenv.trainer.experiments.report import (arm_dir, finished_runs, first_iteration_note, read_rows, run_auc,
                                               score_key)
from genenv.trainer.experiments.settings import experiment_settings
from genenv.trainer.experiments.stats import correct, mean_interval

__all__ = ["CONTRASTS", "DEFAULT_ARMS", "analyse", "cli", "final_bins", "markdown"]

ROLES = ("trained", "frozen", "trained_lever", "frozen_lever")
DEFAULT_ARMS = ("genenv", "random_env", "genenv_n8", "random_env_n8")  # the confirmatory run's, in ROLES order
CONTRASTS = {"lever, writer trained": ("trained_lever", "trained"),
             "lever, writer frozen": ("frozen_lever", "frozen"),
             "writer, lever off": ("trained", "frozen")}  # name -> (treatment role, control role)


def final_bins(rows: Sequence[dict[str, Any]], key: str = "heldout/score") -> dict[str, float]:
    """The per-bin held-out scores (metric keys under ``heldout/`` holding ``=``, e.g.
    ``heldout/twx/coin/graded/steps=7+``, a success rate in [0, 1]) of a run's last held-out evaluation (the last
    row holding ``key``); ``{}`` when it has none."""
    last = next((r for r in reversed(rows) if key in r), {})
    return {k: float(v) for k, v in last.items() if k.startswith("heldout/") and "=" in k}


def analyse(experiment_dir: Path, arms: Sequence[str] = DEFAULT_ARMS, partial: bool = False,
            mixed_code: bool = False) -> dict[str, Any]:
    """The 2x2 outcome statistic (module docstring) of one experiment folder.

    Args:
        experiment_dir: a ``genenv-experiment`` folder (``experiment.yaml``, ``baseline.json``, ``<arm>/seed<k>``).
        arms: the four arm names in `ROLES` order (trained, frozen, trained with the lever, frozen with it).
        partial: compute over the seeds finished in all four arms even when a planned seed is missing (a look
            that a stop rule forbids; the result says ``complete: False``).
        mixed_code: compare arms whose sittings recorded different code
            (`check_paired`).
    Returns:
        ``experiment``, ``key`` (the held-out metric), ``baseline`` (the untrained agent's score), ``arms`` (role →
        arm), ``seeds`` (finished in all four), ``missing`` (arm → planned seeds not finished), ``complete``;
        ``auc`` and ``final`` (arm → seed → value, score units in [0, 1]); ``tests`` (contrast → the AUC
        `seed_test` with ``p_holm`` and ``family``); ``writer_share``
        (``per_seed`` and ``difference``: mean with its 95 % t interval, AUC units); ``final_difference`` (contrast
        → ``per_seed`` and ``difference``); ``bins`` (arm → bin key → mean final score over the seeds);
        ``cells`` (contrast → ``n_cells``, ``cell_mean``, ``per_seed``, ``icc``); ``code`` (a note on the code the
        arms ran, on their iteration 0 and on each seed's host,
        `check_hosts`).
    Raises:
        FileNotFoundError: no ``experiment.yaml`` or no ``baseline.json`` in ``experiment_dir``.
        ValueError: not four distinct arms; an arm is not in the experiment's ``arms``; no seed finished in all
            four; a planned seed is missing and ``partial`` is false; the arms ran different code and
            ``mixed_code`` is false.
    """
    from omegaconf import OmegaConf

    exp = Path(experiment_dir)
    for name in ("experiment.yaml", "baseline.json"):
        if not (exp / name).is_file():
            raise FileNotFoundError(f"{exp / name} not found: is {exp} a genenv-experiment folder with the untrained "
                                    "agent's score?")
    arms = tuple(arms)
    if len(arms) != len(ROLES) or len(set(arms)) != len(ROLES):
        raise ValueError(f"a 2x2 design needs four distinct arms ({', '.join(ROLES)}), got {list(arms)}")
    settings = experiment_settings(OmegaConf.load(exp / "experiment.yaml"))
    unknown = [a for a in arms if a not in settings.arms]
    if unknown:
        raise ValueError(f"{exp.name} ran no arm {unknown} (its arms: {list(settings.arms)})")
    key = score_key(settings)
    baseline = float(json.loads((exp / "baseline.json").read_text()).get(key, float("nan")))
    runs = {a: finished_runs(exp / a, settings.seeds) for a in arms}
    missing = {a: [s for s in settings.seeds if s not in runs[a]] for a in arms}
    missing = {a: s for a, s in missing.items() if s}
    seeds = [s for s in settings.seeds if all(s in runs[a] for a in arms)]
    if not seeds:
        raise ValueError(f"no seed finished in all four arms of {exp.name}: missing {missing}")
    if missing and not partial:
        raise ValueError(f"planned seeds not finished in {exp.name}: {missing}; the test waits for every seed "
                         "(pass partial=True, --partial, to look anyway)")
    runs = {a: {s: runs[a][s] for s in seeds} for a in arms}
    role = dict(zip(ROLES, arms))
    sittings = {a: {s: read_rows(arm_dir(exp, a, s) / "sittings.jsonl") for s in seeds} for a in arms}
    code = check_paired({a: set().union(*(recorded(sittings[a][s]) for s in seeds)) for a in arms}, mixed_code)
    code = f"{code}; {first_iteration_note({a: {s: arm_dir(exp, a, s) for s in seeds} for a in arms}, runs)}"
    code = f"{code}; {check_hosts({s: {a: recorded(sittings[a][s], 'host') for a in arms} for s in seeds})}"

    auc = functools.partial(run_auc, baseline=baseline, key=key)
    stats = {name: outcome.compare(runs[role[t]], runs[role[c]], auc, key) for name, (t, c) in CONTRASTS.items()}
    tests = {name: s["auc"] for name, s in stats.items()}
    correct(list(tests.values()))
    aucs = {a: {s: auc(runs[a][s]) for s in seeds} for a in arms}
    on_trained, on_frozen = (tests[n]["per_seed"] for n in ("lever, writer trained", "lever, writer frozen"))
    share = {s: on_trained[s] - on_frozen[s] for s in seeds}
    bins = {}
    for a in arms:
        per_seed = [final_bins(runs[a][s], key) for s in seeds]
        names = sorted(set().union(*per_seed))
        bins[a] = {b: float(np.mean([p[b] for p in per_seed if b in p])) for b in names}
    return {"experiment": exp.name, "key": key, "baseline": baseline, "arms": role, "seeds": seeds,
            "missing": missing, "complete": not missing, "auc": aucs,
            "final": {a: {s: outcome.final_score(runs[a][s], key) for s in seeds} for a in arms},
            "tests": tests, "writer_share": {"per_seed": share, "difference": mean_interval(list(share.values()))},
            "final_difference": {n: {"per_seed": s["final"]["per_seed"], "difference": s["final"]["difference"]}
                                 for n, s in stats.items()},
            "bins": bins, "cells": {n: {k: s[k] for k in ("n_cells", "cell_mean", "per_seed", "icc")}
                                    for n, s in stats.items()}, "code": code}


def _pts(x: float | None) -> str:
    return "—" if x is None or np.isnan(x) else f"{100 * x:+.1f}"


def _interval(d: dict[str, float | None]) -> str:
    bounds = "" if d["low"] is None else f" [{_pts(d['low'])}, {_pts(d['high'])}]"
    return f"{_pts(d['mean'])}{bounds}"


def markdown(result: dict[str, Any]) -> list[str]:
    """`analyse`'s result as markdown lines: what was compared, the tested family (AUC per contrast: per-seed
    differences, mean [95 % t], p over seeds, Holm's p), then the described figures; differences in points (100 x
    score units)."""
    role, seeds = result["arms"], result["seeds"]

    def per_seed(values: dict[Any, float]) -> str:
        return ", ".join(f"s{s} {_pts(v)}" for s, v in values.items())

    def pv(x: float | None) -> str:
        return "—" if x is None else f"{x:.4f}"

    arms = ", ".join(f"{r} = `{a}`" for r, a in role.items())
    lines = [f"## Lever x writer, held-out outcome ({result['experiment']}, {result['key']})", "",
             f"Arms: {arms}. Seeds finished in all four: {len(seeds)} ({', '.join(map(str, seeds))}); "
             + ("every planned seed." if result["complete"] else f"**partial look**, missing {result['missing']}."),
             f"Untrained agent: {100 * result['baseline']:.1f} %. Runs' {result['code']}.", "",
             "### Tested: AUC per seed, treatment − control (points), Holm over the three", "",
             "| contrast | treatment − control | per seed | mean [95 % t] | p (seeds) | p (Holm) |",
             "|---|---|---|---|---|---|"]
    for name, (t, c) in CONTRASTS.items():
        test = result["tests"][name]
        lines.append(f"| {name} | `{role[t]}` − `{role[c]}` | {per_seed(test['per_seed'])} | "
                     f"{_interval(test['difference'])} | {pv(test['p_value'])} | {pv(test.get('p_holm'))} |")
    share = result["writer_share"]
    lines += ["", "### Described, not tested", "",
              f"- The writer's share of the lever (AUC, (`{role['trained_lever']}` − `{role['trained']}`) − "
              f"(`{role['frozen_lever']}` − `{role['frozen']}`)): {_interval(share['difference'])} points; "
              f"{per_seed(share['per_seed'])}.",
              "- Final held-out score, treatment − control (points): " + "; ".join(
                  f"{n} {_interval(d['difference'])}" for n, d in result["final_difference"].items()) + ".",
              "- Cells ((seed, evaluation ≥ 1) of both arms): " + "; ".join(
                  f"{n}: {c['n_cells']} cells, mean {_pts(c['cell_mean'])}, ICC "
                  + ("—" if c["icc"] is None else f"{c['icc']:.2f}") for n, c in result["cells"].items()) + ".", ""]
    bins = sorted(set().union(*(b.keys() for b in result["bins"].values())))
    if bins:
        lines += ["| final score per bin (%) | " + " | ".join(f"`{a}`" for a in role.values()) + " |",
                  "|---|" + "---|" * len(role)]
        for b in bins:
            cells = [result["bins"][a].get(b) for a in role.values()]
            lines.append(f"| {b.removeprefix('heldout/')} | "
                         + " | ".join("—" if v is None else f"{100 * v:.1f}" for v in cells) + " |")
    return lines


def cli(argv: Sequence[str]) -> int:
    """``genenv-experiment factorial EXPERIMENT [--arms T F TL FL] [--partial] [--json FILE] [--cache DIR]
    [--mixed-code]``: print `markdown` of `analyse`; exit 2 with a message on an unreadable folder,
    a missing arm or seed."""
    import argparse

    from genenv.trainer.experiments.archive import experiment_folder

    ap = argparse.ArgumentParser(prog="genenv-experiment factorial",
                                 description="held-out outcome of a lever crossed with the writer (2x2 arms, paired "
                                             "by seed; the seed is the unit)")
    ap.add_argument("experiment", help="an experiment folder, or an archive of one: results/<experiment>.tar.xz")
    ap.add_argument("--arms", nargs=4, default=list(DEFAULT_ARMS), metavar=("TRAINED", "FROZEN", "TRAINED_LEVER",
                                                                            "FROZEN_LEVER"),
                    help=f"the four arms (default: {' '.join(DEFAULT_ARMS)})")
    ap.add_argument("--partial", action="store_true",
                    help="compute over the seeds finished so far (a stop rule forbids this look)")
    ap.add_argument("--json", type=Path, default=None, help="also write the full result to this file")
    ap.add_argument("--cache", type=Path, default=None,
                    help="where archives are unpacked (default: <archive folder>/.unpacked)")
    ap.add_argument("--mixed-code", action="store_true", help="compare arms made with different code")
    args = ap.parse_args(list(argv))
    try:
        result = analyse(experiment_folder(args.experiment, args.cache), args.arms, args.partial, args.mixed_code)
    except (FileNotFoundError, ValueError) as e:
        print(f"genenv-experiment factorial: {e}", file=sys.stderr)
        return 2
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    print("\n".join(markdown(result)))
    return 0
