"""How well a held-out set discriminates between agents: over every held-out evaluation of an experiment's runs
(each run's ``heldout.jsonl``, one row per game and evaluation), how many games were won in every evaluation, in
none, and in some (the games that can move a score), overall and per difficulty bin.

    python lab/benches/heldout_discrimination.py experiments/heldout_probe [--arms static] [--json out.json]
    python lab/benches/heldout_discrimination.py results/twx_confirmatory.tar.xz --set graded

The bins are the held-out set's own (`genenv.benchmarks.twx.env.graded_tasks`, ``--set``). Evaluations of one seed
are not independent; the figure describes the set, it tests nothing.
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def outcomes(experiment: Path, arms: list[str] | None) -> dict[str, list[bool]]:
    """task id → the success of every held-out evaluation of it in the experiment's runs (``arms``: only those)."""
    wins: dict[str, list[bool]] = defaultdict(list)
    for path in sorted(experiment.glob("*/seed*/heldout.jsonl")):
        if arms and path.parent.parent.name not in arms:
            continue
        for line in path.read_text().splitlines():
            row = json.loads(line)
            wins[row["task_id"]].append(bool(row["success"]))
    return wins


def summary(wins: dict[str, list[bool]], bins: dict[str, dict[str, str]]) -> dict[str, dict[str, int]]:
    """Per group (``all`` and each ``<dimension>=<bin>``): games, evaluations per game (min), games always won,
    never won, and won in some evaluations but not all."""
    groups: dict[str, dict[str, int]] = defaultdict(lambda: {"games": 0, "always": 0, "never": 0, "some": 0,
                                                             "evaluations": 10**9})
    for task_id, results in wins.items():
        kind = "always" if all(results) else "never" if not any(results) else "some"
        for group in ["all", *(f"{d}={b}" for d, b in bins.get(task_id, {}).items())]:
            g = groups[group]
            g["games"] += 1
            g[kind] += 1
            g["evaluations"] = min(g["evaluations"], len(results))
    return dict(groups)


def main() -> None:
    """Print the table (and write ``--json``)."""
    from genenv.benchmarks.twx.env import graded_tasks
    from genenv.trainer.experiments.archive import experiment_folder

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment", help="an experiment folder or results/<experiment>.tar.xz")
    ap.add_argument("--arms", nargs="*", default=None, help="only these arms (default: all)")
    ap.add_argument("--set", default="discriminating", help="the held-out set whose bins to use")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    wins = outcomes(experiment_folder(args.experiment), args.arms)
    bins = {t.id: t.metadata["bins"] for t in graded_tasks(args.set)}
    unknown = set(wins) - set(bins)
    if unknown:
        raise SystemExit(f"{len(unknown)} evaluated games are not in the {args.set!r} set (e.g. {sorted(unknown)[0]})")
    table = summary(wins, bins)
    print(f"{len(wins)} games of the {args.set!r} set, evaluated {table['all']['evaluations']}+ times each")
    print(f"{'group':<14} {'games':>5} {'always':>6} {'never':>5} {'some':>5}")
    for group in sorted(table, key=lambda g: (g != "all", g)):
        g = table[group]
        print(f"{group:<14} {g['games']:>5} {g['always']:>6} {g['never']:>5} {g['some']:>5}")
    if args.json:
        args.json.write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
