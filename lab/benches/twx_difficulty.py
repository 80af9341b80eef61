"""How a frozen agent's success rate p̂ on TextWorldExpress Coin Collector depends on the fields the environment
policy writes (``steps``, ``numLocations``, ``includeDoors``): a measurement script that prints figures, run before
any training to check that the written fields decide difficulty.

    python lab/benches/twx_difficulty.py --locations 2,4 --doors 0 --steps 1,2,3,4,5 --games 4 --n 8 \\
        --out docs/curriculum/twx_difficulty.json

For every (numLocations, includeDoors, steps) cell, ``--games`` games are pinned with
`genenv.benchmarks.twx.spec.pin_steps` from spread-out train seeds (exactly as a generated task with that
``steps`` is made), and the agent of ``genenv-train benchmark=twx`` (its model, temperature, per-turn tokens and the
8-step episode limit of ``configs/benchmark/twx.yaml``; extra Hydra overrides after ``--``) plays each ``--n``
times. Prints per cell: games found, mean p̂, the share of games whose p̂ lies in the CPU profile's α band, and
the Pearson correlation of p̂ with each field over the games.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    """Parse the arguments, measure, print a Markdown table, optionally write ``--out`` (JSON)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--locations", default="2,4")
    ap.add_argument("--doors", default="0")
    ap.add_argument("--steps", default="1,2,3,4,5")
    ap.add_argument("--games", type=int, default=4)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--out", default=None)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides of the genenv-train config")
    args = ap.parse_args(argv)

    from genenv.benchmarks.twx.spec import pin_steps
    from genenv.rewards.env_policy_reward import difficulty_filter
    from genenv.trainer.cli import compose_config
    from genenv.trainer.engines import build_backend
    from genenv.runtime.episodes import RolloutSpec, play_episodes
    from genenv.trainer.settings import env_kwargs, response_budget, run_settings

    cfg = compose_config(["benchmark=twx", *args.overrides])
    tasks, cells = [], {}
    for loc in map(int, args.locations.split(",")):
        for doors in map(int, args.doors.split(",")):
            for steps in map(int, args.steps.split(",")):
                found = []
                for g in range(args.games):
                    task = pin_steps("coin", {"numLocations": loc, "numDistractorItems": 0, "includeDoors": doors},
                                     (g * 211 + 17 * steps + 7 * loc) % 1000, steps,
                                     task_id=f"probe-{loc}-{doors}-{steps}-{g}", split="generated")
                    if task is not None and task.id not in {t.id for t in found}:
                        found.append(task)
                cells[(loc, doors, steps)] = [t.id for t in found]
                tasks += found
    policy = build_backend(run_settings(cfg)).policy("agent")
    a = cfg.agent
    start = time.perf_counter()
    trajs = play_episodes(tasks, policy,
                          RolloutSpec(n=args.n, temperature=a.temperature, max_new_tokens=a.max_new_tokens,
                                      env_kwargs=env_kwargs(cfg), max_response_tokens=response_budget(cfg))).trajectories
    seconds = time.perf_counter() - start
    by_task: dict[str, list[float]] = {}
    for t in trajs:
        by_task.setdefault(t.task.id, []).append(t.reward)
    p_hat = {k: float(np.mean(v)) for k, v in by_task.items()}
    alpha, k_min = float(cfg.curriculum.alpha), float(cfg.curriculum.k_min)
    rows = []
    for (loc, doors, steps), ids in cells.items():
        ps = [p_hat[i] for i in ids]
        rows.append({"numLocations": loc, "includeDoors": doors, "steps": steps, "games": len(ids),
                     "p_hat": ps, "mean_p_hat": float(np.mean(ps)) if ps else None,
                     "in_band": float(np.mean(difficulty_filter(np.array(ps), alpha, k_min))) if ps else None})
    per_game = [(r["numLocations"], r["includeDoors"], r["steps"], p) for r in rows for p in r["p_hat"]]
    arr = np.array(per_game, dtype=float)
    corr = {name: (float(np.corrcoef(arr[:, i], arr[:, 3])[0, 1]) if np.std(arr[:, i]) > 0 else None)
            for i, name in enumerate(("numLocations", "includeDoors", "steps"))}
    print(f"{len(tasks)} games x {args.n} episodes in {seconds:.0f} s; α band [{alpha - k_min:g}, {alpha + k_min:g}]")
    print("| numLocations | includeDoors | steps | games | mean p̂ | games in band | p̂ per game |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        mean = "—" if r["mean_p_hat"] is None else f"{r['mean_p_hat']:.2f}"
        band = "—" if r["in_band"] is None else f"{100 * r['in_band']:.0f} %"
        print(f"| {r['numLocations']} | {r['includeDoors']} | {r['steps']} | {r['games']} | {mean} | {band} | "
              + ", ".join(f"{p:.2f}" for p in r["p_hat"]) + " |")
    print("Pearson correlation with p̂ over games: " + ", ".join(
        f"{k} {'—' if v is None else f'{v:+.2f}'}" for k, v in corr.items()))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"n": args.n, "alpha": alpha, "k_min": k_min, "seconds": seconds,
                                              "model": str(cfg.agent.policy.model), "cells": rows,
                                              "correlation": corr}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
