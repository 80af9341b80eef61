"""The held-out outcome of named arm contrasts in one experiment, paired by seed, the seed the unit: for each contrast
``treatment − control`` the per-seed difference of the **AUC** (`genenv.trainer.experiments.report.run_auc`: the mean
held-out score over training, against agent tasks consumed, from the untrained agent's score) and of the **final**
held-out score. Computed from the arms' ``metrics.jsonl`` and the experiment's ``baseline.json`` alone.

**Tested** (the family): each contrast's AUC difference over seeds (mean with its 95 % t interval, exact two-sided
sign-flip test, `seed_test`), Holm-corrected together (`correct`). **Described, not tested**: the contrasts'
final-score differences with their intervals; each arm's final score per difficulty bin (metric keys holding ``=``,
e.g. ``heldout/twx/coin/graded/steps=3``); each contrast's (seed, evaluation) cells with their intraclass correlation
(`cell_summary`); what each arm's task source gave its pool (`source_summary`: tasks generated, admitted and
admitted in the difficulty band per seed, and the levels a steered source drew); with a **bound** arm (an upper
bound such as the ``oracle`` task source, named as the treatment of a contrast), the share of the bound's AUC
difference over its control that each other arm reaches (`bound_shares`), given only where the bound's own
contrast shows a gain (`genenv.trainer.experiments.stats.shows_gain`): a share of a difference that is not shown
reads noise as a fraction.

The stop rule is kept by `analyse`: it refuses to compute anything while a planned seed (the experiment's ``seeds``)
has not finished in every arm of a contrast, unless asked for a partial look (``partial=True``). The 2x2 design
(`genenv.trainer.experiments.factorial`) is this statistic with its three contrasts and one more described figure.
``genenv-experiment contrasts EXPERIMENT --contrast T-C [--contrast ...]`` prints it (`cli`).
"""
from __future__ import annotations

import functools
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from genenv.trainer.experiments import outcome
from genenv.trainer.experiments.provenance import check_hosts, check_paired, recorded
from genenv.trainer.experiments.report import (arm_dir, final_state, finished_runs, first_iteration_note, read_rows,
                                               run_auc, score_key, short_runs)
from genenv.trainer.experiments.settings import experiment_settings
from genenv.trainer.experiments.stats import SHOWN_BELOW, correct, shows_gain

__all__ = ["analyse", "bound_shares", "cli", "described_lines", "final_bins", "interval_text", "markdown",
           "parse_contrast", "parser", "per_seed_text", "run_command", "source_lines", "source_summary", "tested_rows"]

LEVEL = "/level="  # a steered task source's run-long counter of tasks drawn at a level: ``<source>/level=<name>``


def final_bins(rows: Sequence[dict[str, Any]], key: str = "heldout/score") -> dict[str, float]:
    """The per-bin held-out scores (metric keys under ``heldout/`` holding ``=``, e.g.
    ``heldout/twx/coin/graded/steps=7+``, a success rate in [0, 1]) of a run's last held-out evaluation (the last
    row holding ``key``); ``{}`` when it has none."""
    last = next((r for r in reversed(rows) if key in r), {})
    return {k: float(v) for k, v in last.items() if k.startswith("heldout/") and "=" in k}


def source_summary(run_dir: Path, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What one finished run's task source gave its pool: ``generated`` and ``admitted`` (tasks written or drawn,
    and those that passed validation and joined the pool: the run-long counters of its ``final_state.json``, 0 when
    a counter is absent, ``None`` when the run kept no ``final_state.json``), ``in_band`` (admitted tasks whose p̂
    fell in the difficulty band, |p̂ − α| <= k_min: the sum of the metric rows' ``gen/in_band``, ``None`` when no
    row logs it) and ``levels`` (``{level name: tasks}`` from the counters ``<source>/level=<name>`` of a source
    steered by difficulty level, e.g. ``oracle``; ``{}`` for others)."""
    state = final_state(run_dir)
    counters = state.get("counters", {})
    logged = [r["gen/in_band"] for r in rows if r.get("gen/in_band") is not None]
    return {**{k: int(counters.get(k, 0)) if state else None for k in ("generated", "admitted")},
            "in_band": int(sum(logged)) if logged else None,
            "levels": {k.split(LEVEL, 1)[1]: int(v) for k, v in counters.items() if LEVEL in k}}


def bound_shares(auc: dict[str, dict[int, float]], bound: str, control: str) -> dict[str, dict[str, Any]]:
    """The share of the ``bound`` arm's AUC difference over ``control`` that each other arm reaches: per arm,
    ``per_seed`` ``{seed: (arm − control) / (bound − control)}`` (``None`` where the bound equals the control) and
    ``of_means`` (mean of arm − control over mean of bound − control, ``None`` when the latter is 0). ``auc`` is
    `analyse`'s arm → seed → AUC; seeds are those of ``bound``. A described figure, meaningful only where the
    bound's difference is shown (`analyse` computes it only then)."""
    seeds = list(auc[bound])
    gap = {s: auc[bound][s] - auc[control][s] for s in seeds}
    mean_gap = float(np.mean(list(gap.values())))
    out = {}
    for arm in auc:
        if arm in (bound, control):
            continue
        diff = {s: auc[arm][s] - auc[control][s] for s in seeds}
        out[arm] = {"per_seed": {s: (diff[s] / gap[s] if gap[s] else None) for s in seeds},
                    "of_means": float(np.mean(list(diff.values()))) / mean_gap if mean_gap else None}
    return out


def parse_contrast(text: str) -> tuple[str, str]:
    """``"treatment-control"`` → ``(treatment, control)`` (arm names hold ``_``, not ``-``).

    Raises:
        ValueError: not two non-empty names joined by one ``-``, or the same arm twice.
    """
    parts = text.split("-")
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise ValueError(f"a contrast is 'treatment-control' with two different arms, got {text!r}")
    return parts[0], parts[1]


def analyse(experiment_dir: Path, contrasts: dict[str, tuple[str, str]], partial: bool = False,
            mixed_code: bool = False, order: Sequence[str] = (), bound: str | None = None) -> dict[str, Any]:
    """The statistic (module docstring) of ``contrasts`` in one experiment folder.

    Args:
        experiment_dir: a ``genenv-experiment`` folder (``experiment.yaml``, ``baseline.json``, ``<arm>/seed<k>``).
        contrasts: contrast name → ``(treatment arm, control arm)``, in the order of the report.
        partial: compute over the seeds finished in every arm even when a planned seed is missing (a look that a
            stop rule forbids; the result says ``complete: False``).
        mixed_code: compare arms whose sittings recorded different code (`check_paired`).
        order: the arms in the order the notes and tables list them (default: as the contrasts first name them).
        bound: an arm that bounds the others (the treatment of the first contrast naming it as treatment; that
            contrast's control is the reference): adds ``bound`` and ``shares`` (`bound_shares`, only where that
            contrast shows a gain, `shows_gain`).
    Returns:
        ``experiment``, ``key`` (the held-out metric), ``baseline`` (the untrained agent's score), ``contrasts``,
        ``arms`` (every arm, in first-named order), ``seeds`` (finished in every arm), ``missing`` (arm → planned
        seeds not finished), ``complete``; ``auc`` and ``final`` (arm → seed → value, score units in [0, 1]);
        ``tests`` (contrast → the AUC `seed_test` with ``p_holm`` and ``family``); ``final_difference`` (contrast →
        ``per_seed`` and ``difference``); ``bins`` (arm → bin key → mean final score over the seeds); ``cells``
        (contrast → ``n_cells``, ``cell_mean``, ``per_seed``, ``icc``); ``code`` (a note on the code the arms ran,
        on their iteration 0 and on each seed's host, `check_hosts`); ``sources`` (arm → ``generated``,
        ``admitted`` and ``in_band``, each seed → tasks, and ``levels``, level → tasks over the seeds:
        `source_summary`); with ``bound``, ``bound`` (``{"arm", "control", "contrast", "shown"}``: the bound's contrast
        and whether it shows a gain) and ``shares`` (`bound_shares` when ``shown``, else ``None``).
    Raises:
        FileNotFoundError: no ``experiment.yaml`` or no ``baseline.json`` in ``experiment_dir``.
        ValueError: no contrast; ``order`` names an arm no contrast has; ``bound`` is no contrast's treatment; an
            arm is not in the experiment's ``arms``; no seed finished in every arm; a
            planned seed is missing and ``partial`` is false; the arms ran different code and ``mixed_code`` is
            false.
    """
    from omegaconf import OmegaConf

    exp = Path(experiment_dir)
    for name in ("experiment.yaml", "baseline.json"):
        if not (exp / name).is_file():
            raise FileNotFoundError(f"{exp / name} not found: is {exp} a genenv-experiment folder with the untrained "
                                    "agent's score?")
    if not contrasts:
        raise ValueError("no contrast to compute")
    extra = set(order) - {a for pair in contrasts.values() for a in pair}
    if extra:
        raise ValueError(f"order names arms no contrast compares: {sorted(extra)}")
    arms = tuple(dict.fromkeys([*order, *(a for pair in contrasts.values() for a in pair)]))
    bound_contrast = next((n for n, (t, _) in contrasts.items() if t == bound), None)
    if bound is not None and bound_contrast is None:
        raise ValueError(f"the bound {bound!r} is the treatment of no contrast: name one, e.g. {bound}-static")
    settings = experiment_settings(OmegaConf.load(exp / "experiment.yaml"))
    unknown = [a for a in arms if a not in settings.arms]
    if unknown:
        raise ValueError(f"{exp.name} ran no arm {unknown} (its arms: {list(settings.arms)})")
    key = score_key(settings)
    baseline = float(json.loads((exp / "baseline.json").read_text()).get(key, float("nan")))
    runs = {a: finished_runs(exp / a, settings.seeds, settings.iterations) for a in arms}
    missing = {a: [s for s in settings.seeds if s not in runs[a]] for a in arms}
    missing = {a: s for a, s in missing.items() if s}
    seeds = [s for s in settings.seeds if all(s in runs[a] for a in arms)]
    if not seeds:
        raise ValueError(f"no seed finished in all {len(arms)} arms of {exp.name}: missing {missing}")
    if missing and not partial:
        short = short_runs(exp, arms, settings.seeds, settings.iterations)
        lengthened = "" if not short else (
            f" (finished fewer than its {settings.iterations} iterations, before a lengthening: "
            + "; ".join(f"{a} " + ", ".join(f"seed {s} ran {n}" for s, n in r.items()) for a, r in short.items()) + ")")
        raise ValueError(f"planned seeds not finished in {exp.name}: {missing}{lengthened}; the test waits for every "
                         "seed (pass partial=True, --partial, to look anyway)")
    runs = {a: {s: runs[a][s] for s in seeds} for a in arms}
    sittings = {a: {s: read_rows(arm_dir(exp, a, s) / "sittings.jsonl") for s in seeds} for a in arms}
    code = check_paired({a: set().union(*(recorded(sittings[a][s]) for s in seeds)) for a in arms}, mixed_code)
    code = f"{code}; {first_iteration_note({a: {s: arm_dir(exp, a, s) for s in seeds} for a in arms}, runs)}"
    code = f"{code}; {check_hosts({s: {a: recorded(sittings[a][s], 'host') for a in arms} for s in seeds})}"

    auc = functools.partial(run_auc, baseline=baseline, key=key)
    stats = {name: outcome.compare(runs[t], runs[c], auc, key) for name, (t, c) in contrasts.items()}
    tests = {name: s["auc"] for name, s in stats.items()}
    correct(list(tests.values()))
    bins = {}
    for a in arms:
        per_seed = [final_bins(runs[a][s], key) for s in seeds]
        names = sorted(set().union(*per_seed))
        bins[a] = {b: float(np.mean([p[b] for p in per_seed if b in p])) for b in names}
    sources = {}
    for a in arms:
        each = {s: source_summary(arm_dir(exp, a, s), runs[a][s]) for s in seeds}
        sources[a] = {k: {s: each[s][k] for s in seeds} for k in ("generated", "admitted", "in_band")}
        levels = sum((Counter(each[s]["levels"]) for s in seeds), Counter())
        sources[a]["levels"] = dict(sorted(levels.items(), key=lambda kv: (-kv[1], kv[0])))
    auc_values = {a: {s: auc(runs[a][s]) for s in seeds} for a in arms}
    extra = {}
    if bound is not None:
        reference, shown = contrasts[bound_contrast][1], shows_gain(tests[bound_contrast])
        extra = {"bound": {"arm": bound, "control": reference, "contrast": bound_contrast, "shown": shown},
                 "shares": bound_shares(auc_values, bound, reference) if shown else None}
    return {"experiment": exp.name, "key": key, "baseline": baseline, "contrasts": dict(contrasts),
            "arms": list(arms), "seeds": seeds, "missing": missing, "complete": not missing,
            "auc": auc_values,
            "final": {a: {s: outcome.final_score(runs[a][s], key) for s in seeds} for a in arms},
            "tests": tests,
            "final_difference": {n: {"per_seed": s["final"]["per_seed"], "difference": s["final"]["difference"]}
                                 for n, s in stats.items()},
            "bins": bins, "cells": {n: {k: s[k] for k in ("n_cells", "cell_mean", "per_seed", "icc")}
                                    for n, s in stats.items()}, "code": code, "sources": sources, **extra}


def _pts(x: float | None) -> str:
    return "—" if x is None or np.isnan(x) else f"{100 * x:+.1f}"


def interval_text(d: dict[str, float | None]) -> str:
    """``"+1.2 [-0.3, +2.7]"``: a `mean_interval` in points (100 x score units)."""
    bounds = "" if d["low"] is None else f" [{_pts(d['low'])}, {_pts(d['high'])}]"
    return f"{_pts(d['mean'])}{bounds}"


def per_seed_text(values: dict[Any, float]) -> str:
    """``"s0 +1.0, s1 -2.5, ..."``: per-seed values in points."""
    return ", ".join(f"s{s} {_pts(v)}" for s, v in values.items())


def tested_rows(result: dict[str, Any], contrasts: dict[str, tuple[str, str]]) -> list[str]:
    """The tested family as markdown table rows (header included): per contrast of ``contrasts`` (name →
    (treatment, control) as shown), the per-seed AUC differences, mean [95 % t], p over seeds and Holm's p."""

    def pv(x: float | None) -> str:
        return "—" if x is None else f"{x:.4f}"

    lines = ["| contrast | treatment − control | per seed | mean [95 % t] | p (seeds) | p (Holm) |",
             "|---|---|---|---|---|---|"]
    for name, (t, c) in contrasts.items():
        test = result["tests"][name]
        lines.append(f"| {name} | `{t}` − `{c}` | {per_seed_text(test['per_seed'])} | "
                     f"{interval_text(test['difference'])} | {pv(test['p_value'])} | {pv(test.get('p_holm'))} |")
    return lines


def described_lines(result: dict[str, Any], arms: Sequence[str], first: Sequence[str] = ()) -> list[str]:
    """The described figures as markdown: ``first`` (bullets of the caller's own), the final-score differences,
    the cells, then the final score per bin of each of ``arms``."""
    lines = ["", "### Described, not tested", "", *first,
             "- Final held-out score, treatment − control (points): " + "; ".join(
                 f"{n} {interval_text(d['difference'])}" for n, d in result["final_difference"].items()) + ".",
             "- Cells ((seed, evaluation ≥ 1) of both arms): " + "; ".join(
                 f"{n}: {c['n_cells']} cells, mean {_pts(c['cell_mean'])}, ICC "
                 + ("—" if c["icc"] is None else f"{c['icc']:.2f}") for n, c in result["cells"].items()) + ".", ""]
    bins = sorted(set().union(*(b.keys() for b in result["bins"].values())))
    if bins:
        lines += ["| final score per bin (%) | " + " | ".join(f"`{a}`" for a in arms) + " |",
                  "|---|" + "---|" * len(arms)]
        for b in bins:
            cells = [result["bins"][a].get(b) for a in arms]
            lines.append(f"| {b.removeprefix('heldout/')} | "
                         + " | ".join("—" if v is None else f"{100 * v:.1f}" for v in cells) + " |")
    return lines


def _per_seed_counts(values: dict[Any, int | None]) -> str:
    known = [v for v in values.values() if v is not None]
    if not known:
        return "—"
    return f"{np.mean(known):.1f} ({min(known)}-{max(known)})"


def source_lines(result: dict[str, Any]) -> list[str]:
    """`analyse`'s ``sources`` (and ``shares`` when a bound was named) as markdown bullets: per arm the tasks its
    source generated, admitted and admitted in band per seed (mean, min-max), the levels a steered source drew (tasks
    over all seeds), and each arm's share of the bound's difference (or why it is not given)."""
    parts = []
    for arm, src in result["sources"].items():
        known = [v for k in ("generated", "admitted") for v in src[k].values() if v is not None]
        if known and not any(known):
            parts.append(f"`{arm}` none")
            continue
        parts.append(f"`{arm}` generated {_per_seed_counts(src['generated'])}, admitted "
                     f"{_per_seed_counts(src['admitted'])}, in band {_per_seed_counts(src['in_band'])}")
    lines = ["- Tasks each arm's source gave its pool, per seed (mean, min-max): " + "; ".join(parts) + "."]
    for arm, src in result["sources"].items():
        if src["levels"]:
            lines.append(f"- Levels `{arm}` drew (tasks over {len(result['seeds'])} seeds): "
                         + ", ".join(f"{name} {n}" for name, n in src["levels"].items()) + ".")
    if "bound" in result:
        bound, control = result["bound"]["arm"], result["bound"]["control"]
        head = f"- Share of the `{bound}` − `{control}` AUC difference each arm reaches"
        if result["shares"] is None:
            test = result["tests"][result["bound"]["contrast"]]
            p = "—" if test["p_holm"] is None else f"{test['p_holm']:.4f}"
            lines.append(f"{head}: not given, since that difference is not shown ({interval_text(test['difference'])}"
                         f" points, Holm p {p}; a bound is shown at a positive mean and Holm p < {SHOWN_BELOW}).")
        else:
            lines.append(f"{head} ((arm − `{control}`) / (`{bound}` − `{control}`)): " + "; ".join(
                f"`{arm}` " + ("—" if sh["of_means"] is None else f"{sh['of_means']:.2f}")
                + " of the mean difference, per seed " + ", ".join(
                    f"s{s} " + ("—" if v is None else f"{v:.2f}") for s, v in sh["per_seed"].items())
                for arm, sh in result["shares"].items()) + ".")
    return lines


def markdown(result: dict[str, Any]) -> list[str]:
    """`analyse`'s result as markdown lines: what was compared, the tested family, the described figures;
    differences in points (100 x score units)."""
    seeds = result["seeds"]
    n = len(result["contrasts"])
    return [f"## Held-out outcome of {n} contrasts ({result['experiment']}, {result['key']})", "",
            f"Arms: {', '.join(f'`{a}`' for a in result['arms'])}. Seeds finished in every arm: {len(seeds)} "
            f"({', '.join(map(str, seeds))}); "
            + ("every planned seed." if result["complete"] else f"**partial look**, missing {result['missing']}."),
            f"Untrained agent: {100 * result['baseline']:.1f} %. Runs' {result['code']}.", "",
            f"### Tested: AUC per seed, treatment − control (points), Holm over the {n}", "",
            *tested_rows(result, result["contrasts"]),
            *described_lines(result, result["arms"], first=source_lines(result))]


def parser(prog: str, description: str):
    """An ``argparse`` parser with what the outcome commands share: the experiment (folder or archive),
    ``--partial``, ``--json FILE``, ``--cache DIR``, ``--mixed-code``."""
    import argparse

    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("experiment", help="an experiment folder, or an archive of one: results/<experiment>.tar.xz")
    ap.add_argument("--partial", action="store_true",
                    help="compute over the seeds finished so far (a stop rule forbids this look)")
    ap.add_argument("--json", type=Path, default=None, help="also write the full result to this file")
    ap.add_argument("--cache", type=Path, default=None,
                    help="where archives are unpacked (default: <archive folder>/.unpacked)")
    ap.add_argument("--mixed-code", action="store_true", help="compare arms made with different code")
    return ap


def run_command(prog: str, args, compute: Callable[[Path], dict[str, Any]],
                render: Callable[[dict[str, Any]], list[str]]) -> int:
    """Compute on ``args.experiment`` (unpacked when an archive), write ``--json``, print ``render``'s lines;
    0, or 2 with ``prog``'s message on stderr when the folder, an arm, a seed or an argument is refused."""
    from genenv.trainer.experiments.archive import experiment_folder

    try:
        result = compute(experiment_folder(args.experiment, args.cache))
    except (FileNotFoundError, ValueError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    print("\n".join(render(result)))
    return 0


def cli(argv: Sequence[str]) -> int:
    """``genenv-experiment contrasts EXPERIMENT --contrast T-C [--contrast ...] [--bound ARM] [--partial]
    [--json FILE] [--cache DIR] [--mixed-code]``: print `markdown` of `analyse` (each contrast named ``T - C``); exit
    2 with a message on an unreadable folder, a bad contrast, a missing arm or seed."""
    prog = "genenv-experiment contrasts"
    ap = parser(prog, "held-out outcome of arm contrasts, paired by seed (the seed is the unit), AUC tested with Holm "
                      "over the contrasts")
    ap.add_argument("--contrast", action="append", required=True, metavar="TREATMENT-CONTROL",
                    help="an arm contrast, e.g. oracle-static (repeat; the first is listed first)")
    ap.add_argument("--bound", default=None, metavar="ARM",
                    help="an arm that bounds the others, the treatment of a contrast (e.g. oracle): also print the "
                         "share of its difference each other arm reaches, where that difference is shown")
    args = ap.parse_args(list(argv))

    def compute(folder: Path) -> dict[str, Any]:
        pairs = [parse_contrast(c) for c in args.contrast]
        return analyse(folder, {f"{t} - {c}": (t, c) for t, c in pairs}, args.partial, args.mixed_code,
                       bound=args.bound)

    return run_command(prog, args, compute, markdown)
