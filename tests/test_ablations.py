"""Ablations selectable by config run through the same loop (tiny random model: quality does not matter)."""
from __future__ import annotations

import pytest

from genenv.trainer.cli import compose_config
from genenv.trainer.loop import CoEvolutionTrainer


def _run(tmp_path, tiny_model_dir, *extra, benchmark: str = "bamboogle"):
    cfg = compose_config([f"run_dir={tmp_path}/run", f"benchmark={benchmark}", "iterations=1", "tensorboard=false",
                          "threads=1", f"agent.policy.model={tiny_model_dir}",
                          f"env_policy.policy.model={tiny_model_dir}",
                          "generation.prompts_per_iteration=1", "generation.generations_per_prompt=2",
                          "agent.batch_tasks=2", "agent.n=2",
                          "agent.max_new_tokens=6", *extra])
    return CoEvolutionTrainer(cfg).run()[0]


def test_static_data_ablation_generates_nothing(tmp_path, tiny_model_dir):
    row = _run(tmp_path, tiny_model_dir, "task_source=static")
    assert row["gen/generated"] == 0 and row["pool/generated"] == 0 and row["agent/tasks"] == 2
    assert row["weights/env_policy_delta"] == 0.0


def test_frozen_environment_policy_ablation(tmp_path, tiny_model_dir):
    row = _run(tmp_path, tiny_model_dir, "task_source=random_env", "curriculum.k_min=1.0")
    assert row["gen/generated"] == 2 and row["env_policy_update/skipped"] is True and row["weights/env_policy_delta"] == 0.0


FORMULAS = {"rzero": lambda p: 2 * min(p, 1 - p),  # R-Zero: 2·min(p̂, 1 - p̂)
            "absolute_zero": lambda p: 1 - p if 0 < p < 1 else 0.0}  # Absolute Zero: 1 - p̂, 0 at p̂ ∈ {0, 1}


@pytest.mark.parametrize("reward", ["rzero", "absolute_zero"])
def test_other_environment_rewards_score_generations_by_their_formulas(tmp_path, tiny_model_dir, reward):
    """With ``curriculum.env_reward`` = R-Zero or Absolute Zero, the loop's scoring gives every admitted generation
    the reward's formula at its p̂ (hand-built records at p̂ 0, 0.25, 0.5, 0.75, 1) and every rejected one 0; one
    iteration with GRPO on R_env writes those values to ``generations.jsonl``."""
    from types import SimpleNamespace

    row = _run(tmp_path, tiny_model_dir, f"curriculum.env_reward={reward}", "env_policy.update_mode=grpo")
    assert row["gen/generated"] == 2
    cfg = compose_config([f"run_dir={tmp_path}/run2", "benchmark=bamboogle", f"curriculum.env_reward={reward}",
                          "curriculum.alpha=0.25", "curriculum.k_min=0.15"])
    p_hats = {"a": 0.0, "b": 0.25, "c": 0.5, "d": 0.75, "e": 1.0}
    records = [SimpleNamespace(task=SimpleNamespace(id=k)) for k in p_hats] + [SimpleNamespace(task=None)]
    from genenv.trainer.settings import run_settings

    from genenv.trainer.strategies import build_task_source

    scored = build_task_source(run_settings(cfg)).score(None, records, None, p_hats)
    assert [s.r_env for s in scored] == pytest.approx([FORMULAS[reward](p) for p in p_hats.values()] + [0.0])
    assert [s.in_band for s in scored] == [False, True, False, False, False, False]  # |p̂ - 0.25| <= 0.15
    import json

    gens = [json.loads(x) for x in (tmp_path / "run" / "generations.jsonl").read_text().splitlines()]
    for g in gens:
        want = 0.0 if not g["admitted"] else FORMULAS[reward](g["p_hat"])
        assert g["r_env"] == pytest.approx(want)


def test_multi_step_episodes_train_as_one_packed_sequence_each(tmp_path, tiny_model_dir):
    """TextWorldExpress keeps the whole conversation in the prompt, so the loop hands the agent update one
    sequence per episode whose next prompts carry its earlier tokens over, starting at its first prompt, with the
    environment's tokens between turns masked out (mask 0); an episode whose reply did not survive decoding and
    re-encoding (the next prompt rewrote the history) trains per turn instead. One-token replies of the tiny random
    model, which nearly always re-encode to themselves, so that most episodes are packed."""
    cfg = compose_config([f"run_dir={tmp_path}/run", "benchmark=twx", "iterations=1", "tensorboard=false",
                          "threads=1", f"agent.policy.model={tiny_model_dir}", f"env_policy.policy.model={tiny_model_dir}",
                          "task_source=static", "agent.batch_tasks=2", "agent.n=2", "agent.max_new_tokens=1",
                          "agent.temperature=1.0", "benchmark.env_kwargs.max_steps=3",
                          "+benchmark.seed_options.episodes=4"])
    trainer = CoEvolutionTrainer(cfg)
    seen, played = [], []
    update, rollout = trainer.backend.update, trainer.backend.rollout

    def spy(role, samples, mode):
        if role == "agent":
            seen.append(list(samples))
        return update(role, samples, mode)

    def spy_rollout(tasks, spec):
        out = rollout(tasks, spec)
        played.extend(out.trajectories)
        return out

    trainer.backend.update, trainer.backend.rollout = spy, spy_rollout
    row = trainer.run()[0]
    (samples,) = seen
    assert row["agent/rollouts"] == 4 and len(played) == 4 and len({s.episode for s in samples}) == 4
    assert row["time/env_steps"] > 0
    packed = 0
    for traj in played:
        mine = [s for s in samples if s.episode == f"{traj.task.id}#{traj.sample_index}"]
        turns = [t for t in traj.turns if t.response_ids]
        carried = all(nxt.prompt_ids[:len(cur.prompt_ids) + len(cur.response_ids)] == cur.prompt_ids + cur.response_ids
                      for cur, nxt in zip(turns, turns[1:]))
        assert len(mine) == (1 if carried else len(turns))
        assert mine[0].prompt_ids == turns[0].prompt_ids
        if carried and len(turns) > 1:
            packed += 1
            (s,) = mine
            assert 0 in s.response_mask and s.response_mask[0] == 1 and s.response_mask[-1] == 1
            assert len(s.response_mask) == len(s.response_ids) and sum(s.response_mask) == len(turns)
    assert packed >= 2


def test_unknown_env_update_mode_is_a_clear_error(tmp_path, tiny_model_dir):
    with pytest.raises(ValueError, match="config key .env_policy.update_mode. is .ppo.; choose one of .*drgrpo.*grpo.*rwr"):
        _run(tmp_path, tiny_model_dir, "env_policy.update_mode=ppo")


def _refill_stub(rewards_of, batch_tasks=4, n=2, max_rollouts=10, *extra):
    """The ``uniform`` agent batch over a loop stand-in: real config and settings, a pool of 30 real Bamboogle seed
    tasks, and rollouts whose rewards ``rewards_of(task, i)`` sets. Returns the batch, the loop, the first two
    tasks rolled out and the sizes of the rollout calls."""
    import random
    from types import SimpleNamespace

    from genenv.benchmarks.bamboogle.env import load_bamboogle_tasks
    from genenv.runtime.episodes import Rollout, RolloutTimings
    from genenv.trainer.settings import run_settings
    from genenv.trainer.strategies import build_agent_batch
    from genenv.trainer.strategies.agent_batches import RolledBatch
    from genenv.trainer.task_pool import TaskPool

    cfg = compose_config(["benchmark=bamboogle", f"agent.batch_tasks={batch_tasks}", f"agent.n={n}",
                          "agent.filter_groups.enable=true", f"agent.filter_groups.max_rollouts={max_rollouts}",
                          *extra])
    calls = []

    def rollout(tasks, n_=None):
        calls.append(len(tasks))
        return Rollout([SimpleNamespace(task=t, reward=rewards_of(t, i)) for t in tasks for i in range(n)],
                       RolloutTimings(generate_seconds=1.0))

    loop = SimpleNamespace(pool=TaskPool(load_bamboogle_tasks("train")[:30]), rng=random.Random(0), iteration=0,
                           rollout=rollout)
    batch = build_agent_batch(run_settings(cfg))
    first = loop.pool.sample(2, loop.rng)
    out = rollout(first)
    return batch, loop, RolledBatch(list(first), out.trajectories, out.timings), calls


def test_informative_refill_stops_at_its_rollout_cap():
    batch, loop, rolled, calls = _refill_stub(lambda t, i: 0.0)  # every group equal: nothing to learn
    first = list(rolled.tasks)
    batch.refill(loop, rolled)
    # 4 rollouts of the first 2 tasks, then (10 - 4) // 2 = 3 more tasks: the cap of 10, never past it
    assert len(rolled.trajectories) == 10 and rolled.refill_rounds == 1 and calls == [2, 3]
    assert rolled.timings.generate_seconds == 2.0
    assert len({t.id for t in rolled.tasks}) == 5 and rolled.tasks[:2] == first  # distinct tasks, the batch first


def test_informative_refill_stops_once_the_batch_is_informative():
    batch, loop, rolled, calls = _refill_stub(lambda t, i: float(i % 2) if int(t.id.split("_")[-1]) % 2 else 0.5,
                                              max_rollouts=200)
    batch.refill(loop, rolled)
    from genenv.trainer.updates.advantages import informative_task_ids

    trajs = rolled.trajectories
    informative = informative_task_ids(trajs)
    assert len(informative) >= 4 and rolled.refill_rounds >= 1 and len(trajs) < 200
    assert all({tr.reward for tr in trajs if tr.task.id == i} == {0.0, 1.0} for i in informative)


def test_generated_tasks_fill_at_most_their_share_of_the_trained_groups():
    import dataclasses

    batch, loop, rolled, _ = _refill_stub(lambda t, i: float(i % 2), 4, 2, 10, "agent.filter_groups.generated_share=0.5")
    from genenv.benchmarks.bamboogle.env import load_bamboogle_tasks

    first = rolled.tasks
    seeds = load_bamboogle_tasks("train")[40:43]
    made = [dataclasses.replace(t, id=f"gen-{i}", origin="generated") for i, t in enumerate(seeds)]
    trajs = loop.rollout(made + first).trajectories  # 3 informative generated groups first, then 2 informative seed groups
    assert batch.trained_groups(trajs) == ["gen-0", "gen-1", first[0].id, first[1].id]


def test_informative_batches_never_train_on_an_equal_reward_group(tmp_path, tiny_model_dir):
    """One iteration on real Bamboogle tasks with the tiny model (fuzz rewards: random text scores unequal values),
    every second task's episodes set to reward 0 after the rollout (equal groups, as a task too hard for the agent
    gives): the agent update sees only groups whose rewards differ, exactly ``agent.batch_tasks`` of them, the
    iteration refills and stays within its rollout cap, and the metric row counts every group once."""
    seen, rolled = [], []
    cfg = compose_config([f"run_dir={tmp_path}/run", "benchmark=bamboogle", "iterations=1", "tensorboard=false",
                          "threads=1", f"agent.policy.model={tiny_model_dir}", f"env_policy.policy.model={tiny_model_dir}",
                          "task_source=static", "agent.batch_tasks=3", "agent.n=3", "agent.max_new_tokens=6",
                          "agent.temperature=1.0", "reward.free_text_metric=fuzz",
                          "agent.filter_groups.enable=true", "agent.filter_groups.max_rollouts=24",
                          "agent.filter_groups.prior_share=1.0"])  # the first round holds batch_tasks groups
    trainer = CoEvolutionTrainer(cfg)
    update, rollout = trainer.backend.update, trainer.backend.rollout

    def spy_update(role, samples, mode):
        if role == "agent":
            seen.append(list(samples))
        return update(role, samples, mode)

    def spy_rollout(tasks, spec):
        out = rollout(tasks, spec)
        rolled.extend(t.id for t in tasks)
        for t in out.trajectories:
            if t.task.id in rolled[1::2]:
                t.reward = 0.0
        return out

    trainer.backend.update, trainer.backend.rollout = spy_update, spy_rollout
    row = trainer.run()[0]
    assert row["agent/refill_rounds"] >= 1 and row["agent/rollouts"] <= 24
    assert row["agent/rollouts"] == 3 * row["agent/tasks"] == 3 * len(rolled)
    assert row["agent/groups_dropped/seed"] >= 1 and row["agent/groups_dropped/generated"] == 0
    assert row["agent/groups_informative"] + row["agent/groups_dropped/seed"] == row["agent/tasks"]
    assert row["agent/groups_trained"] == 3
    assert row["agent/groups_surplus"] == row["agent/groups_informative"] - 3
    by_group: dict[str, list[float]] = {}
    for s in seen[0]:
        by_group.setdefault(s.uid, []).append(s.reward)
    assert len(by_group) == 3 and all(max(r) > min(r) for r in by_group.values())
    assert not set(by_group) & set(rolled[1::2])  # no zeroed (equal-reward) task was trained on


def test_the_first_round_holds_the_groups_the_expected_share_needs():
    """The first round's extra pool groups (`AgentBatch.early_groups`) on real Bamboogle tasks:
    ``ceil(batch_tasks / share) - len(batch)`` within the rollout cap, the share being the prior before any group,
    then the previous iteration's informative share, never below ``MIN_SHARE``."""
    from collections import Counter

    from genenv.trainer.strategies.agent_batches import MIN_SHARE

    assert MIN_SHARE == 0.25
    batch, loop, rolled, _ = _refill_stub(lambda t, i: 0.0, 4, 2, 40, "agent.filter_groups.prior_share=0.5")
    loop.counters = Counter()
    four = loop.pool.sample(4, loop.rng)
    assert batch.early_groups(loop, [], four) == 4  # ceil(4 / 0.5) - 4
    loop.counters.update(groups_rolled_last=10, groups_informative_last=1)  # 0.1 seen: floored at 0.25
    assert batch.early_groups(loop, [], four) == 12
    loop.counters.update(groups_informative_last=7)  # 8 of 10 informative: ceil(4 / 0.8) = 5 groups
    assert batch.early_groups(loop, [], four) == 1
    loop.counters.update(groups_informative_last=2)  # all 10 informative: the batch alone
    assert batch.early_groups(loop, [], four) == 0
    loop.counters.update(groups_informative_last=-10)  # none informative: the floor again
    assert batch.early_groups(loop, [], four) == 12
    small, _, _, _ = _refill_stub(lambda t, i: 0.0, 4, 2, 30, "agent.filter_groups.prior_share=0.25",
                                  "generation.rollouts_per_task=6")
    loop.counters = Counter()
    # two new tasks with 6 rollouts each and two pool tasks with 2: 16 of the 30 spent, room for 7 groups of 2
    assert small.early_groups(loop, four[:2], four) == 7
    loop.counters.update(groups_rolled_last=4, groups_informative_last=4)
    assert small.early_groups(loop, four[:2], four) == 0


def test_an_informative_batch_spends_its_refills_in_its_first_round(tmp_path, tiny_model_dir):
    """The informative-batch run of the test above with the default prior share (0.25): one rollout call holds
    every group the refills would have drawn (no refill round), within the same cap; the loop keeps the
    iteration's group counts for the next first round."""
    calls = []
    cfg = compose_config([f"run_dir={tmp_path}/run", "benchmark=bamboogle", "iterations=1", "tensorboard=false",
                          "threads=1", f"agent.policy.model={tiny_model_dir}", f"env_policy.policy.model={tiny_model_dir}",
                          "task_source=static", "agent.batch_tasks=3", "agent.n=3", "agent.max_new_tokens=6",
                          "agent.temperature=1.0", "reward.free_text_metric=fuzz",
                          "agent.filter_groups.enable=true", "agent.filter_groups.max_rollouts=24"])
    trainer = CoEvolutionTrainer(cfg)
    rollout = trainer.backend.rollout

    def spy_rollout(tasks, spec):
        calls.append(len(tasks))
        return rollout(tasks, spec)

    trainer.backend.rollout = spy_rollout
    row = trainer.run()[0]
    assert calls[0] == 24 // 3 and row["agent/refill_rounds"] == 0  # ceil(3 / 0.25) = 12 groups, capped at 8
    assert row["agent/rollouts"] == 24 and row["agent/tasks"] == 8
    assert trainer.counters["groups_rolled_last"] == 8
    assert trainer.counters["groups_informative_last"] == row["agent/groups_informative"]


def test_the_replay_arm_leaves_the_writer_frozen(tmp_path, tiny_model_dir):
    from genenv.trainer.experiments.run import arm_run_config

    exp = compose_config(["benchmark=bamboogle", f"experiment_dir={tmp_path}"], "experiment")
    arm = arm_run_config(exp, "replay", 0)
    assert (arm.task_source, arm.agent_batch) == ("random_env", "replay")
    row = _run(tmp_path, tiny_model_dir, "arm=replay",
               "curriculum.k_min=1.0", "iterations=2")
    assert row["gen/generated"] == 2 and row["env_policy_update/skipped"] is True
    assert row["weights/env_policy_delta"] == 0.0













