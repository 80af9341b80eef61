"""One co-evolution iteration of the powered TextWorldExpress config, timed phase by phase, for this source tree and
another one side by side (a benchmark script that prints figures, not a test).

    git worktree add /tmp/before <commit>
    python lab/benches/bench_iteration.py --before /tmp/before --arms genenv,static \\
        --out lab/figures/iteration_figures.json

Each run is ``genenv-train`` with `POWERED` (the settings of the shipped powered experiment,
``results/twx_informative.tar.xz``: 4-room Coin Collector games, 4 tasks x 4 rollouts with informative refills up
to 48 rollouts, GRPO on R_env for the environment policy) and ``iterations=1`` at each of ``--seeds`` (default 0),
in a fresh run folder: one iteration from the same iteration 0 (task writing, agent rollouts, environment-policy
update, agent update) and the held-out evaluation that ends a run (20 dev games, greedy). The two trees run
interleaved (seed by seed and arm by arm: this tree, then ``--before``, ``--repeats`` times), each in its own process
with the same installed dependencies: the other tree's package is put first on ``PYTHONPATH`` under the name
``genenv``. Phase seconds are the run's own ``metrics.jsonl`` (``time/*``), plus ``time/heldout_eval``; the script
ends with each arm's ratio of the summed loop seconds (`ratios`). ``--out`` also records the host
(`host`), both trees' commits and each tree's overrides.

Overrides after the options apply to both trees' runs and ``--this-override`` to this tree's only; each replaces
`POWERED`'s entry of the same key. With ``iterations=N`` the phases are the last iteration's, e.g. on a GPU,
where the static KV cache's first iteration compiles its decoding:

    python lab/benches/bench_iteration.py --before /tmp/before --this-override agent.policy.static_cache=true \
        --this-override env_policy.policy.static_cache=true device=cuda iterations=2
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

POWERED = ["benchmark=twx", "+benchmark.seed_options.params.coin='numLocations=4,numDistractorItems=0,includeDoors=0'",
           "curriculum.alpha=0.5", "curriculum.beta=20", "curriculum.k_min=0.15", "generation.temperature=0.7",
           "agent.response_length=2048", "agent.batch_tasks=4", "agent.n=4",
           "agent.filter_groups.enable=true", "agent.filter_groups.max_rollouts=48", "agent.temperature=0.7",
           "agent.max_new_tokens=16", "agent.policy.lr=1e-5", "env_policy.update_mode=grpo",
           "env_policy.policy.lr=2e-5", "env_policy.policy.kl_coef=0.01", "agent.policy.prefix_cache_tokens=65536",
           "env_policy.policy.prefix_cache_tokens=65536", "eval.every=2", "eval.limit=20", "tensorboard=false",
           "iterations=1"]
"""``genenv-train`` overrides of the powered TextWorldExpress experiment, one iteration."""

PHASES = ("task_generation", "agent_rollout", "env_policy_update", "agent_update", "heldout_eval")


def with_overrides(extra: Sequence[str]) -> list[str]:
    """`POWERED` with ``extra`` (``key=value`` overrides) appended, each replacing POWERED's entry of the same
    key (``iterations=2``, ``device=cuda``, ``agent.policy.static_cache=true``)."""
    keys = {e.split("=", 1)[0].lstrip("+~") for e in extra}
    return [o for o in POWERED if o.split("=", 1)[0].lstrip("+~") not in keys] + list(extra)


def run_once(tree: Path | None, arm: str, workdir: Path, seed: int = 0, extra: Sequence[str] = ()) -> dict[str, Any]:
    """One run of ``arm`` at ``seed`` with the package at ``tree`` (``None``: the installed one), `POWERED`
    with ``extra`` (`with_overrides`); returns its last iteration's phase seconds, the loop's total
    (``time/total``), the process wall time and the iteration's agent reward, generated tokens, rollouts and
    trained tokens (``agent_update/tokens``)."""
    env = dict(os.environ)
    if tree is not None:
        shim = Path(tempfile.mkdtemp(dir=workdir))
        (shim / "genenv").symlink_to(tree.resolve())
        env["PYTHONPATH"] = os.pathsep.join([str(shim), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    run_dir = Path(tempfile.mkdtemp(dir=workdir)) / "run"
    cmd = [sys.executable, "-m", "genenv.trainer.cli", *with_overrides(extra), f"arm={arm}", f"run_dir={run_dir}",
           f"seed={seed}"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=tree or Path.cwd(), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    row = rows[-1]
    out = {p: float(row.get(f"time/{p}", 0.0)) for p in PHASES}
    out.update(loop=float(row.get("time/total", 0.0)), process_wall=wall,
               agent_reward=row.get("agent/reward_mean", row.get("agent/reward")),
               generated_tokens=row.get("agent/generated_tokens"), rollouts=row.get("agent/rollouts"),
               trained_tokens=row.get("agent_update/tokens", 0), seed=seed)
    return out


def table(results: Sequence[dict[str, Any]]) -> str:
    """Markdown: one row per run."""
    lines = ["| arm | seed | tree | " + " | ".join(PHASES) + " | loop s | agent reward | rollouts | generated tokens "
             "| trained tokens |", "|---|---|---|" + "---|" * (len(PHASES) + 5)]
    for r in results:
        lines.append(f"| {r['arm']} | {r['seed']} | {r['tree']} | " + " | ".join(f"{r[p]:.1f}" for p in PHASES)
                     + f" | {r['loop']:.1f} | {r['agent_reward']} | {r['rollouts']} | {r['generated_tokens']} "
                     f"| {r['trained_tokens']} |")
    return "\n".join(lines)


def ratios(results: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per arm, this tree's loop seconds over the other tree's, summed over the seeds and repeats both ran
    (``loop``), and the same for the agent rollouts alone (``agent_rollout``): a seed's iteration trains on the
    groups it happened to sample, so one seed's update time says more about its episodes than about the code."""
    out: dict[str, dict[str, float]] = {}
    for arm in dict.fromkeys(r["arm"] for r in results):
        runs = {t: [r for r in results if r["arm"] == arm and r["tree"] == t] for t in ("this", "before")}
        if runs["this"] and runs["before"]:
            out[arm] = {k: sum(r[k] for r in runs["this"]) / max(1e-9, sum(r[k] for r in runs["before"]))
                        for k in ("loop", "agent_rollout")}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--before", type=Path, default=None, help="another source tree of the package (e.g. a worktree)")
    p.add_argument("--arms", default="genenv,static")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--seeds", default="0", help="comma-separated seeds, each run by every arm and tree")
    p.add_argument("--out", default=None, help="a .json file for the runs")
    p.add_argument("--this-override", action="append", default=[], metavar="KEY=VALUE",
                   help="an override for this tree's runs only (repeatable), e.g. agent.policy.static_cache=true")
    p.add_argument("overrides", nargs="*", help="overrides for both trees' runs, e.g. device=cuda iterations=2")
    args = p.parse_args(argv)
    trees: list[tuple[str, Path | None]] = [("this", None)] + ([("before", args.before)] if args.before else [])
    extra = {"this": [*args.overrides, *args.this_override], "before": list(args.overrides)}
    results = []
    with tempfile.TemporaryDirectory() as work:
        for _ in range(args.repeats):
            for seed in [int(x) for x in args.seeds.split(",") if x.strip()]:
                for arm in [a.strip() for a in args.arms.split(",") if a.strip()]:
                    for name, tree in trees:
                        results.append({"arm": arm, "tree": name,
                                        **run_once(tree, arm, Path(work), seed, extra[name])})
                        print(table(results[-1:]), flush=True)
    print("\n" + table(results))
    summary = ratios(results)
    for arm, r in summary.items():
        print(f"{arm}: this / before, summed over the runs: loop {r['loop']:.2f}, agent rollouts {r['agent_rollout']:.2f}")
    if args.out:
        from genenv.trainer.experiments.provenance import code_version, host

        before = code_version(args.before) if args.before else None
        Path(args.out).write_text(json.dumps({"host": host(), "trees": {"this": code_version(), "before": before},
                                              "overrides": {t: with_overrides(e) for t, e in extra.items()},
                                              "runs": results, "ratios": summary}, indent=1)
                                  + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
