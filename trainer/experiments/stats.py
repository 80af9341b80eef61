"""The statistics both experiment statistics use (:mod:`~genenv.trainer.experiments.alignment`, agent frozen, and
:mod:`~genenv.trainer.experiments.outcome`, agent trained): arms paired by seed into (seed, iteration) cells, the
mean difference with its t interval (``scipy.stats.ttest_1samp``), and the two-sided sign-flip permutation test
(``scipy.stats.permutation_test``) over the cells and over the per-seed means."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

RESAMPLES = 100_000


def paired_cells(treatment: dict[int, Sequence[dict[str, Any]]], control: dict[int, Sequence[dict[str, Any]]],
                 values: Callable[[Sequence[dict[str, Any]]], dict[int, float]], first_iteration: int = 1
                 ) -> list[tuple[int, int, float]]:
    """``(seed, iteration, treatment value - control value)`` for every seed both arms ran and every iteration
    ≥ ``first_iteration`` both have a value at; ``treatment``/``control``: ``{seed: metric rows}``; ``values``: one
    run's rows -> ``{iteration: value}`` (the difficulty-alignment statistic's in-band shares, the outcome
    statistic's held-out scores)."""
    cells = []
    for seed in sorted(set(treatment) & set(control)):
        a, b = values(treatment[seed]), values(control[seed])
        for it in sorted(set(a) & set(b)):
            if it >= first_iteration:
                cells.append((seed, it, a[it] - b[it]))
    return cells


def cell_test(cells: Sequence[tuple[int, int, float]]) -> dict[str, Any]:
    """The paired test on ``cells`` (seed, iteration, difference): ``n_cells``, ``difference`` (mean and 95 % t
    interval, :func:`mean_interval`), ``p_value`` (sign-flip over the cells, :func:`sign_flip_p`), ``per_seed``
    (seed → mean difference of its cells) and ``p_value_seeds`` (sign-flip over the per-seed means)."""
    diffs = [c[2] for c in cells]
    seeds = sorted({c[0] for c in cells})
    per_seed = {s: float(np.mean([c[2] for c in cells if c[0] == s])) for s in seeds}
    return {"n_cells": len(cells), "difference": mean_interval(diffs), "p_value": sign_flip_p(diffs),
            "per_seed": per_seed, "p_value_seeds": sign_flip_p(list(per_seed.values()))}


def sign_flip_p(diffs: Sequence[float], resamples: int = RESAMPLES, seed: int = 0) -> float | None:
    """Two-sided p-value of the sign-flip permutation test of mean(``diffs``) = 0 (``scipy.stats.permutation_test``,
    one sample, ``permutation_type="samples"``); ``None`` for fewer than two values; 1.0 when every value is 0."""
    d = np.asarray(diffs, dtype=float)
    if len(d) < 2:
        return None
    if not np.any(d):
        return 1.0
    from scipy.stats import permutation_test

    res = permutation_test((d,), np.mean, permutation_type="samples", n_resamples=resamples,
                           alternative="two-sided", rng=np.random.default_rng(seed))
    return float(res.pvalue)


def mean_interval(diffs: Sequence[float], level: float = 0.95) -> dict[str, float | None]:
    """``{"mean", "low", "high"}``: the mean of ``diffs`` and its ``level`` t interval (``None`` bounds for fewer
    than two values; both bounds the mean when every value is equal)."""
    d = np.asarray(diffs, dtype=float)
    if len(d) == 0:
        return {"mean": None, "low": None, "high": None}
    if len(d) < 2:
        return {"mean": float(d.mean()), "low": None, "high": None}
    if np.all(d == d[0]):
        return {"mean": float(d[0]), "low": float(d[0]), "high": float(d[0])}
    from scipy.stats import ttest_1samp

    ci = ttest_1samp(d, 0.0).confidence_interval(level)
    return {"mean": float(d.mean()), "low": float(ci.low), "high": float(ci.high)}
