"""Benchmark (not a test): the cost of an ALFWorld rollout through our env against raw TextWorld on the same
games, and episode throughput with env worker processes.

    python lab/benches/bench_alfworld.py [--games 20] [--split valid_unseen] [--workers 0,1,2] [--data-dir DIR]

1. **Raw TextWorld**, as ALFWorld plays its text games: ``textworld.start(game, EnvInfos(won, admissible_commands),
   wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])``, ``reset()``, then the expert walkthrough with
   ``env.step(command)``; run first, before our env memoises fast-downward's translation, so raw TextWorld pays
   its own costs.
2. **Ours**: ``genenv/ALFWorld-v0`` behind `TextActionWrapper`, fed the same
   commands as model text (parsing, matching to the admissible commands, observation text, ``info``,
   goal progress at the end).

Prints, for both, the mean step time (ms; the goal: ours ≤ 1.1× raw), the episode time (load +
reset + steps, s), the time of a second episode on the same game, and the ratios; then gold episodes/s through
the lock-step runner with 0 (in-process), 1, 2, … env worker processes.
"""
from __future__ import annotations

import argparse
import statistics
import time


def time_episodes(tasks, start, step) -> dict[str, list[float]]:
    """Play each task's walkthrough twice: ``start(task)`` (load/reset) then ``step(command) -> won`` per
    command, then a reset (``start``) and the walkthrough again. Returns per game the seconds of the first episode
    (``first``), of each step (``step``) and of the second episode (``again``).

    Raises:
        AssertionError: a walkthrough did not win (the two paths must play the same games to the same end).
    """
    out: dict[str, list[float]] = {"first": [], "step": [], "again": []}
    for task in tasks:
        t0 = time.perf_counter()
        start(task)
        load = time.perf_counter() - t0
        steps = []
        for command in task.gold:
            t = time.perf_counter()
            won = step(command)
            steps.append(time.perf_counter() - t)
        assert won, task.id
        t = time.perf_counter()
        start(task)
        for command in task.gold:
            step(command)
        out["again"].append(time.perf_counter() - t)
        out["first"].append(load + sum(steps))
        out["step"] += steps
    return out


def raw_textworld(tasks) -> dict[str, list[float]]:
    """`time_episodes` on raw TextWorld: ``textworld.start`` + ``reset`` (first episode), ``reset`` (second),
    ``env.step(command)``."""
    import textworld
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos

    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    current: dict[str, object] = {"id": None, "env": None}  # the game being played (one at a time)

    def start(task):
        if current["id"] != task.id:
            if current["env"] is not None:
                current["env"].close()
            current["env"] = textworld.start(task.metadata["game_file"], infos,
                                             wrappers=[AlfredDemangler(shuffle=False), AlfredInfos])
            current["id"] = task.id
        current["env"].reset()

    def step(command):
        state, _, _ = current["env"].step(command)
        return state["won"]

    try:
        return time_episodes(tasks, start, step)
    finally:
        if current["env"] is not None:
            current["env"].close()


def ours(tasks) -> dict[str, list[float]]:
    """`time_episodes` through ``genenv/ALFWorld-v0`` behind the text wrapper."""
    from genenv.benchmarks.alfworld.env import ALFWorldEnv
    from genenv.envs.wrappers import TextActionWrapper

    env = TextActionWrapper(ALFWorldEnv(tasks=list(tasks)))
    try:
        return time_episodes(tasks, lambda task: env.reset(options={"task_id": task.id}),
                             lambda command: env.step(command)[4]["won"])
    finally:
        env.close()


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--games", type=int, default=20, help="games (the first ones of the split, path order)")
    p.add_argument("--split", default="valid_unseen")
    p.add_argument("--workers", default="0,1,2", help="env worker processes to compare (comma list)")
    p.add_argument("--data-dir", default=None)
    args = p.parse_args(argv)
    from genenv.benchmarks.alfworld.env import load_alfworld_tasks
    from genenv.runtime.policies import GoldPolicy
    from genenv.runtime.episodes import RolloutSpec, play_episodes

    tasks = load_alfworld_tasks(args.split, data_dir=args.data_dir)[:args.games]
    n_steps = sum(len(t.gold) for t in tasks)
    print(f"{len(tasks)} {args.split} games, {n_steps} walkthrough steps")
    raw = raw_textworld(tasks)
    mine = ours(tasks)
    mean = statistics.mean
    print(f"{'':28} {'raw TextWorld':>14} {'genenv env':>12} {'ratio':>7}")
    for key, label, unit, scale in (("step", "step (ms, mean)", "ms", 1000.0),
                                    ("first", "first episode (s, mean)", "s", 1.0),
                                    ("again", "same game again (s, mean)", "s", 1.0)):
        a, b = mean(raw[key]) * scale, mean(mine[key]) * scale
        print(f"{label:28} {a:>14.3f} {b:>12.3f} {b / a:>7.3f}")
    print("(episodes: load + reset + walkthrough; ours memoises fast-downward's PDDL translation, in memory and "
          "on disk, and TextWorld's tatsu parses, which raw TextWorld repeats on every load, reset and step)")
    for workers in [int(w) for w in args.workers.split(",") if w.strip()]:
        t = time.perf_counter()
        trajs = play_episodes(tasks, GoldPolicy(), RolloutSpec(env_workers=workers)).trajectories
        seconds = time.perf_counter() - t
        wins = sum(tr.success for tr in trajs)
        print(f"gold rollouts, env_workers={workers}: {len(trajs)} episodes in {seconds:.1f} s "
              f"({len(trajs) / seconds:.2f} episodes/s), {wins} won")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
