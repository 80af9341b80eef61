"""Groups of two sizes in one rollout or in two (a benchmark script that prints figures, not a test).

    python lab/benches/bench_group_sizes.py --new 3 --pool 6 --rollouts-per-task 8 --repeats 2

With ``generation.rollouts_per_task`` above ``agent.n`` (the ``n8`` arms), an iteration's newly admitted tasks get
more episodes than its pool tasks. Played as two rollouts (the new tasks' groups, then the pool tasks'), each waits
for its longest episode's sequential turns; with one count per task (``RolloutSpec.group_sizes``) every episode
decodes in one continuous batch. This script plays the same episodes both ways, alternated ``--repeats`` times in
one process with the same torch seed before each, on TextWorldExpress with the powered experiment's rollout
settings (``POWERED_TWX`` of ``lab/benches/bench_rollout.py``): ``--new`` seed-pool tasks stand for the admitted tasks
(``--rollouts-per-task`` episodes each) and the next ``--pool`` tasks for the pool draws (``agent.n`` each), at the
config's sampling temperature. Printed per way and repeat: seconds, episodes, generated tokens and tokens/s;
``--out FILE.json`` writes the rows with the host.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_rollout import POWERED_TWX, host  # noqa: E402  (a sibling script)


def play(tasks, sizes: Sequence[int], policy, spec_kwargs: dict[str, Any], together: bool, seed: int
         ) -> dict[str, Any]:
    """Play ``sizes[i]`` episodes of ``tasks[i]`` in one rollout (``together``) or in one rollout per run of equal
    sizes, after ``torch.manual_seed(seed)``. Returns the way, seconds, episodes, generated tokens and tokens/s."""
    import torch

    from genenv.runtime.episodes import RolloutSpec, play_episodes

    torch.manual_seed(seed)
    start = time.perf_counter()
    if together:
        trajs = play_episodes(tasks, policy, RolloutSpec(group_sizes=tuple(sizes), **spec_kwargs),
                              chunk_size=policy.batch_size).trajectories
    else:
        trajs, i = [], 0
        while i < len(tasks):
            j = i
            while j < len(tasks) and sizes[j] == sizes[i]:
                j += 1
            trajs += play_episodes(tasks[i:j], policy, RolloutSpec(n=sizes[i], **spec_kwargs),
                                   chunk_size=policy.batch_size).trajectories
            i = j
    seconds = time.perf_counter() - start
    tokens = sum(len(t.response_ids) for traj in trajs for t in traj.turns)
    return {"way": "one rollout" if together else "a rollout per size", "seconds": seconds, "episodes": len(trajs),
            "tokens": tokens, "tokens_per_second": tokens / seconds}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--new", type=int, default=3, help="tasks standing for the admitted ones")
    p.add_argument("--pool", type=int, default=6, help="tasks standing for the pool draws")
    p.add_argument("--rollouts-per-task", type=int, default=8, help="episodes per admitted task")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--policy", default="smollm2", help="a local model: smollm2 | hf:PATH | PATH")
    p.add_argument("overrides", nargs="*", help="genenv-train overrides after POWERED_TWX, e.g. agent.temperature=1.0")
    p.add_argument("--out", default=None, help="a .json file")
    args = p.parse_args(argv)

    from genenv.benchmarks.registry import get_benchmark
    from genenv.envs.data import write_json
    from genenv.runtime.policies import TransformersPolicy
    from genenv.runtime.threads import prepare_cpu
    from genenv.trainer.cli import compose_config
    from genenv.trainer.settings import env_kwargs, response_budget

    prepare_cpu("auto")
    cfg = compose_config(["benchmark=twx", *POWERED_TWX, *args.overrides])
    a = cfg.agent
    spec = get_benchmark("twx", cfg.data_dir)
    pool = spec.load(split="train", **spec.pool_options(cfg.benchmark.get("seed_options")))
    tasks = pool[:args.new + args.pool]
    sizes = [args.rollouts_per_task] * args.new + [int(a.n)] * args.pool
    policy = TransformersPolicy(args.policy.removeprefix("hf:"))
    policy.batch_size = int(a.policy.gen_batch_size)
    spec_kwargs = dict(temperature=float(a.temperature), max_new_tokens=int(a.max_new_tokens),
                       max_response_tokens=response_budget(cfg), env_kwargs=env_kwargs(cfg))
    play(tasks[:1], [1], policy, spec_kwargs, True, 0)  # untimed: first-use costs
    rows = []
    for r in range(args.repeats):
        for together in (False, True):
            row = {"repeat": r, **play(tasks, sizes, policy, spec_kwargs, together, seed=r)}
            rows.append(row)
            print(f"repeat {r} {row['way']:>18}: {row['seconds']:6.1f} s, {row['episodes']} episodes, "
                  f"{row['tokens']} tokens, {row['tokens_per_second']:.1f} tokens/s", flush=True)
    for way in ("a rollout per size", "one rollout"):
        secs = [row["seconds"] for row in rows if row["way"] == way]
        print(f"{way}: {sum(secs) / len(secs):.1f} s on average")
    if args.out:
        write_json(Path(args.out), {"host": host(), "policy": args.policy, "sizes": sizes,
                                    "overrides": [*POWERED_TWX, *args.overrides], "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
