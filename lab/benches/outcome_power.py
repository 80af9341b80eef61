"""How many paired seeds the held-out outcome statistic (``trainer/experiments/outcome.py``) needs to detect a given difference,
estimated from a finished experiment's spread.

    python lab/benches/outcome_power.py docs/curriculum/twx_outcome --difference 0.10

For each control of the experiment's outcome statistic (``summary.json``: ``outcome``) it reads the per-seed
differences of the AUC and of the final score (genenv − control, one value per seed: the seed is the unit of
analysis), takes their sample standard deviation σ, and prints the smallest number of seeds n for which a two-sided
paired t-test at level 0.05 has power ≥ 0.8 against a true mean difference of ``--difference`` (score units: 0.10 =
10 points): power = P(|T| > t_crit) with T noncentral t (df n − 1, noncentrality δ √n / σ), scipy's ``nct``. The
sign-flip permutation test of ``outcome.py`` has about the t-test's power at these sizes, and over n seeds it can
reach p < 0.05 only when 2 / 2^n < 0.05, i.e. n ≥ 6. A report's Holm correction over k tests asks each for level
0.05 / k at worst, so the figure is a lower bound. The cells are not used: the evaluations of one seed are not
independent.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np


def t_power(n: int, sd: float, difference: float, level: float = 0.05) -> float:
    """Power of a two-sided one-sample (paired) t-test with ``n`` pairs of standard deviation ``sd`` against a
    true mean ``difference``."""
    from scipy import stats

    df = n - 1
    crit = stats.t.ppf(1 - level / 2, df)
    nc = difference * math.sqrt(n) / sd
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def pairs_needed(sd: float, difference: float, power: float = 0.8, level: float = 0.05, most: int = 1000) -> int:
    """The smallest n ≥ 2 with `t_power` ≥ ``power`` (``most`` + 1 when none up to ``most``)."""
    return next((n for n in range(2, most + 1) if t_power(n, sd, difference, level) >= power), most + 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment", type=Path, help="an experiment folder with summary.json")
    ap.add_argument("--difference", type=float, default=0.10, help="true mean difference to detect (score units)")
    args = ap.parse_args()
    summary = json.loads((args.experiment / "summary.json").read_text())
    floor = next(n for n in range(1, 64) if 2 / 2 ** n < 0.05)
    print(f"difference {100 * args.difference:.0f} points, two-sided level 0.05, power 0.8; "
          f"the sign-flip test over seed means reaches p < 0.05 only from {floor} seeds")
    for control, stat in summary["outcome"].items():
        parts = []
        for key in ("auc", "final"):
            values = list(stat[key]["per_seed"].values())
            sd = float(np.std(values, ddof=1))
            n = pairs_needed(sd, args.difference)
            parts.append(f"{key} sd {100 * sd:.1f} points over {len(values)} seeds -> {max(n, floor)} seeds "
                         f"(t-test alone: {n})")
        print(f"genenv vs {control}: " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
