"""The task pool: growth, p̂ history, sampling and persistence."""
from __future__ import annotations

import random

import pytest

from genenv.benchmarks.bamboogle.env import load_bamboogle_tasks
from genenv.envs.task import Task
from genenv.trainer.task_pool import TaskPool


def test_pool_round_trip_keeps_tasks_origins_and_history(tmp_path):
    seeds = load_bamboogle_tasks("train")[:5]
    pool = TaskPool(seeds)
    gen = Task(id="gen-1-0-0", benchmark="bamboogle", split="generated", prompt="Q?", gold="A",
               action_kind="free_text", origin="generated", parent_id=seeds[0].id, generation_step=1)
    pool.add(gen)
    pool.record(0, {seeds[0].id: 0.25, gen.id: 0.5})
    pool.record(1, {gen.id: 0.75})
    with pytest.raises(ValueError, match="already in the pool"):
        pool.add(gen)
    pool.save(tmp_path / "pool.jsonl")
    back = TaskPool.load(tmp_path / "pool.jsonl")
    assert back.tasks == pool.tasks and back.counts() == {"seed": 5, "generated": 1}
    assert back.entries[gen.id].p_hat_history == [(0, 0.5), (1, 0.75)]
    assert back.entries[gen.id].task.parent_id == seeds[0].id
    assert back.recent_p_hat(last=2) == pytest.approx((0.25 + 0.75) / 2)
    sample = back.sample(3, random.Random(0), exclude=[gen.id])
    assert len(sample) == 3 and gen not in sample
