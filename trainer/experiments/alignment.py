"""Does the environment policy learn? The difficulty-alignment statistic of a curriculum experiment, fixed before
any run and computed from the arms' ``metrics.jsonl`` alone.

The metric, per run and iteration: the **in-band share** = generations whose task's p̂ lies in the α band
``|p̂ - α| ≤ k_min``, divided by *all* generations of that iteration (a rejected, copied or invalid generation counts
as a miss, so a writer of only impossible or only broken tasks scores 0; ``gen/in_band_share`` in the metric row).

The comparison: ``genenv`` (environment policy trained on R_env) against ``random_env`` (the same policy frozen),
paired by seed. A cell is one (seed, iteration) with iteration ≥ 1 that both arms finished; its value is
genenv's in-band share minus random_env's. Iteration 0 is left out: both arms generate it from the same initial
weights and RNG state, so its difference is 0 by construction. The test takes one value per seed, the seed's mean
cell difference (`genenv.trainer.experiments.stats`, the seed as the unit: the cells of one seed share a policy
trajectory): their mean with a 95 % t interval (``scipy.stats.ttest_1samp``) and a two-sided sign-flip permutation
test of mean difference = 0 (``scipy.stats.permutation_test`` with one sample and ``permutation_type="samples"``,
exact for up to 16 seeds). The cells are described (count, mean, intraclass correlation), not tested.

With the agent frozen (``agent_batch=frozen``) the agent is a stationary target, so a difference is the
environment policy's learning alone.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from genenv.trainer.experiments.stats import cell_summary, paired_cells, seed_test
from genenv.trainer.metrics import P_HAT_BINS

__all__ = ["PAIR", "compare", "draw_band", "in_band_shares", "markdown", "plot"]


PAIR = ("genenv", "random_env")  # the compared arms: treatment, control


def in_band_count(row: dict[str, Any]) -> int:
    """Generations of one metric row whose task's p̂ lies in the α band (``gen/in_band``; 0 in a row that generated
    nothing)."""
    return int(row.get("gen/in_band", 0))


def in_band_shares(rows: Sequence[dict[str, Any]]) -> dict[int, float]:
    """``{iteration: in-band share of all generations}`` of one run's metric rows; iterations that generated
    nothing are left out."""
    out = {}
    for r in rows:
        n = r.get("gen/generated", 0)
        if n:
            out[int(r["iteration"])] = in_band_count(r) / n
    return out


def generated_p_hat(rows: Sequence[dict[str, Any]]) -> dict[int, float]:
    """``{iteration: mean p̂ of the admitted generated tasks}`` (iterations that admitted none left out)."""
    return {int(r["iteration"]): float(np.mean(r["p_hat/generated"])) for r in rows if r.get("p_hat/generated")}


def compare(treatment: dict[int, Sequence[dict[str, Any]]], control: dict[int, Sequence[dict[str, Any]]],
            names: tuple[str, str] = PAIR) -> dict[str, Any]:
    """The whole statistic (see the module docstring) over the seeds both arms finished (an unpaired seed is left
    out everywhere, so the arms' figures cover the same seeds): ``cells`` (seed, iteration, difference) with
    ``n_cells``, ``cell_mean`` and ``icc`` (descriptive); the seed test (``per_seed``: seed → mean cell difference,
    ``n_seeds``, ``difference``: mean and 95 % t interval over seeds, ``p_value``: sign-flip over seeds); and per
    arm (keyed by ``names``: treatment, control) ``by_iteration``: mean over seeds of the in-band share and of the
    generated tasks' mean p̂, ``share`` (in-band generations / all generations over the run), ``share_of_admitted``
    (in-band / admitted: difficulty alone, without validity) and ``p_hat_histogram`` (10 bins of 0.1 over the
    admitted generated tasks of every seed)."""
    paired = sorted(set(treatment) & set(control))
    treatment, control = {k: treatment[k] for k in paired}, {k: control[k] for k in paired}
    cells = paired_cells(treatment, control, values=in_band_shares)
    arms = {}
    for name, runs in zip(names, (treatment, control)):
        shares = [in_band_shares(rows) for rows in runs.values()]
        p_hats = [generated_p_hat(rows) for rows in runs.values()]
        its = sorted({i for s in shares for i in s})
        in_band = sum(in_band_count(r) for rows in runs.values() for r in rows)
        generated = sum(r.get("gen/generated", 0) for rows in runs.values() for r in rows)
        admitted = sum(r.get("gen/admitted", 0) for rows in runs.values() for r in rows)
        p_admitted = [p for rows in runs.values() for r in rows for p in r.get("p_hat/generated", [])]
        arms[name] = {
            "seeds": sorted(runs),
            "by_iteration": {i: {"in_band_share": float(np.mean([s[i] for s in shares if i in s])),
                                 "p_hat_generated": (float(np.mean([p[i] for p in p_hats if i in p]))
                                                     if any(i in p for p in p_hats) else None)} for i in its},
            "in_band": int(in_band), "generated": int(generated), "admitted": int(admitted),
            "share": in_band / generated if generated else None,
            "share_of_admitted": in_band / admitted if admitted else None,
            "p_hat_histogram": np.histogram(p_admitted, bins=P_HAT_BINS)[0].tolist()}
    described = cell_summary(cells)
    return {"cells": cells, **described, **seed_test(described["per_seed"]), "arms": arms}


def markdown(stat: dict[str, Any], alpha: float, k_min: float) -> list[str]:
    """The report's section on the statistic: per-arm totals, the test, and the per-iteration table."""
    d = stat["difference"]
    treated, control = list(stat["arms"])

    def pts(x):
        return "—" if x is None else f"{100 * x:+.1f}"

    def pv(x):
        return "—" if x is None else f"{x:.4f}"

    lines = [f"## Does the environment policy learn? (difficulty alignment, {treated} vs {control})", "",
             f"In-band share = generations whose task's p̂ lies in [{alpha - k_min:g}, {alpha + k_min:g}] over all "
             "generations (rejections count as misses). Cells: (seed, iteration ≥ 1) both arms finished; value = "
             f"{treated}'s share − {control}'s, in points.", "",
             "| arm | seeds | in band / generated | admitted | in band / admitted | p̂ histogram of admitted tasks "
             "(10 bins of 0.1) |", "|---|---|---|---|---|---|"]
    for name, a in stat["arms"].items():
        share = "—" if a["share"] is None else f"{a['in_band']}/{a['generated']} ({100 * a['share']:.1f} %)"
        of_adm = "—" if a["share_of_admitted"] is None else f"{100 * a['share_of_admitted']:.1f} %"
        lines.append(f"| {name} | {len(a['seeds'])} | {share} | {a['admitted']} | {of_adm} | {a['p_hat_histogram']} |")
    interval = ("—" if d["low"] is None else f"[{100 * d['low']:+.1f}, {100 * d['high']:+.1f}]")
    icc = "—" if stat["icc"] is None else f"{stat['icc']:.2f}"
    holm = f", Holm-corrected over the report's {stat['family']} tests p = {pv(stat['p_holm'])}" if "p_holm" in stat else ""
    lines += ["", "- per seed (mean over its iterations): " + (", ".join(f"seed {s} {pts(v)}" for s, v in
                                                                   stat["per_seed"].items()) or "—"),
              f"- over the {stat['n_seeds']} seeds: mean difference {pts(d['mean'])} points, 95 % t interval "
              f"{interval}; sign-flip test over seeds p = {pv(stat['p_value'])}{holm}",
              f"- cells (descriptive; the iterations of one seed are not independent): {stat['n_cells']}, mean "
              f"{pts(stat['cell_mean'])} points, intraclass correlation {icc}", "",
              "| iteration | " + " | ".join(f"{a} in band | {a} mean p̂ gen." for a in stat["arms"]) + " |",
              "|---|" + "---|---|" * len(stat["arms"])]
    its = sorted({i for a in stat["arms"].values() for i in a["by_iteration"]})
    for i in its:
        cells = []
        for a in stat["arms"].values():
            b = a["by_iteration"].get(i)
            cells += (["—", "—"] if b is None else
                      [f"{100 * b['in_band_share']:.1f} %",
                       "—" if b["p_hat_generated"] is None else f"{b['p_hat_generated']:.2f}"])
        lines.append(f"| {i} | " + " | ".join(cells) + " |")
    return lines


def draw_band(ax, alpha: float, k_min: float) -> None:
    """Shade the α band ``[α - k_min, α + k_min]`` (clipped to [0, 1]) on a p̂ axis and draw α."""
    ax.axhspan(max(0.0, alpha - k_min), min(1.0, alpha + k_min), color="grey", alpha=0.15,
               label=f"α band {alpha:g} ± {k_min:g}")
    ax.axhline(alpha, color="grey", lw=1)


def plot(stat: dict[str, Any], alpha: float, k_min: float, out) -> None:
    """``alignment.png``: per iteration, each arm's in-band share (mean over seeds) and the mean p̂ of its
    generated tasks with the α band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.2))
    for (name, a), (color, marker) in zip(stat["arms"].items(), (("C0", "o"), ("C1", "s"))):
        its = sorted(a["by_iteration"])
        ax.plot(its, [100 * a["by_iteration"][i]["in_band_share"] for i in its], marker=marker, color=color,
                label=f"{name} ({len(a['seeds'])} seeds)")
        pts = [(i, a["by_iteration"][i]["p_hat_generated"]) for i in its
               if a["by_iteration"][i]["p_hat_generated"] is not None]
        bx.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, color=color, label=name)
    ax.set(xlabel="iteration", ylabel="in-band share of all generations (%)",
           title="generations whose p̂ lies in the α band")
    ax.legend()
    draw_band(bx, alpha, k_min)
    bx.set(xlabel="iteration", ylabel="mean p̂ of generated tasks", ylim=(-0.02, 1.02), title="p̂ of generated tasks")
    bx.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
