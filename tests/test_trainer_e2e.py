"""End-to-end co-evolution on real data with the real embedded model (SmolLM2-135M-Instruct), one iteration.

Bamboogle: asserts that tasks were generated, validated (admitted + rejected = generated), rolled out, that both
updates ran and changed the weights, and that checkpoint, metrics, TensorBoard and plot outputs exist. The
difficulty band is widened (k_min = 0.5) and the agent reward is the rapidfuzz similarity so that both update
paths get signal deterministically with a 135M model; the paper's band is tested in test_rewards.py.
"""
from __future__ import annotations

import json

from genenv.trainer.cli import compose_config
from genenv.trainer.loop import CoEvolutionTrainer
from genenv.trainer.plot import plot_run


def test_one_iteration_on_bamboogle_runs_both_updates(tmp_path, smollm2_dir):
    cfg = compose_config([
        "benchmark=bamboogle", f"run_dir={tmp_path}/run", "iterations=1", "seed=1",
        "generation.prompts_per_iteration=1", "generation.generations_per_prompt=6",
        "agent.batch_tasks=3", "agent.n=4", "agent.temperature=1.0", "agent.max_new_tokens=24",
        "reward.free_text_metric=fuzz", "curriculum.k_min=0.5", "eval.every=1", "eval.limit=3"])
    trainer = CoEvolutionTrainer(cfg)
    rows = trainer.run()
    assert len(rows) == 1
    row = rows[0]
    assert row["gen/generated"] == 6
    assert row["gen/admitted"] >= 1 and row["gen/admitted"] + row["gen/rejected"] == 6
    assert row["agent/rollouts"] == 4 * row["agent/tasks"] and row["agent/tasks"] >= 3
    assert row["agent_update/skipped"] is False and row["agent_update/groups_kept"] >= 1
    assert row["env_policy_update/skipped"] is False and row["env_policy_update/samples"] >= 1
    assert row["weights/agent_delta"] > 0 and row["weights/env_policy_delta"] > 0
    assert row["pool/generated"] == row["gen/admitted"] and row["pool/seed"] == 100
    assert "heldout/bamboogle/em" in row
    assert sum(row["p_hat/histogram"]) == row["agent/tasks"]
    run = tmp_path / "run"
    assert (run / "checkpoints" / "latest").read_text() == "iter-00001"
    ckpt = run / "checkpoints" / "iter-00001"
    for f in ("agent/optimizer.pt", "env_policy/optimizer.pt", "agent/config.json", "pool.jsonl", "state.json"):
        assert (ckpt / f).is_file(), f
    gens = [json.loads(x) for x in (run / "generations.jsonl").read_text().splitlines()]
    assert len(gens) == 6 and sum(g["admitted"] for g in gens) == row["gen/admitted"]
    assert all(g["r_env"] == 0.0 for g in gens if not g["admitted"])
    assert list((run / "tensorboard").iterdir())
    assert plot_run(run).stat().st_size > 10_000


def test_one_iteration_on_bfcl_validates_with_the_official_checker(tmp_path, smollm2_dir):
    """One BFCL iteration with the real model: every rollout's reward is the verdict of bfcl-eval's own AST checker,
    called directly here on the same decoded calls (the loop's lenient reading), and every admitted generated task's
    gold is accepted by that checker against the task's own schema."""
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    from genenv.benchmarks.bfcl.checker import CHECKER_MODEL_NAME, language_of
    from genenv.benchmarks.bfcl.env import BFCLEnv, gold_calls
    from genenv.envs.base import InvalidAction

    cfg = compose_config([
        "benchmark=bfcl", f"run_dir={tmp_path}/run", "iterations=1", "tensorboard=false",
        "generation.prompts_per_iteration=1", "generation.generations_per_prompt=2",
        "agent.batch_tasks=2", "agent.n=2", "agent.max_new_tokens=48"])
    trainer = CoEvolutionTrainer(cfg)
    played, rollout = [], trainer.rollout

    def spy(*args, **kwargs):
        out = rollout(*args, **kwargs)
        played.extend(out.trajectories)
        return out

    trainer.rollout = spy
    row = trainer.run()[0]
    assert row["gen/generated"] == 2 and row["gen/admitted"] + row["gen/rejected"] == 2
    assert row["agent/rollouts"] == 2 * row["agent/tasks"] == len(played) >= 4
    assert row["pool/size"] == row["pool/seed"] + row["gen/admitted"]

    def official(task, calls):
        lang = {"python": Language.PYTHON, "java": Language.JAVA, "javascript": Language.JAVASCRIPT}[
            language_of(task.metadata["category"])]
        return bool(ast_checker(task.tools, calls, task.gold, lang, task.metadata["category"],
                                CHECKER_MODEL_NAME)["valid"])

    for traj in played:
        action = BFCLEnv.parse_lenient(traj.text)
        verdict = False if isinstance(action, InvalidAction) else official(traj.task, [c.to_bfcl() for c in action])
        assert traj.reward == float(verdict), (traj.task.id, traj.text[:200])
    generated = [t for t in trainer.pool.tasks if t.origin == "generated"]
    assert len(generated) == row["gen/admitted"]
    for task in generated:
        assert official(task, [c.to_bfcl() for c in gold_calls(task)]), task.id
