"""The statistics both experiment statistics use (`alignment`, agent frozen, and
`outcome`, agent trained), with the **seed as the unit of analysis**.

The evaluations of one seed share one training trajectory: they are not independent observations (in the shipped
TextWorldExpress experiment the intraclass correlation of the genenv − control differences is 0.4-0.7, so its 30
(seed, evaluation) cells carry the information of ~8-12). Every test therefore takes one value per seed: arms
paired by seed, a per-seed summary (a mean over the seed's iterations, a final score, an AUC), the mean of those
per-seed differences with its t interval (``scipy.stats.ttest_1samp``) and the two-sided sign-flip permutation test
over them (``scipy.stats.permutation_test``; exact below `RESAMPLES` sign patterns, so with ``n`` seeds its
smallest p is ``2 / 2**n``: 0.125 at 4 seeds, 0.031 at 6). The (seed, iteration) cells are kept as a descriptive
figure (`cell_summary`), never tested. A report that makes several tests corrects them with Holm's step-down
method (`holm`).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

__all__ = [
    "SHOWN_BELOW", "cell_summary", "correct", "holm", "intraclass_correlation", "mean_interval", "paired_cells",
    "seed_test", "shows_gain", "sign_flip_p",
]

RESAMPLES = 100_000
SHOWN_BELOW = 0.05  # a difference is shown when its Holm-adjusted p is below this (the pre-registered runs' level)


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


def cell_summary(cells: Sequence[tuple[int, int, float]]) -> dict[str, Any]:
    """Descriptive figures of the (seed, iteration, difference) ``cells``: ``n_cells``, ``cell_mean`` (mean over
    cells), ``per_seed`` (seed → mean difference of its cells) and ``icc``, the one-way intraclass correlation
    ICC(1) of the cells by seed (share of the cells' variance between seeds; ``None`` when it cannot be computed:
    fewer than two seeds, a seed with one cell, or no variance). Not a test: the cells of one seed are not
    independent."""
    seeds = sorted({c[0] for c in cells})
    groups = [np.array([c[2] for c in cells if c[0] == s], dtype=float) for s in seeds]
    per_seed = {s: float(g.mean()) for s, g in zip(seeds, groups)}
    return {"n_cells": len(cells), "cell_mean": float(np.mean([c[2] for c in cells])) if cells else None,
            "per_seed": per_seed, "icc": intraclass_correlation(groups)}


def intraclass_correlation(groups: Sequence[np.ndarray]) -> float | None:
    """ICC(1) of one-way random-effects ANOVA, (MSB − MSW) / (MSB + (k − 1) MSW) with ``k`` the mean group size
    (Shrout & Fleiss 1979); ``None`` for fewer than two groups, a group of one value, or no variance at all."""
    if len(groups) < 2 or any(len(g) < 2 for g in groups):
        return None
    n, k = sum(len(g) for g in groups), float(np.mean([len(g) for g in groups]))
    grand = np.concatenate(groups).mean()
    msb = sum(len(g) * (g.mean() - grand) ** 2 for g in groups) / (len(groups) - 1)
    msw = sum(((g - g.mean()) ** 2).sum() for g in groups) / (n - len(groups))
    if msb + (k - 1) * msw == 0:
        return None
    return float((msb - msw) / (msb + (k - 1) * msw))


def seed_test(per_seed: dict[int, float]) -> dict[str, Any]:
    """The paired test with the seed as the unit: ``per_seed`` (seed → treatment − control of one per-seed
    summary), ``n_seeds``, ``difference`` (mean with its 95 % t interval over seeds, `mean_interval`) and
    ``p_value`` (two-sided sign-flip over seeds, `sign_flip_p`; ``None`` below two seeds)."""
    values = list(per_seed.values())
    return {"per_seed": dict(per_seed), "n_seeds": len(values), "difference": mean_interval(values),
            "p_value": sign_flip_p(values)}


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (Holm 1979) of a family of tests, in the given order: sorted ascending,
    the i-th smallest (0-based) becomes max over j ≤ i of min(1, (m − j) p_(j)), ``m`` the number of p-values that
    are not ``None`` (``None`` stays ``None``). Written here: scipy has no Holm correction (``statsmodels`` does,
    a large dependency for five lines)."""
    given = [(p, i) for i, p in enumerate(p_values) if p is not None]
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(given)):
        running = max(running, min(1.0, (len(given) - rank) * p))
        out[i] = running
    return out


def correct(tests: Sequence[dict[str, Any]]) -> None:
    """Holm-correct a report's family of `seed_test` results in place: each gets ``p_holm`` and
    ``family`` (the number of tests in the family)."""
    for test, adjusted in zip(tests, holm([t["p_value"] for t in tests])):
        test["p_holm"], test["family"] = adjusted, len(tests)


def shows_gain(test: dict[str, Any]) -> bool:
    """Whether a Holm-corrected `seed_test` (after `correct`) shows a gain: a positive mean difference and
    ``p_holm`` below `SHOWN_BELOW`, the reading the pre-registered runs fixed (``lab/notes/twx-confirmatory.md``,
    ``lab/notes/twx-headroom.md``). ``False`` when the test has no p-value (fewer than two seeds).

    Raises:
        KeyError: ``test`` was not corrected (no ``p_holm``).
    """
    p = test["p_holm"]
    return p is not None and p < SHOWN_BELOW and test["difference"]["mean"] > 0


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
