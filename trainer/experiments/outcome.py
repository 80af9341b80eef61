"""Does the trained environment policy help a learning agent? The held-out outcome statistic of a curriculum experiment
with the agent trained, fixed before any run and computed from the arms' ``metrics.jsonl`` alone.

The comparison: ``genenv`` (environment policy trained) against each control in `CONTROLS` (``random_env``,
the same policy frozen; ``replay``, the frozen policy with the pool drawn by curated replay; ``static``, the seed
tasks only; ``genenv_released``, the released GenEnv code's loop with its frozen writer), paired by seed. A cell is one (seed, iteration ≥ 1) at
which both arms evaluated the agent on the held-out split (iteration 0 is left out, as in the alignment statistic:
genenv and random_env write it from the same weights and RNG state, so their difference there is 0 by construction);
its value is genenv's held-out score minus the control's, in the score's own units (a pass rate in [0, 1]).

The tests take one value per seed (`genenv.trainer.experiments.stats`): per seed, the difference of the
**AUC** (the mean held-out score over training, `genenv.trainer.experiments.report.area_under` of the curve
against agent tasks consumed, which charges an arm for the extra tasks it consumed) and of the **final** held-out
score; over seeds, the mean difference with its 95 % t interval and the two-sided sign-flip test
(`seed_test`). The report Holm-corrects these tests together
(`correct`). The cells are described, not tested: their count, mean, each
seed's mean cell difference and their intraclass correlation (`cell_summary`).

Cells pair by iteration, not by tasks consumed: every arm runs the same iterations and agent batch, but the
generating arms also roll out every admitted generated task, so at one iteration they may have consumed more tasks;
the AUC over tasks consumed is the figure that accounts for it.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from genenv.trainer.experiments.stats import cell_summary, paired_cells, seed_test

__all__ = ["compare", "compare_all", "final_score", "markdown", "table", "tests"]

TREATMENT = "genenv"
CONTROLS = ("random_env", "replay", "static", "genenv_released")


def heldout_scores(rows: Sequence[dict[str, Any]], key: str = "heldout/score") -> dict[int, float]:
    """``{iteration: held-out score}`` of one run's metric rows (iterations without a held-out evaluation are left
    out)."""
    return {int(r["iteration"]): float(r[key]) for r in rows if key in r}


def final_score(rows: Sequence[dict[str, Any]], key: str = "heldout/score") -> float:
    """One run's last held-out score (``key`` at its last evaluated iteration, score units in [0, 1]); NaN when it
    has no held-out evaluation."""
    scores = heldout_scores(rows, key)
    return scores[max(scores)] if scores else float("nan")


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
        ``seeds``; ``cells`` (seed, iteration, difference) with `
        cell_summary` (``n_cells``, ``cell_mean``, ``per_seed``: seed → mean cell difference, ``icc``), all
        descriptive; ``final`` and ``auc``: `seed_test` of the per-seed
        differences (``per_seed``, ``n_seeds``, ``difference`` with a 95 % t interval, ``p_value`` over seeds).
    """
    seeds = sorted(set(treatment) & set(control))
    cells = paired_cells(treatment, control, values=lambda rows: heldout_scores(rows, key))

    def per_run(value: Callable[[Sequence[dict[str, Any]]], float],
                control_value: Callable[[Sequence[dict[str, Any]]], float]) -> dict[str, Any]:
        return seed_test({s: value(treatment[s]) - control_value(control[s]) for s in seeds})

    final = functools.partial(final_score, key=key)
    return {"seeds": seeds, "cells": cells, **cell_summary(cells), "auc": per_run(auc, control_auc or auc),
            "final": per_run(final, final)}


def tests(stats: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The tests of `compare_all`'s result, for a report's Holm family: each control's AUC, then final."""
    return [s[k] for s in stats.values() for k in ("auc", "final")]


def compare_all(rows_by_arm: dict[str, dict[int, Sequence[dict[str, Any]]]],
                auc: Callable[[Sequence[dict[str, Any]]], float], key: str = "heldout/score"
                ) -> dict[str, dict[str, Any]]:
    """``{control: compare(genenv, control)}`` for every control of `CONTROLS` that ran beside ``genenv``
    (``{}`` when ``genenv`` did not run)."""
    treatment = rows_by_arm.get(TREATMENT)
    if not treatment:
        return {}
    return {c: compare(treatment, rows_by_arm[c], auc, key) for c in CONTROLS if rows_by_arm.get(c)}


def markdown(stats: dict[str, dict[str, Any]]) -> list[str]:
    """The report's section: its title, what is tested, and `table` with ``genenv`` as the treatment."""
    return ["## Does the trained environment policy help the agent? (held-out score, genenv vs each control)", "",
            f"One difference per seed ({TREATMENT} − the control, in points; s<k>: seed k) of the AUC and of the final "
            "held-out score; mean over seeds with its 95 % t interval, two-sided sign-flip test over seeds, and that p "
            "Holm-corrected over every test of this report. Cells ((seed, iteration ≥ 1) held-out evaluations of both "
            "arms) are described only: the evaluations of one seed are not independent (ICC: the share of the cells' "
            "variance between seeds).", "", *table(stats, TREATMENT)]


def table(stats: dict[str, dict[str, Any]], treatment: str) -> list[str]:
    """One markdown table row per control of ``stats`` (``{control name: compare(...)}``) against ``treatment``:
    seeds; AUC and final differences per seed with their mean, 95 % t interval over seeds, p over seeds and Holm's
    p (``p_holm`` when `correct` ran); the cells' count, mean and ICC
    (descriptive); differences in points (100 x score units)."""
    def pts(x):
        return "—" if x is None or np.isnan(x) else f"{100 * x:+.1f}"

    def pv(x):
        return "—" if x is None else f"{x:.4f}"

    def interval(d):
        return "—" if d["low"] is None else f"[{pts(d['low'])}, {pts(d['high'])}]"

    def test(t):
        return (", ".join(f"s{k} {pts(v)}" for k, v in t["per_seed"].items()) + " | "
                f"{pts(t['difference']['mean'])} {interval(t['difference'])} | {pv(t['p_value'])} | "
                f"{pv(t.get('p_holm'))} |")

    lines = [f"| {treatment} vs | seeds | AUC, per seed | AUC mean [95 % t] | p (seeds) | p (Holm) | final, per seed | "
             "final mean [95 % t] | p (seeds) | p (Holm) | cells: n, mean, ICC |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for control, s in stats.items():
        icc = "—" if s["icc"] is None else f"{s['icc']:.2f}"
        lines.append(f"| {control} | {s['auc']['n_seeds']} | {test(s['auc'])} {test(s['final'])} "
                     f"{s['n_cells']}, {pts(s['cell_mean'])}, {icc} |")
    return lines
