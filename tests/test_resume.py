"""A run killed (SIGKILL) in the middle of an iteration resumes from its last checkpoint with the same pool and
counters, and its metrics continue without duplicates. Uses a tiny random model: quality does not matter."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from genenv.trainer.cli import compose_config
from genenv.trainer.loop import CoEvolutionTrainer
from genenv.trainer.task_pool import TaskPool


def _iterations(path):
    return [json.loads(x)["iteration"] for x in path.read_text().splitlines() if x.strip()]


def test_killed_run_resumes_with_pool_and_counters(tmp_path, tiny_model_dir, kill_when):
    run = tmp_path / "run"
    overrides = [f"run_dir={run}", "benchmark=bamboogle", "iterations=3", "tensorboard=false", "threads=1",
                 f"agent.policy.model={tiny_model_dir}", f"env_policy.policy.model={tiny_model_dir}",
                 "generation.prompts_per_iteration=1", "generation.generations_per_prompt=2",
                 "agent.batch_tasks=3",
                 "agent.n=2", "agent.max_new_tokens=8", "keep_checkpoints=5"]
    proc = subprocess.Popen([sys.executable, "-m", "genenv.trainer.cli", *overrides],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ})
    gens = run / "generations.jsonl"
    # iteration 1 is written, its checkpoint not yet
    kill_when(proc, lambda: gens.is_file() and 1 in _iterations(gens))
    ckpt_name = (run / "checkpoints" / "latest").read_text()
    ckpt = run / "checkpoints" / ckpt_name
    saved = json.loads((ckpt / "state.json").read_text())
    saved_pool = TaskPool.load(ckpt / "pool.jsonl")
    assert saved["iteration"] in (1, 2) and saved["counters"]["generated"] == 2 * saved["iteration"]

    trainer = CoEvolutionTrainer(compose_config(overrides))
    trainer.resume(trainer.latest_checkpoint())
    assert trainer.iteration == saved["iteration"] and dict(trainer.counters) == saved["counters"]
    assert trainer.pool.tasks == saved_pool.tasks
    assert [e.p_hat_history for e in trainer.pool.entries.values()] == \
        [e.p_hat_history for e in saved_pool.entries.values()]
    assert _iterations(run / "metrics.jsonl") == list(range(saved["iteration"]))
    assert set(_iterations(gens)) == set(range(saved["iteration"]))

    rows = CoEvolutionTrainer(compose_config(overrides)).run()
    assert [r["iteration"] for r in rows] == list(range(saved["iteration"], 3))
    assert _iterations(run / "metrics.jsonl") == [0, 1, 2]
    final = json.loads((run / "checkpoints" / "iter-00003" / "state.json").read_text())
    assert final["counters"]["generated"] == 6 and final["iteration"] == 3
    assert len(TaskPool.load(run / "checkpoints" / "iter-00003" / "pool.jsonl")) >= len(saved_pool)


def test_a_run_dir_as_the_env_policy_model_warm_starts_that_runs_environment_policy(tmp_path, tiny_model_dir):
    """``env_policy.policy.model=RUN_DIR`` loads the run's *environment policy* (its newest checkpoint), not its
    agent, and ``agent.policy.model=RUN_DIR`` its agent: each role reads its own folder of the checkpoint."""
    import torch

    run = tmp_path / "run"
    common = ["benchmark=bamboogle", "iterations=1", "tensorboard=false", "threads=1", "eval.every=0",
              "generation.prompts_per_iteration=1", "generation.generations_per_prompt=2",
              "agent.batch_tasks=2", "agent.n=2", "agent.max_new_tokens=8",
              "autocast_dtype=float32"]
    first = CoEvolutionTrainer(compose_config([f"run_dir={run}", f"agent.policy.model={tiny_model_dir}",
                                               f"env_policy.policy.model={tiny_model_dir}", *common]))
    first.run()
    with torch.no_grad():  # move each role's weights its own way, so the two folders differ
        for seed, role in enumerate(("agent", "env_policy")):
            torch.manual_seed(seed)
            for p in first.backend.models[role].parameters():
                p.add_(0.05 * torch.randn_like(p))
    first.save_checkpoint()
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    with torch.no_grad():
        want = {role: first.backend.models[role](ids).logits for role in ("agent", "env_policy")}
    for role in ("env_policy", "agent"):
        other = "agent" if role == "env_policy" else "env_policy"
        second = CoEvolutionTrainer(compose_config([
            f"run_dir={tmp_path / role}", f"{role}.policy.model={run}", f"{other}.policy.model={tiny_model_dir}",
            *common]))
        with torch.no_grad():
            got = second.backend.models[role](ids).logits
        assert torch.allclose(got, want[role], atol=1e-4), role
        assert not torch.allclose(got, want[other], atol=1e-4), role
