"""Check ALFWorld's feasible-goal filter against the planner: goals it leaves out must all be refused, and the
share of the goals it offers that the planner admits says how much the filter leaves to search.

For each of ``--scenes`` training games (the default seed pool's, in order), every goal of ALFWorld's grammar over
the scene's types (task type × object type × receptacle type, or lamp for ``look_at_obj_in_light``) is split
into the feasible ones (`genenv.benchmarks.alfworld.feasible.feasible_goals`, before leaving out the
demonstrated goal) and the rest; ``--per-scene`` goals of each side, drawn with ``--seed``, are validated by
`ALFWorldSpec.parse_generated` (the planner, then a replay of its plan). Prints one line per side with the
verdicts, and writes them as JSON (``--out``).

Usage: ``python lab/benches/check_alfworld_feasible.py --scenes 12 --per-scene 4``
"""
from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from pathlib import Path

from genenv.benchmarks.alfworld.feasible import feasible_goals
from genenv.benchmarks.alfworld.files import TASK_TYPES, read_game
from genenv.benchmarks.alfworld.goals import GOAL_SLOTS, goal_targets, scene_inventory
from genenv.benchmarks.registry import get_benchmark
from genenv.envs.task import Task


def candidate_goals(game_file: str) -> list[dict[str, str]]:
    """Every goal of ALFWorld's grammar over the scene's object and receptacle types (lamps as toggles)."""
    inv = scene_inventory(read_game(game_file))
    out = []
    for task_type in TASK_TYPES:
        slot = GOAL_SLOTS[task_type][1]
        for obj in inv["objects"]:
            for target in goal_targets(inv, slot):
                out.append({"task_type": task_type, "object": obj, slot: target})
    return out


def main(argv: list[str] | None = None) -> int:
    """Validate the sampled goals of both sides; print and write the verdict counts."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenes", type=int, default=12)
    p.add_argument("--per-scene", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default="runs/check_alfworld_feasible.json")
    args = p.parse_args(argv)
    spec = get_benchmark("alfworld", args.data_dir)
    seeds = spec.load(split="train", **spec.pool_options(spec.seed_options))[:args.scenes]
    rng = random.Random(args.seed)
    verdicts: dict[str, Counter] = {"offered": Counter(), "left_out": Counter()}
    sizes = Counter()
    t0 = time.perf_counter()
    for parent in seeds:
        game_file = parent.metadata["game_file"]
        feasible = feasible_goals(game_file) or {}
        sides: dict[str, list[dict[str, str]]] = {"offered": [], "left_out": []}
        for goal in candidate_goals(game_file):
            slot = GOAL_SLOTS[goal["task_type"]][1]
            offered = goal[slot] in feasible.get(goal["task_type"], {}).get(goal["object"], ())
            sides["offered" if offered else "left_out"].append(goal)
        for side, goals in sides.items():
            sizes[side] += len(goals)
            for goal in rng.sample(goals, min(args.per_scene, len(goals))):
                out = spec.parse_generated(json.dumps(goal), "check", 0, parent)
                verdicts[side]["admitted" if isinstance(out, Task) else out.reason] += 1
    result = {"scenes": len(seeds), "per_scene": args.per_scene, "seed": args.seed,
              "goals_in_grammar": dict(sizes), "verdicts": {k: dict(v.most_common()) for k, v in verdicts.items()},
              "seconds": round(time.perf_counter() - t0, 1)}
    for side in ("offered", "left_out"):
        print(f"{side:9} goals {sizes[side]:5d}  sampled {sum(verdicts[side].values()):4d}  "
              + ", ".join(f"{k} {v}" for k, v in verdicts[side].most_common()))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
