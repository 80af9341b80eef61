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
               action_kind="free_text", origin="generated", parent_id=seeds[0].id, admitted_iteration=1)
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


def test_a_shipped_final_pool_loads_and_saves_unchanged(tmp_path, shipped):
    """A shipped run's final pool (``results/twx_env_policy_rwr.tar.xz``, genenv seed 0): every generated task holds
    the iteration that admitted it (the one in its id, ``gen-<iteration>-...``), seed tasks none; loading and
    saving it gives the same bytes, and each task keeps its episode digest."""
    import json

    from genenv.runtime.serve.protocol import task_sha256

    stored = shipped("twx_env_policy_rwr/genenv/seed0") / "final_pool.jsonl"
    rows = [json.loads(line) for line in stored.read_text(encoding="utf-8").splitlines()]
    generated = [r["task"] for r in rows if r["task"]["origin"] == "generated"]
    assert len(generated) == 40 and all(t["admitted_iteration"] == int(t["id"].split("-")[1]) for t in generated)
    assert all(r["task"]["admitted_iteration"] is None for r in rows if r["task"]["origin"] == "seed")
    pool = TaskPool.load(stored)
    pool.save(tmp_path / "pool.jsonl")
    assert (tmp_path / "pool.jsonl").read_bytes() == stored.read_bytes()
    assert all(task_sha256(pool.entries[r["task"]["id"]].task.to_dict()) == task_sha256(r["task"]) for r in rows)


def _replay_pool():
    """Real Bamboogle seed tasks at p̂ 0, 0.5 and 1, all last rolled out at iteration 3."""
    seeds = load_bamboogle_tasks("train")[:3]
    pool = TaskPool(seeds)
    pool.record(3, {seeds[0].id: 0.0, seeds[1].id: 0.5, seeds[2].id: 1.0})
    return pool, seeds


def test_replay_probabilities_follow_plr_rank_and_staleness_formula():
    from genenv.trainer.task_pool import replay_probabilities

    # scores 0.25, 0, 0 -> ranks 1, 2.5, 2.5 (ties share their mean rank); ages 1, 5, 9 at iteration 10
    p = replay_probabilities([0.25, 0.0, 0.0], [9, 5, 1], 10, temperature=0.5, staleness=0.2)
    h = [1.0, 2.5 ** -2, 2.5 ** -2]
    want = [0.8 * x / sum(h) + 0.2 * a / 15 for x, a in zip(h, [1, 5, 9])]
    assert p.tolist() == pytest.approx(want) and p.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="one score and one last iteration"):
        replay_probabilities([0.1, 0.2], [1], 2, 0.1, 0.1)


def test_learnability_sampling_prefers_the_task_at_half_success():
    pool, seeds = _replay_pool()
    picks = [pool.sample_replay(1, random.Random(s), iteration=4, temperature=0.1, staleness=0.1)[0].id
             for s in range(300)]
    share = {t.id: picks.count(t.id) / len(picks) for t in seeds}
    assert share[seeds[1].id] > 0.85 and share[seeds[0].id] < 0.1 and share[seeds[2].id] < 0.1
    uniform = [pool.sample(1, random.Random(s))[0].id for s in range(300)]
    assert uniform.count(seeds[1].id) / 300 < 0.45  # the uniform draw does not


def test_learnability_sampling_revisits_stale_tasks_and_tries_unseen_ones():
    seeds = load_bamboogle_tasks("train")[:4]
    pool = TaskPool(seeds[:2])
    pool.record(0, {seeds[0].id: 0.0})       # long unseen since iteration 0, nothing to learn at its last p̂
    for it in range(1, 10):
        pool.record(it, {seeds[1].id: 0.5})  # the most learnable, rolled out every iteration
    draws = [pool.sample_replay(1, random.Random(s), iteration=10, temperature=0.1, staleness=0.5)[0].id
             for s in range(400)]
    # P(stale task) = 0.5 * P_S (rank 2: 2^-10 / (1 + 2^-10)) + 0.5 * P_C (age 10 of 11) ≈ 0.455
    assert 0.35 < draws.count(seeds[0].id) / 400 < 0.56
    fresh = [pool.sample_replay(1, random.Random(s), iteration=10, temperature=0.1, staleness=0.0)[0].id
             for s in range(400)]
    assert fresh.count(seeds[0].id) / 400 < 0.02  # without the staleness term it is almost never replayed
    pool.add(seeds[2])
    pool.add(seeds[3])  # two never-rolled-out tasks: drawn with probability |unseen| / |candidates| = 1/2
    first = [pool.sample_replay(1, random.Random(s), iteration=10, temperature=0.1, staleness=0.1)[0].id
             for s in range(400)]
    assert 0.4 < sum(x in (seeds[2].id, seeds[3].id) for x in first) / 400 < 0.6
    every = pool.sample_replay(10, random.Random(0), iteration=10, temperature=0.1, staleness=0.1,
                               exclude=[seeds[3].id])
    assert sorted(t.id for t in every) == sorted(t.id for t in seeds[:3])  # distinct, at most the pool
