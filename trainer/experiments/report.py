"""The report of a curriculum experiment (`genenv.trainer.experiments.run`): ``summary.json``, ``summary.md`` and
``curves.png`` in the experiment directory, computed from the arms' ``metrics.jsonl`` and ``baseline.json`` alone.

Per arm, over its finished seeds (mean, sample standard deviation, min and max):

- **final** and **best held-out score**: the benchmark's headline metric (``heldout/score``), or the metric named
  by the experiment's ``score_metric`` (``heldout/<score_metric>``), after the last
  iteration, and the best of its held-out evaluations;
- **AUC**: the area under the held-out curve (score against agent tasks consumed, trapezoids from the untrained
  agent's score at 0 tasks) divided by the tasks consumed: the mean held-out score over training;
- **tasks to reach static**: agent tasks consumed (mean over seeds) at the first held-out evaluation where the
  arm's mean score reaches the ``static`` arm's final mean score, and the data-efficiency ratio = ``static``'s
  tasks / this arm's tasks (> 1: fewer tasks); ``None`` when not reached, or when ``static`` did not improve on
  the untrained agent (then no arm needs any task to reach it, and the ratio says nothing);
- **admission rate** (admitted / generated, the up-front generation of ``static_aug`` included), **share of
  iterations with an environment-policy update**, and **mean |p̂ - α|** of the generated tasks rolled out, over
  the first and the second half of the iterations;
- **seconds per phase** of one iteration (mean) and the wall time of the runs;
- **agent batches** (runs that log their GRPO groups, `genenv.trainer.metrics.group_counts`): rollouts
  consumed, groups trained on per iteration, equal-reward groups dropped per task origin, informative groups left
  over, refill rounds and generated tokens per iteration, and the rollouts consumed when the arm reaches
  ``static``'s final score (`batch_summary`);
- **per seed**, one row per finished arm-seed (`seed_summary`): its held-out scores, AUC, agent batches and
  seconds.

When ``genenv`` and a control (``random_env``, ``replay``, ``static``) ran with held-out evaluations, the report adds the
held-out outcome statistic of `genenv.trainer.experiments.outcome` (the seed as the unit: AUC and final
differences per seed, their mean with a 95 % t interval and a sign-flip test over seeds; the (seed, evaluation)
cells described only). When both ``genenv`` and ``random_env`` ran, the report adds the difficulty-alignment
statistic of `genenv.trainer.experiments.alignment` (the in-band share of all generations, one mean
difference per seed, tested over seeds) and ``alignment.png``. Every test of a report is Holm-corrected with the
others (`correct`; the report says how many). `compare_arms` and
`compare_outcome` give the same two statistics for arm folders of two experiments.

Agent tasks consumed after iteration i = the sum of ``agent/tasks`` over iterations 0..i (each task rolled out
``agent.n`` times).
"""
from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from genenv.trainer.experiments import alignment, outcome
from genenv.trainer.experiments.archive import DONE_FILE
from genenv.trainer.experiments.settings import ExperimentSettings, experiment_settings
from genenv.trainer.experiments.provenance import (check_first_iteration, check_paired, first_rollouts, first_writes,
                                                   recorded)
from genenv.trainer.experiments.stats import correct

__all__ = [
    "area_under", "arm_dir", "compare_arms", "compare_outcome", "final_state", "finished_runs", "first_iteration_note",
    "iterations_run", "reach_static", "read_rows", "run_auc", "score_key", "seed_curve", "short_runs", "write_report",
]


def arm_dir(experiment_dir: Path, arm: str, seed: int) -> Path:
    """The run directory of ``arm`` at ``seed``: ``<experiment_dir>/<arm>/seed<seed>``."""
    return Path(experiment_dir) / arm / f"seed{seed}"


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The JSON Lines rows of ``path`` (``[]`` when it does not exist).

    Raises:
        json.JSONDecodeError: a non-blank line is not JSON (a `ValueError`).
    """
    if not Path(path).is_file():
        return []
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def final_state(run_dir: Path) -> dict[str, Any]:
    """A finished run's loop state as its experiment kept it (``final_state.json``: ``counters``, the run-long
    counts, ``iteration``, ...; written by `genenv.trainer.experiments.run.finish_arm`); ``{}`` when it kept none."""
    path = Path(run_dir) / "final_state.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def iterations_run(run_dir: Path) -> int | None:
    """The iterations a finished run ran, as its ``done.json`` records them (written by
    `genenv.trainer.experiments.run.finish_arm`); ``None`` for a run without one (unfinished, or stopped).

    Raises:
        ValueError: ``done.json`` is not ``{"iterations": <int>}`` (a corrupted marker).
    """
    done = Path(run_dir) / DONE_FILE
    if not done.is_file():
        return None
    try:
        return int(json.loads(done.read_text())["iterations"])
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{done}: not a finished run's marker ({e!r})") from e


def finished_runs(arm_folder: Path, seeds: Sequence[int] | None = None,
                  iterations: int = 0) -> dict[int, list[dict[str, Any]]]:
    """``{seed: metric rows}`` of the finished runs in one arm's folder (``<experiment_dir>/<arm>``): the `arm_dir`
    whose ``done.json`` records at least ``iterations`` iterations (`iterations_run`; an experiment's report passes
    its own, so a run finished before the experiment was lengthened is not counted), over ``seeds`` (default: every
    ``seed<k>`` folder there), in their order.

    Raises:
        ValueError: a seed's ``done.json`` is corrupted (`iterations_run`), or a line of a counted run's
            ``metrics.jsonl`` is not JSON (``json.JSONDecodeError``).
    """
    folder = Path(arm_folder)
    if seeds is None:
        seeds = sorted(int(d.name[4:]) for d in folder.glob("seed*") if d.name[4:].isdigit())
    runs: dict[int, list[dict[str, Any]]] = {}
    for seed in map(int, seeds):
        d = arm_dir(folder.parent, folder.name, seed)
        ran = iterations_run(d)
        if ran is not None and ran >= iterations:
            runs[seed] = read_rows(d / "metrics.jsonl")
    return runs


def seed_curve(rows: Sequence[dict[str, Any]], baseline: float, key: str = "heldout/score",
               consumed_key: str = "agent/tasks") -> tuple[list[float], list[float]]:
    """``(tasks consumed, held-out score)`` at 0 (the untrained agent's ``baseline``) and after every iteration
    with a held-out evaluation (rows holding ``key``); ``consumed_key="agent/rollouts"`` counts rollouts instead."""
    xs, ys, consumed = [0.0], [float(baseline)], 0.0
    for r in rows:
        consumed += r.get(consumed_key, 0)
        if key in r:
            xs.append(consumed)
            ys.append(float(r[key]))
    return xs, ys


def area_under(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Trapezoid area under ``ys`` over ``xs`` divided by the x range (the curve's mean height; ``ys[0]`` for a
    single point)."""
    if len(xs) < 2 or xs[-1] <= xs[0]:
        return float(ys[0]) if len(ys) else float("nan")
    return float(np.trapezoid(ys, xs) / (xs[-1] - xs[0]))


def run_auc(rows: Sequence[dict[str, Any]], baseline: float, key: str = "heldout/score") -> float:
    """The AUC of one run from its metric ``rows``: `area_under` its `seed_curve` from the untrained
    agent's ``baseline`` (a fraction; ``baseline`` itself for a run without an evaluation): the AUC that the
    outcome statistic (`genenv.trainer.experiments.outcome`) compares, in the report and in `compare_outcome`,
    and that the per-seed rows (`seed_summary`) give."""
    return area_under(*seed_curve(rows, baseline, key))


def spread(values: Sequence[float]) -> dict[str, float | int | None]:
    """``{"mean", "sd", "min", "max", "n"}`` of the finite ``values`` (sd: sample standard deviation, ``None``
    for fewer than two; all ``None`` when empty)."""
    v = [float(x) for x in values if x is not None and not math.isnan(float(x))]
    if not v:
        return {"mean": None, "sd": None, "min": None, "max": None, "n": 0}
    return {"mean": float(np.mean(v)), "sd": float(np.std(v, ddof=1)) if len(v) > 1 else None,
            "min": float(min(v)), "max": float(max(v)), "n": len(v)}


def arm_summary(runs: dict[int, dict[str, Any]], baseline: float, alpha: float, key: str = "heldout/score"
                ) -> dict[str, Any]:
    """The summary of one arm from its finished seeds ``{seed: {"rows", "state", "sittings"}}`` (see the module
    docstring), scored by the held-out metric ``key``; ``curve`` holds the mean held-out curve (``tasks``,
    ``mean``, ``min``, ``max`` per evaluation)."""
    curves = {s: seed_curve(r["rows"], baseline, key) for s, r in runs.items()}
    n_points = min(len(c[0]) for c in curves.values())
    xs = np.array([c[0][:n_points] for c in curves.values()])
    ys = np.array([c[1][:n_points] for c in curves.values()])
    generated = admitted = updates = iterations = 0
    p_first: list[float] = []
    p_second: list[float] = []
    p_by_iter: dict[int, list[float]] = {}
    phases: dict[str, list[float]] = {}
    for run in runs.values():
        rows = run["rows"]
        counters = run["state"].get("counters", {})
        generated += sum(r.get("gen/generated", 0) for r in rows) + counters.get("upfront/generated", 0)
        admitted += sum(r.get("gen/admitted", 0) for r in rows) + counters.get("upfront/admitted", 0)
        updates += sum(1 for r in rows if not r.get("env_policy_update/skipped", False))
        iterations += len(rows)
        half = (len(rows) + 1) // 2
        for i, r in enumerate(rows):
            gaps = [abs(p - alpha) for p in r.get("p_hat/generated", [])]
            (p_first if i < half else p_second).extend(gaps)
            p_by_iter.setdefault(r["iteration"], []).extend(r.get("p_hat/generated", []))
            for k, v in r.items():
                if k.startswith("time/"):
                    phases.setdefault(k.split("/", 1)[1], []).append(float(v))
    per_seed = {s: seed_summary(r["rows"], baseline, key, r["state"].get("counters", {}).get("upfront/seconds", 0.0))
                for s, r in runs.items()}
    return {
        "seeds": sorted(runs),
        "final": spread(ys[:, -1]), "best": spread(ys.max(axis=1)),
        "auc": spread([area_under(c[0], c[1]) for c in curves.values()]),
        "tasks_consumed": spread(xs[:, -1]),
        "curve": {"tasks": xs.mean(axis=0).tolist(), "mean": ys.mean(axis=0).tolist(),
                  "min": ys.min(axis=0).tolist(), "max": ys.max(axis=0).tolist()},
        "generated": generated, "admitted": admitted,
        "admission_rate": admitted / generated if generated else None,
        "upfront_admitted": [r["state"].get("counters", {}).get("upfront/admitted") for r in runs.values()],
        "env_update_share": updates / iterations if iterations else None,
        "p_gap_first_half": float(np.mean(p_first)) if p_first else None,
        "p_gap_second_half": float(np.mean(p_second)) if p_second else None,
        "p_hat_generated_by_iteration": {int(k): float(np.mean(v)) for k, v in sorted(p_by_iter.items()) if v},
        "seconds_per_iteration": {k: float(np.mean(v)) for k, v in phases.items()},
        "loop_seconds": spread([p["loop_seconds"] for p in per_seed.values()]),
        "per_seed": per_seed,
        "wall_seconds": float(sum(x["wall_seconds"] for r in runs.values() for x in r["sittings"])),
        **({"batches": batches} if (batches := batch_summary(runs, baseline, key)) else {}),
    }


BATCH_KEY = "agent/groups_informative"  # present in the rows of runs that log their GRPO groups


def dropped_groups(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Equal-reward groups dropped from the agent batches of metric ``rows``, in total per task origin:
    ``{"seed": int, "generated": int}``."""
    return {o: int(sum(r.get(f"agent/groups_dropped/{o}", 0) for r in rows)) for o in ("seed", "generated")}


def seed_summary(rows: Sequence[dict[str, Any]], baseline: float, key: str = "heldout/score",
                 upfront_seconds: float = 0.0) -> dict[str, Any]:
    """One finished arm-seed from its metric ``rows``: ``heldout`` (the held-out score, a fraction, after every
    iteration with an evaluation, in order), ``auc`` (the `run_auc` of ``rows``; ``None`` without
    an evaluation), the mean seconds of one iteration (``seconds_per_iteration``, ``time/total``) and of the loop
    (``loop_seconds``: every iteration's ``time/total`` and ``time/heldout_eval`` plus ``upfront_seconds``, the
    up-front generation of ``static_aug``); for runs that log their GRPO groups (`BATCH_KEY`) also
    ``rollouts`` and ``groups_trained`` per iteration (means) and ``groups_dropped`` per task origin (totals)."""
    xs, ys = seed_curve(rows, baseline, key)
    out: dict[str, Any] = {"heldout": ys[1:], "auc": area_under(xs, ys) if len(ys) > 1 else None,
                           "seconds_per_iteration": float(np.mean([r.get("time/total", 0.0) for r in rows])),
                           "loop_seconds": upfront_seconds + sum(r.get("time/total", 0.0)
                                                                 + r.get("time/heldout_eval", 0.0) for r in rows)}
    if rows and all(BATCH_KEY in r for r in rows):
        out |= {k: float(np.mean([r.get(f"agent/{k}", 0) for r in rows])) for k in ("rollouts", "groups_trained")}
        out["groups_dropped"] = dropped_groups(rows)
    return out


def batch_summary(runs: dict[int, dict[str, Any]], baseline: float, key: str = "heldout/score"
                  ) -> dict[str, Any] | None:
    """The agent batches of one arm's finished seeds (``None`` when its rows do not log their groups,
    `BATCH_KEY`): ``rollouts_consumed`` (spread over seeds), per iteration (mean over iterations and seeds)
    ``groups_trained``, ``refill_rounds``, ``generated_tokens`` and ``rollouts``; totals over every seed of
    ``groups_dropped`` per origin (``seed``, ``generated``) and ``groups_surplus``; ``rollout_curve`` (mean rollouts
    consumed at each held-out evaluation)."""
    rows = [r for run in runs.values() for r in run["rows"]]
    if not rows or not all(BATCH_KEY in r for r in rows):
        return None
    curves = [seed_curve(run["rows"], baseline, key, "agent/rollouts")[0] for run in runs.values()]
    n_points = min(len(c) for c in curves)

    def per_iteration(k: str) -> float:
        return float(np.mean([r.get(k, 0) for r in rows]))

    return {"rollouts_consumed": spread([c[-1] for c in curves]),
            "rollout_curve": np.mean([c[:n_points] for c in curves], axis=0).tolist(),
            **{k: per_iteration(f"agent/{k}") for k in ("groups_trained", "refill_rounds", "generated_tokens",
                                                        "rollouts")},
            "groups_dropped": dropped_groups(rows),
            "groups_surplus": int(sum(r.get("agent/groups_surplus", 0) for r in rows))}


def reach_static(arms: dict[str, dict[str, Any]], baseline: float) -> None:
    """Add ``tasks_to_static`` and ``efficiency_vs_static`` to every arm, and ``rollouts_to_static`` to its
    ``batches`` when it has them (see the module docstring)."""
    static = arms.get("static")
    target = None if static is None else static["final"]["mean"]
    for a in arms.values():
        a["tasks_to_static"], a["efficiency_vs_static"] = None, None
        if a.get("batches"):
            a["batches"]["rollouts_to_static"] = None
        if target is None or target <= baseline:
            continue
        curve = a["curve"]
        at = next((i for i, y in enumerate(curve["mean"]) if y >= target), None)
        if at:
            a["tasks_to_static"] = curve["tasks"][at]
            a["efficiency_vs_static"] = static["curve"]["tasks"][-1] / curve["tasks"][at]
            if a.get("batches") and at < len(a["batches"]["rollout_curve"]):
                a["batches"]["rollouts_to_static"] = a["batches"]["rollout_curve"][at]


def score_key(settings: ExperimentSettings) -> str:
    """The metric-row key of an experiment's held-out score: ``heldout/<score_metric>`` when its settings
    (`experiment_settings` of its ``experiment.yaml``) name one, else
    ``heldout/score`` (the benchmark's headline metric)."""
    return f"heldout/{settings.score_metric}" if settings.score_metric else "heldout/score"


def collect(experiment_dir: Path) -> dict[str, Any]:
    """The report's data: the experiment's settings, the untrained agent's score, `arm_summary` of
    every arm with at least one finished seed (arms in the experiment's order), and ``short``: arm → {seed:
    iterations} of planned runs whose ``done.json`` records fewer iterations than the experiment's (finished before
    it was lengthened), which are not counted (`short_runs`).

    Raises:
        ConfigError: its ``experiment.yaml`` misses a key (see
            `experiment_settings`).
    """
    from omegaconf import OmegaConf

    exp = Path(experiment_dir)
    cfg = OmegaConf.load(exp / "experiment.yaml")
    settings = experiment_settings(cfg)
    base_row = json.loads((exp / "baseline.json").read_text()) if (exp / "baseline.json").is_file() else {}
    key = score_key(settings)
    baseline = float(base_row.get(key, float("nan")))
    alpha = settings.alpha
    arms: dict[str, dict[str, Any]] = {}
    rows_by_arm: dict[str, dict[int, list[dict[str, Any]]]] = {}
    codes: dict[str, set[str]] = {}  # the code each arm's sittings recorded (provenance)
    folders: dict[str, dict[int, Path]] = {}  # each arm's finished run folders, for the iteration-0 check
    for arm in settings.arms:
        runs = {}
        for seed, rows in finished_runs(exp / arm, settings.seeds, settings.iterations).items():
            d = arm_dir(exp, arm, seed)
            runs[seed] = {"rows": rows, "state": final_state(d), "sittings": read_rows(d / "sittings.jsonl")}
        if runs:
            arms[arm] = arm_summary(runs, baseline, alpha, key)
            rows_by_arm[arm] = {s: r["rows"] for s, r in runs.items()}
            codes[arm] = set().union(*(recorded(r["sittings"]) for r in runs.values()))
            folders[arm] = {s: arm_dir(exp, arm, s) for s in runs}
    reach_static(arms, baseline)
    first = first_iteration_note(folders, rows_by_arm)
    code = f"{check_paired(codes, mixed_code=True)}; {first}" if codes else None
    pair = [rows_by_arm.get(a) for a in alignment.PAIR]
    stat = alignment.compare(*pair) if all(pair) else None
    trained = {a: r for a, r in rows_by_arm.items() if any(key in row for rows in r.values() for row in rows)}
    helped = outcome.compare_all(trained, functools.partial(run_auc, baseline=baseline, key=key), key)
    correct(outcome.tests(helped) + ([stat] if stat else []))  # the report's family of tests
    return {"benchmark": settings.benchmark, "iterations": settings.iterations, "seeds": list(settings.seeds),
            "arms_planned": list(settings.arms), "score": settings.score_metric or "headline", "alpha": alpha,
            "k_min": settings.k_min, "agent": {"batch_tasks": settings.batch_tasks, "n": settings.n},
            "eval": {"every": settings.eval_every, "limit": settings.eval_limit,
                     "n": base_row.get("heldout/n")}, "baseline": baseline, "arms": arms,
            "agent_frozen": settings.agent_batch == "frozen", "alignment": stat, "outcome": helped, "code": code,
            "short": short_runs(exp, settings.arms, settings.seeds, settings.iterations)}


def short_runs(experiment_dir: Path, arms: Sequence[str], seeds: Sequence[int],
               iterations: int) -> dict[str, dict[int, int]]:
    """arm → {seed: iterations it ran} of the runs among ``arms`` x ``seeds`` whose ``done.json`` records fewer than
    ``iterations`` (`iterations_run`): finished before the experiment was lengthened, so `finished_runs` does not
    count them; arms without one are left out. Such a run is extended from its checkpoint when it kept one, and is
    otherwise refused by the experiment.

    Raises:
        ValueError: a seed's ``done.json`` is corrupted (`iterations_run`).
    """
    out: dict[str, dict[int, int]] = {}
    for arm in arms:
        ran = {seed: iterations_run(arm_dir(Path(experiment_dir), arm, seed)) for seed in seeds}
        short = {seed: n for seed, n in ran.items() if n is not None and n < iterations}
        if short:
            out[arm] = short
    return out


def _fmt(s: dict[str, Any], pct: bool = True) -> str:
    if s["mean"] is None:
        return "—"
    k = 100.0 if pct else 1.0
    sd = f" ± {k * s['sd']:.1f}" if s["sd"] is not None else ""
    return f"{k * s['mean']:.1f}{sd}"


def _opt(x, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def markdown(data: dict[str, Any]) -> str:
    """``summary.md``: the settings, one table row per arm, the seconds per phase, and the caveats that follow
    from the numbers (arms within one another's spread)."""
    arms = data["arms"]
    score = "the benchmark's headline metric" if data["score"] == "headline" else data["score"]
    lines = [f"# Curriculum experiment: {data['benchmark']}", "",
             f"{data['iterations']} iterations, seeds {data['seeds']}, {data['agent']['batch_tasks']} tasks x "
             f"{data['agent']['n']} rollouts per iteration, α = {data['alpha']:g} (band ± {data['k_min']:g}); "
             + (f"held-out score = {score} on {data['eval']['n']} held-out tasks, greedy, "
              f"every {data['eval']['every']} iterations. Untrained agent: {100 * data['baseline']:.1f}."
              if data["eval"]["every"] else "no held-out evaluation.")
             + (" Agent frozen (no agent update): a stationary target." if data.get("agent_frozen") else "")
             + (f" Runs' {data['code']}." if data.get("code") else ""), "",
             "Scores in %, mean ± sample sd over seeds. AUC: mean held-out score over the tasks consumed. Tasks to "
             "static: agent tasks consumed when the arm's mean held-out score first reaches static's final mean "
             "(efficiency = static's tasks / these).", "",
             "| arm | seeds | final | best | AUC | tasks consumed | tasks to static (efficiency) | admission | "
             "env updates | mean abs(p̂-α) 1st → 2nd half |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, a in arms.items():
        eff = ("—" if a["tasks_to_static"] is None
               else f"{a['tasks_to_static']:.0f} ({a['efficiency_vs_static']:.2f}x)")
        adm = ("—" if a["admission_rate"] is None
               else f"{a['admitted']}/{a['generated']} ({100 * a['admission_rate']:.0f} %)")
        gap = f"{_opt(a['p_gap_first_half'], '.2f')} → {_opt(a['p_gap_second_half'], '.2f')}"
        lines.append(f"| {name} | {len(a['seeds'])} | {_fmt(a['final'])} | {_fmt(a['best'])} | {_fmt(a['auc'])} | "
                     f"{_fmt(a['tasks_consumed'], pct=False)} | {eff} | {adm} | "
                     f"{_opt(a['env_update_share'] and 100 * a['env_update_share'], '.0f')} % | {gap} |")
    static = arms.get("static")
    if static is not None and static["final"]["mean"] is not None and static["final"]["mean"] <= data["baseline"]:
        lines += ["", f"static's final score ({100 * static['final']['mean']:.1f}) is not above the untrained agent's "
                  f"({100 * data['baseline']:.1f}): no arm needs any task to reach it, so no data-efficiency ratio."]
    missing = [a for a in data["arms_planned"] if a not in arms and a not in data.get("short", {})]
    if missing:
        lines += ["", f"Not finished yet: {', '.join(missing)}."]
    if data.get("short"):
        lines += ["", f"Not counted, finished fewer than the experiment's {data['iterations']} iterations (before it "
                  "was lengthened): " + "; ".join(f"{arm} " + ", ".join(f"seed {s} ({n})" for s, n in runs.items())
                                                  for arm, runs in data["short"].items())
                  + ". Each is extended from its checkpoint if it kept one; otherwise run the longer experiment in a "
                  "new experiment_dir."]
    phases = shown_phases(arms)
    lines += ["", "Seconds per iteration (mean over iterations and seeds) and time of the runs:", "",
              "| arm | " + " | ".join(phases) + " | loop s per seed | wall s (all seeds) |",
              "|---|" + "---|" * (len(phases) + 2)]
    for name, a in arms.items():
        sec = a["seconds_per_iteration"]
        lines.append(f"| {name} | " + " | ".join(_opt(sec.get(p), ".1f") for p in phases)
                     + f" | {_fmt(a['loop_seconds'], pct=False)} | {a['wall_seconds']:.0f} |")
    lines += batch_table(arms)
    lines += seed_table(arms)
    lines += ["", "## What the numbers allow", ""] + verdicts(arms)
    if data.get("outcome"):
        lines += [""] + outcome.markdown(data["outcome"])
    if data.get("alignment"):
        lines += [""] + alignment.markdown(data["alignment"], data["alpha"], data["k_min"])
    return "\n".join(lines) + "\n"


def batch_table(arms: dict[str, dict[str, Any]]) -> list[str]:
    """The agent-batch table of the arms that have `batch_summary` (no lines when none has)."""
    with_batches = {n: a["batches"] for n, a in arms.items() if a.get("batches")}
    if not with_batches:
        return []
    lines = ["", "Agent batches (per iteration: mean over iterations and seeds; dropped and surplus: totals over "
             "seeds; a dropped group had equal rewards, a surplus group was informative beyond the batch):", "",
             "| arm | rollouts consumed | rollouts / iteration | groups trained / iteration | dropped groups (seed, "
             "generated) | surplus groups | refill rounds / iteration | generated tokens / iteration | rollouts to "
             "static |", "|---|---|---|---|---|---|---|---|---|"]
    for name, b in with_batches.items():
        lines.append(f"| {name} | {_fmt(b['rollouts_consumed'], pct=False)} | {b['rollouts']:.1f} | "
                     f"{b['groups_trained']:.2f} | {b['groups_dropped']['seed']}, {b['groups_dropped']['generated']} "
                     f"| {b['groups_surplus']} | {b['refill_rounds']:.2f} | {b['generated_tokens']:.0f} | "
                     f"{_opt(b.get('rollouts_to_static'), '.0f')} |")
    return lines


def seed_table(arms: dict[str, dict[str, Any]]) -> list[str]:
    """One row per finished arm-seed, by seed then arm (`seed_summary`): the held-out scores in %, AUC, the
    agent batches (— for runs that do not log their groups) and the seconds of an iteration and of the loop."""
    seeds = sorted({s for a in arms.values() for s in a.get("per_seed", {})})
    lines = ["", "Per seed (held-out score in % after each evaluation; agent batches per iteration; dropped groups "
             "in total):", "",
             "| seed | arm | held-out | final | AUC | rollouts / iteration | groups trained / iteration | dropped groups "
             "(seed, generated) | s / iteration | loop s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for seed in seeds:
        for name, a in arms.items():
            r = a.get("per_seed", {}).get(seed)
            if r is None:
                continue
            held = [f"{100 * y:.0f}" for y in r["heldout"]]
            dropped = "—" if "groups_dropped" not in r else ", ".join(str(v) for v in r["groups_dropped"].values())
            lines.append(f"| {seed} | {name} | {', '.join(held) or '—'} | {held[-1] if held else '—'} | "
                         f"{_opt(r['auc'] and 100 * r['auc'], '.1f')} | {_opt(r.get('rollouts'), '.1f')} | "
                         f"{_opt(r.get('groups_trained'), '.1f')} | {dropped} | {r['seconds_per_iteration']:.0f} | {r['loop_seconds']:,.0f} |")
    return lines if seeds else []


PHASES = ("task_generation", "agent_rollout", "env_policy_update", "agent_update", "heldout_eval", "total")
COSTLY_PHASES = ("env_reward",)  # in the table only when an arm spends >= 1 s an iteration there (grounded's probe)


def shown_phases(arms: dict[str, Any]) -> list[str]:
    """The columns of the seconds-per-iteration table: `PHASES`, with each of `COSTLY_PHASES` before
    ``env_policy_update`` when some arm's mean seconds per iteration there reach 1 (scoring that measures the
    agent, as the ``grounded`` task source does)."""
    extra = [p for p in COSTLY_PHASES
             if any((a["seconds_per_iteration"].get(p) or 0.0) >= 1.0 for a in arms.values())]
    at = PHASES.index("env_policy_update")
    return list(PHASES[:at]) + extra + list(PHASES[at:])


def verdicts(arms: dict[str, dict[str, Any]]) -> list[str]:
    """Sentences comparing every arm's final score with ``static``'s and ``genenv``'s: whether the difference
    exceeds the larger of the two spreads (min-max over seeds); with one seed, that no spread is measured."""
    out = []
    for ref in ("genenv", "static"):
        if ref not in arms:
            continue
        r = arms[ref]["final"]
        for name, a in arms.items():
            if name == ref or (ref == "static" and name == "genenv" and "genenv" in arms):
                continue
            f = a["final"]
            if f["mean"] is None or r["mean"] is None:
                continue
            diff = 100 * (f["mean"] - r["mean"])
            if f["n"] < 2 or r["n"] < 2:
                out.append(f"- {name} vs {ref}: {diff:+.1f} points, one seed: no spread measured, no conclusion.")
                continue
            width = 100 * max(f["max"] - f["min"], r["max"] - r["min"])
            word = "within" if abs(diff) <= width else "outside"
            out.append(f"- {name} vs {ref}: {diff:+.1f} points, {word} the seeds' spread ({width:.1f} points).")
    if not out and arms and all(a["final"]["mean"] is None for a in arms.values()):
        return ["- no held-out evaluation (eval.every=0): the arms are compared by the difficulty-alignment "
                "statistic below, if both genenv and random_env ran."]
    return out or ["- fewer than two arms finished: nothing to compare."]


ARM_STYLE = {"genenv": ("C0", "o"), "random_env": ("C1", "s"), "envgen": ("C2", "^"), "static": ("C3", "v"),
             "static_aug": ("C4", "D"), "replay": ("C5", "P"), "genenv_released": ("C6", "X"), "grounded": ("C7", "*")}


def plot_curves(data: dict[str, Any], out: Path) -> Path:
    """``curves.png``: held-out score against agent tasks consumed per arm (mean line, min-max band over seeds),
    and the mean p̂ of the generated tasks per iteration per arm with the α band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.5))
    for name, a in data["arms"].items():
        color, marker = ARM_STYLE.get(name, (None, "."))
        c = a["curve"]
        ax.plot(c["tasks"], [100 * y for y in c["mean"]], marker=marker, color=color,
                label=f"{name} ({len(a['seeds'])} seed{'s' if len(a['seeds']) > 1 else ''})")
        ax.fill_between(c["tasks"], [100 * y for y in c["min"]], [100 * y for y in c["max"]], color=color, alpha=0.15)
        by_it = a["p_hat_generated_by_iteration"]
        if by_it:
            bx.plot(list(map(int, by_it)), list(by_it.values()), marker=marker, color=color, label=name)
    ax.set(xlabel="agent tasks consumed", ylabel="held-out score (%)",
           title=f"{data['benchmark']}: held-out score (mean, min-max over seeds)")
    ax.legend()
    alpha, k = data["alpha"], data["k_min"]
    alignment.draw_band(bx, alpha, k)
    bx.set(xlabel="iteration", ylabel="mean p̂ of generated tasks", ylim=(-0.02, 1.02),
           title="does p̂ of generated tasks move toward α?")
    bx.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def arm_folder(folder: Path) -> tuple[ExperimentSettings, dict[int, list[dict[str, Any]]]]:
    """``(experiment settings, {seed: metric rows} of the finished runs)`` of one arm folder
    (``<experiment_dir>/<arm>``) of any experiment (`finished_runs` at the experiment's ``iterations``).

    Raises:
        FileNotFoundError: the experiment has no ``experiment.yaml``, or the folder no finished run.
        ConfigError: its ``experiment.yaml`` lacks a key (`experiment_settings`).
    """
    from omegaconf import OmegaConf

    folder = Path(folder)
    cfg_path = folder.parent / "experiment.yaml"
    if not cfg_path.is_file():
        raise FileNotFoundError(f"{cfg_path} not found: pass an arm folder, <experiment_dir>/<arm>")
    settings = experiment_settings(OmegaConf.load(cfg_path))
    runs = finished_runs(folder, iterations=settings.iterations)
    if not runs:
        raise FileNotFoundError(f"{folder}: no run finished its experiment's iterations (seed<k>/{DONE_FILE})")
    return settings, runs


def arm_codes(folder: Path, seeds: Sequence[int]) -> set[str]:
    """The code versions recorded by the sittings of ``seeds`` in an arm folder
    (`recorded`; ``{"unknown"}`` where none was recorded)."""
    out: set[str] = set()
    for seed in seeds:
        out |= recorded(read_rows(Path(folder) / f"seed{seed}" / "sittings.jsonl"))
    return out


def first_iteration_note(runs: dict[str, dict[int, Path]], rows: dict[str, dict[int, list[dict[str, Any]]]]) -> str:
    """`check_first_iteration` of the environment policy's texts and of
    the agent's rollouts at iteration 0, as one note: ``runs`` = arms' run folders (``{arm name: {seed:
    <arm>/seed<k>}}``, whose ``generations.jsonl`` is read), ``rows`` = their metric rows already read (``{arm name:
    {seed: rows}}``)."""
    texts = {a: {s: first_writes(read_rows(d / "generations.jsonl")) for s, d in r.items()} for a, r in runs.items()}
    rolls = {a: {s: first_rollouts(rows[a][s]) for s in r} for a, r in runs.items()}
    return f"{check_first_iteration(texts)}; {check_first_iteration(rolls, 'agent rollouts (tokens, mean reward)')}"


def _arm_name(folder: Path) -> str:
    return f"{Path(folder).parent.name}/{Path(folder).name}"


def _common_seeds(a: dict[int, Any], b: dict[int, Any]) -> None:
    if not set(a) & set(b):
        raise ValueError(f"no seed finished in both: {sorted(a)} and {sorted(b)}")


def compare_arms(treatment: Path, control: Path, mixed_code: bool = False) -> dict[str, Any]:
    """The difficulty-alignment statistic (`genenv.trainer.experiments.alignment.compare`) between two arm folders of
    any experiments (``<experiment_dir>/<arm>``, e.g. the ``genenv`` arms of an ``rwr`` and a ``grpo``
    experiment, or an arm against another experiment's ``random_env``), paired by seed; each arm is named
    ``<experiment folder>/<arm>``. Returns the statistic with ``band`` = (α, k_min) and ``code`` (a note on the code
    the two arms ran, `check_paired`) added (for
    `genenv.trainer.experiments.alignment.markdown` and `plot`).

    Raises:
        FileNotFoundError: a folder without a finished run, or whose experiment has no ``experiment.yaml``.
        ValueError: the two experiments use different α bands (their in-band shares do not measure the same
            thing), share no finished seed, or ran different code (unless ``mixed_code``).
    """
    (settings_t, runs_t), (settings_c, runs_c) = arm_folder(treatment), arm_folder(control)
    bands = [(s.alpha, s.k_min) for s in (settings_t, settings_c)]
    if bands[0] != bands[1]:
        raise ValueError(f"different α bands (α, k_min): {bands[0]} and {bands[1]}; "
                         "in-band shares are not comparable")
    _common_seeds(runs_t, runs_c)
    names = (_arm_name(treatment), _arm_name(control))
    code = _paired_code((treatment, control), names, (runs_t, runs_c), mixed_code)
    return {**alignment.compare(runs_t, runs_c, names), "band": bands[0], "code": code}


def _paired_code(folders: Sequence[Path], names: Sequence[str], runs: Sequence[dict[int, list[dict[str, Any]]]],
                 mixed_code: bool) -> str:
    """`check_paired` and `first_iteration_note` over the seeds
    that every arm folder finished (``runs``: each folder's ``{seed: metric rows}``, as `arm_folder` gives)."""
    seeds = sorted(set.intersection(*(set(r) for r in runs)))
    code = check_paired({n: arm_codes(f, seeds) for n, f in zip(names, folders)}, mixed_code)
    paired = {n: {s: Path(f) / f"seed{s}" for s in seeds} for n, f in zip(names, folders)}
    return f"{code}; {first_iteration_note(paired, dict(zip(names, runs)))}"


def compare_outcome(treatment: Path, control: Path, mixed_code: bool = False) -> dict[str, Any]:
    """The held-out outcome statistic (`genenv.trainer.experiments.outcome.compare`: paired cells, final and
    AUC differences) between two arm folders of any experiments, e.g. the ``genenv`` arm of a run with one setting
    changed against the ``genenv`` or ``replay`` arm of the main run, paired by seed and iteration. Each arm's AUC
    starts from its own experiment's untrained-agent score (``baseline.json``). Returns the statistic with
    ``arms`` = the two ``<experiment folder>/<arm>`` names and ``code`` (see `compare_arms`) added.

    Raises:
        FileNotFoundError: a folder without a finished run, or whose experiment has no ``experiment.yaml`` or no
            ``baseline.json``.
        ValueError: the experiments differ in a setting of
            `HELDOUT_PROTOCOL` (their held-out scores do not measure the
            same thing), a folder has no held-out score, no seed finished in both, or the arms ran different code
            (unless ``mixed_code``).
    """
    folders = (Path(treatment), Path(control))
    loaded = [arm_folder(f) for f in folders]
    settings = [s.heldout_protocol for s, _ in loaded]
    if settings[0] != settings[1]:
        diff = {k: (settings[0][k], settings[1][k]) for k in settings[0] if settings[0][k] != settings[1][k]}
        raise ValueError(f"different held-out settings {diff}: the held-out scores are not comparable")
    key = score_key(loaded[0][0])
    baselines = []
    for folder, (_, runs) in zip(folders, loaded):
        base = folder.parent / "baseline.json"
        if not base.is_file():
            raise FileNotFoundError(f"{base} not found: the untrained agent's score of {folder.parent}")
        if not any(key in row for rows in runs.values() for row in rows):
            raise ValueError(f"{folder}: no held-out score ({key}) in its metrics")
        baselines.append(float(json.loads(base.read_text()).get(key, float("nan"))))
    _common_seeds(loaded[0][1], loaded[1][1])
    names = [_arm_name(f) for f in folders]
    code = _paired_code(folders, names, [r for _, r in loaded], mixed_code)
    auc_t, auc_c = (functools.partial(run_auc, baseline=b, key=key) for b in baselines)
    stat = outcome.compare(loaded[0][1], loaded[1][1], auc_t, key, auc_c)
    return {**stat, "arms": names, "baselines": baselines, "code": code}


def write_report(experiment_dir: Path) -> Path:
    """Write ``summary.json``, ``summary.md``, ``curves.png`` (and ``alignment.png`` when genenv and random_env
    ran) into ``experiment_dir``; returns it.

    Raises:
        FileNotFoundError: no ``experiment.yaml`` (not an experiment directory).
    """
    exp = Path(experiment_dir)
    if not (exp / "experiment.yaml").is_file():
        raise FileNotFoundError(f"{exp}/experiment.yaml not found: is {exp} a genenv-experiment directory?")
    data = collect(exp)
    (exp / "summary.json").write_text(json.dumps(data, indent=1))
    (exp / "summary.md").write_text(markdown(data))
    plot_curves(data, exp / "curves.png")
    if data["alignment"]:
        alignment.plot(data["alignment"], data["alpha"], data["k_min"], exp / "alignment.png")
    return exp
