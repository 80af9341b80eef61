"""Does the trained environment policy help a learning agent? The held-out outcome statistic of a curriculum experiment
with the agent trained, fixed before any run and computed from the arms' ``metrics.jsonl`` alone.

The comparison: ``genenv`` (environment policy trained) against each control in :data:`CONTROLS` (``random_env``,
the same policy frozen; ``replay``, the frozen policy with the pool drawn by curated replay; ``static``, the seed
tasks only), paired by seed. A cell is one (seed, iteration ≥ 1) at
which both arms evaluated the agent on the held-out split (iteration 0 is left out, as in the alignment statistic:
genenv and random_env write it from the same weights and RNG state, so their difference there is 0 by construction);
its value is genenv's held-out score minus the control's, in the score's own units (a pass rate in [0, 1]). On the
cells, with the functions the difficulty-alignment statistic uses too (:mod:`genenv.trainer.experiments.stats`:
:func:`~genenv.trainer.experiments.stats.paired_cells`, :func:`~genenv.trainer.experiments.stats.cell_test`): the
mean difference with a 95 % t interval and a two-sided sign-flip permutation test; the same test on the per-seed mean differences (conservative: the cells of one seed share a
training trajectory); and per seed the difference of the final score and of the AUC (the mean held-out score over
training, :func:`genenv.trainer.experiments.report.area_under` of the curve against agent tasks consumed, which
charges an arm for the extra tasks it consumed).

Cells pair by iteration, not by tasks consumed: every arm runs the same iterations and agent batch, but the
generating arms also roll out every admitted generated task, so at one iteration they may have consumed more tasks;
the AUC over tasks consumed is the figure that accounts for it.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from genenv.trainer.experiments.stats import cell_test, mean_interval, paired_cells, sign_flip_p

TREATMENT = "genenv"
CONTROLS = ("random_env", "replay", "static")


def heldout_scores(rows: Sequence[dict[str, Any]], key: str = "heldout/score") -> dict[int, float]:
    """``{iteration: held-out score}`` of one run's metric rows (iterations without a held-out evaluation are left
    out)."""
    return {int(r["iteration"]): float(r[key]) for r in rows if key in r}


def compare(treatment: dict[int, Sequence[dict[str, Any]]], control: dict[int, Sequence[dict[str, Any]]],
            auc: Callable[[Sequence[dict[str, Any]]], float], key: str = "heldout/score",
            control_auc: Callable[[Sequence[dict[str, Any]]], float] | None = None) -> dict[str, Any]:
    """The statistic for one treatment-control pair over the seeds both finished.

    Args:
        treatment, control: ``{seed: metric rows}`` of each arm.
        auc: metric rows -> the run's AUC (the report's curve area, so that both use one definition).
        key: the held-out metric compared.
        control_auc: the control's AUC when its curve starts from another untrained-agent score (arms of two
            experiments); default ``auc``.
    Returns:
        ``cells`` (seed, iteration, difference), ``n_cells``, ``difference`` (mean and 95 % t interval, score
        units), ``p_value`` (sign-flip over cells), ``per_seed`` (seed -> mean cell difference),
        ``p_value_seeds``, ``final`` and ``auc`` (each: ``per_seed`` differences, their ``difference`` with a t
        interval and ``p_value`` over seeds).
    """
    seeds = sorted(set(treatment) & set(control))
    cells = paired_cells(treatment, control, values=lambda rows: heldout_scores(rows, key))

    def per_run(value: Callable[[Sequence[dict[str, Any]]], float],
                control_value: Callable[[Sequence[dict[str, Any]]], float]) -> dict[str, Any]:
        d = {s: value(treatment[s]) - control_value(control[s]) for s in seeds}
        return {"per_seed": d, "difference": mean_interval(list(d.values())), "p_value": sign_flip_p(list(d.values()))}

    def final(rows):
        scores = heldout_scores(rows, key)
        return scores[max(scores)] if scores else float("nan")

    return {"seeds": seeds, "cells": cells, **cell_test(cells), "final": per_run(final, final),
            "auc": per_run(auc, control_auc or auc)}


def compare_all(rows_by_arm: dict[str, dict[int, Sequence[dict[str, Any]]]],
                auc: Callable[[Sequence[dict[str, Any]]], float], key: str = "heldout/score"
                ) -> dict[str, dict[str, Any]]:
    """``{control: compare(genenv, control)}`` for every control of :data:`CONTROLS` that ran beside ``genenv``
    (``{}`` when ``genenv`` did not run)."""
    treatment = rows_by_arm.get(TREATMENT)
    if not treatment:
        return {}
    return {c: compare(treatment, rows_by_arm[c], auc, key) for c in CONTROLS if rows_by_arm.get(c)}


def markdown(stats: dict[str, dict[str, Any]]) -> list[str]:
    """The report's section: its title, what a cell is, and :func:`table` with ``genenv`` as the treatment."""
    return ["## Does the trained environment policy help the agent? (held-out score, genenv vs each control)", "",
            "Cells: (seed, iteration ≥ 1) at which both arms evaluated the agent on the held-out split; "
            f"value = {TREATMENT}'s held-out score − the control's, in points. Final and AUC: one difference per "
            "seed (s<k>: seed k).", "", *table(stats, TREATMENT)]


def table(stats: dict[str, dict[str, Any]], treatment: str) -> list[str]:
    """One markdown table row per control of ``stats`` (``{control name: compare(...)}``) against ``treatment``:
    cells, mean difference with its 95 % t interval, p over cells and over seeds, final and AUC differences per
    seed with their mean, interval and p; differences in points (100 x score units)."""
    def pts(x):
        return "—" if x is None or np.isnan(x) else f"{100 * x:+.1f}"

    def pv(x):
        return "—" if x is None else f"{x:.4f}"

    def interval(d):
        return "—" if d["low"] is None else f"[{pts(d['low'])}, {pts(d['high'])}]"

    lines = [f"| {treatment} vs | cells | mean difference [95 % t] | p (cells) | p (seed means) | final, per seed | "
             "final mean [95 % t], p | AUC, per seed | AUC mean [95 % t], p |", "|---|---|---|---|---|---|---|---|---|"]
    for control, s in stats.items():
        f, a = s["final"], s["auc"]
        lines.append(
            f"| {control} | {s['n_cells']} | {pts(s['difference']['mean'])} {interval(s['difference'])} | "
            f"{pv(s['p_value'])} | {pv(s['p_value_seeds'])} | "
            + ", ".join(f"s{k} {pts(v)}" for k, v in f["per_seed"].items()) + " | "
            f"{pts(f['difference']['mean'])} {interval(f['difference'])}, {pv(f['p_value'])} | "
            + ", ".join(f"s{k} {pts(v)}" for k, v in a["per_seed"].items()) + " | "
            f"{pts(a['difference']['mean'])} {interval(a['difference'])}, {pv(a['p_value'])} |")
    return lines
