"""A new arm is one strategy and one arm file: an agent batch defined and registered here, named by
``tests/arms/hardest_first.yaml``, runs through the unchanged loop and ``genenv-experiment``'s arm configs."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pytest

from genenv.envs.task import Task
from genenv.trainer.cli import compose_config
from genenv.trainer.strategies import AGENT_BATCHES, TASK_SOURCES, register_agent_batch
from genenv.trainer.strategies.agent_batches import AgentBatch

ARM = Path(__file__).resolve().parent / "arms" / "hardest_first.yaml"


class HardestFirstBatch(AgentBatch):
    """New tasks, then the pool tasks with the lowest last-measured p̂ (never measured first), ties by pool order."""

    def draw(self, loop, k: int, exclude: Sequence[str] = (), origin: str | None = None) -> list[Task]:
        skip = set(exclude)
        candidates = [t for t in loop.pool.tasks if t.id not in skip and (origin is None or t.origin == origin)]
        last = {tid: entry.last_p_hat for tid, entry in loop.pool.entries.items()}
        ranked = sorted(candidates, key=lambda t: -1.0 if last.get(t.id) is None else last[t.id])
        return ranked[:k]


register_agent_batch("hardest_first", f"{__name__}:HardestFirstBatch")


def test_the_shipped_strategies_are_registered_by_name():
    from genenv.trainer.settings import ConfigError, run_settings
    from genenv.trainer.strategies import build_agent_batch, build_task_source

    assert set(TASK_SOURCES) >= {"genenv", "random_env", "envgen", "static", "static_aug"}
    assert set(AGENT_BATCHES) >= {"uniform", "replay", "envgen", "frozen", "hardest_first"}
    settings = run_settings(compose_config(["benchmark=bamboogle", "agent_batch=hardest_first"]))
    assert type(build_agent_batch(settings)) is HardestFirstBatch
    for key, name, build in (("agent_batch", "hardest_last", build_agent_batch),
                             ("task_source", "teacher", build_task_source)):
        settings = run_settings(compose_config(["benchmark=bamboogle", f"{key}={name}"]))
        with pytest.raises(ConfigError, match=f"config key '{key}' is '{name}'; choose one of .*uniform|.*genenv"):
            build(settings)


def test_a_one_file_arm_runs_through_the_unchanged_loop(tmp_path, tiny_model_dir):
    from genenv.trainer.experiments.run import arm_run_config
    from genenv.trainer.experiments.settings import arm_name
    from genenv.trainer.loop import CoEvolutionTrainer

    exp = compose_config(["benchmark=bamboogle", f"experiment_dir={tmp_path}", "iterations=2", "tensorboard=false",
                          "threads=1", f"agent.policy.model={tiny_model_dir}",
                          f"env_policy.policy.model={tiny_model_dir}", "generation.prompts_per_iteration=1",
                          "generation.generations_per_prompt=2", "agent.batch_tasks=3", "agent.n=2",
                          "agent.max_new_tokens=6", "benchmark.seed_limit=8",
                          f"arms=[genenv,{ARM}]"], "experiment")
    cfg = arm_run_config(exp, str(ARM), 0)
    assert arm_name(str(ARM)) == "hardest_first" and cfg.run_dir == str(tmp_path / "hardest_first" / "seed0")
    assert (cfg.task_source, cfg.agent_batch) == ("genenv", "hardest_first")
    trainer = CoEvolutionTrainer(cfg)
    assert type(trainer.agent_batch) is HardestFirstBatch
    rolled: list[list[str]] = []
    rollout = trainer.rollout

    def recording(tasks, n=None):
        rolled.append([t.id for t in tasks])
        return rollout(tasks, n)

    trainer.rollout = recording
    rows = trainer.run()
    assert len(rows) == 2 and len(rolled) == 2 and all(r["agent/tasks"] >= 3 for r in rows)
    seeds = [t.id for t in trainer.pool.tasks if t.origin == "seed"]
    first_draw = [tid for tid in rolled[0] if tid in seeds]
    assert first_draw == seeds[:len(first_draw)]  # nothing measured yet: pool order
    measured = {tid: e.p_hat_history[0][1] for tid, e in trainer.pool.entries.items()
                if e.p_hat_history and e.p_hat_history[0][0] == 0}  # what iteration 1's draw saw
    assert set(first_draw) <= set(measured)
    second_draw = [tid for tid in rolled[1] if tid in seeds]
    unmeasured = [tid for tid in seeds if tid not in measured]
    # iteration 1 draws the never-measured seed tasks first (their p̂ counts as -1), then the lowest p̂
    assert second_draw == (unmeasured + sorted((t for t in seeds if t in measured), key=measured.get))[:len(second_draw)]
