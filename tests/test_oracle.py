"""The ``oracle`` task source and the ``discriminating`` held-out set on real TextWorldExpress games: the levels,
the draw at the level nearest α, never a held-out game, rejections counted, a benchmark without levels refused,
the set's 120 distinct games none of which a train-fold seed generates, its sha256 and digest checks, and one
iteration of the unchanged loop with the oracle."""
from __future__ import annotations

import hashlib
import random
from collections import Counter
from types import SimpleNamespace

import pytest

from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.twx import env as twx_env
from genenv.benchmarks.twx.graded import DISCRIMINATING_CELLS, game_key, train_fold_games
from genenv.trainer.cli import compose_config
from genenv.trainer.settings import ConfigError, run_settings
from genenv.trainer.strategies import build_task_source
from genenv.trainer.task_pool import TaskPool

POOL = "numLocations=4,numDistractorItems=0,includeDoors=0"  # the TWX runs' seed pool: 4 rooms


def _settings(*overrides: str):
    return run_settings(compose_config(["benchmark=twx", "run_dir=/tmp/unused", "task_source=oracle", "curriculum.alpha=0.5",
                                        f"+benchmark.seed_options.params.coin='{POOL}'",
                                        "+benchmark.seed_options.graded=graded", *overrides]))


@pytest.fixture(scope="module")
def twx():
    spec = get_benchmark("twx", None)
    options = spec.pool_options({"params": {"coin": POOL}})
    return spec, spec.load(split="train", **options), spec.difficulty_levels(options)


@pytest.fixture(scope="module")
def heldout_keys():
    return {game_key(t) for name in twx_env.HELDOUT_SETS for t in twx_env.graded_tasks(name)}


def _loop(settings, spec, pool, iteration=0):
    return SimpleNamespace(settings=settings, spec=spec, pool=pool, rng=random.Random(7), iteration=iteration,
                           counters=Counter())


def test_levels_are_rooms_by_steps_and_each_draw_is_a_train_fold_game_at_its_level(twx):
    spec, _, levels = twx
    rooms_steps = [(int(name.split("numLocations=")[1].split()[0]), int(name.split("steps=")[1])) for name in levels]
    assert {r for r, _ in rooms_steps} == {2, 3, 4, 5, 6}
    assert (4, 3) in rooms_steps and (6, 5) in rooms_steps and (2, 4) not in rooms_steps  # 2 rooms: 2-3 steps only
    assert [s for s, _ in sorted((s, r) for r, s in rooms_steps)] == [s for _, s in rooms_steps]  # easiest first
    rng = random.Random(0)
    for level in levels:
        task = spec.parse_generated(spec.level_text(level, rng), "x", 0, None)
        assert spec.difficulty_level(task) == level and task.metadata["fold"] == "train"
    with pytest.raises(ValueError, match="not a TWX level name"):
        spec.level_text("coin steps=3", rng)
    assert get_benchmark("bamboogle", None).difficulty_levels({}) == []


def test_the_oracle_writes_at_the_level_nearest_alpha_and_never_a_heldout_game(twx, heldout_keys):
    spec, seeds, levels = twx
    st = _settings("generation.prompts_per_iteration=2", "generation.generations_per_prompt=4")
    source = build_task_source(st)
    assert not source.learns and source.update_samples([]) == ([], None)
    pool = TaskPool(seeds)
    loop = _loop(st, spec, pool)
    source.prepare(loop)

    # nothing measured: every level is at α, so the draws spread over the levels
    records, rejected = source.write(loop, 0)
    first = [r.task for r in records if r.task is not None]
    assert len(first) == 8 and len({spec.difficulty_level(t) for t in first}) > 1

    # one task per level measured at iteration 3: p̂ 1 on 2 steps, 0.5 on 5 rooms x 3 steps, 0 elsewhere
    target = next(lv for lv in levels if "numLocations=5 " in lv and lv.endswith("steps=3"))
    rng = random.Random(1)
    measured = {}
    for i, level in enumerate(levels):
        task = spec.parse_generated(spec.level_text(level, rng), f"m{i}", 0, None)
        pool.add(task)
        measured[task.id] = 0.5 if level == target else (1.0 if level.endswith("steps=2") else 0.0)
    pool.record(3, measured)
    loop = _loop(st, spec, pool, iteration=4)
    records, rejected = source.write(loop, 4)
    drawn = [r.task for r in records if r.task is not None]
    assert len(drawn) == 8 and {spec.difficulty_level(t) for t in drawn} == {target}
    assert loop.counters[f"oracle/level={target}"] == 8
    assert all(r.parent is None and r.generation.text.startswith('{"game": "coin"') for r in records)

    # records older than the window no longer count: every level is back at α
    loop = _loop(st, spec, pool, iteration=20)
    records, _ = source.write(loop, 20)
    assert len({spec.difficulty_level(r.task) for r in records if r.task is not None}) > 1

    for task in first + drawn:  # the train fold only, and never a game of either held-out set
        assert task.metadata["fold"] == "train" and task.origin == "generated"
        assert game_key(task) not in heldout_keys


def test_a_failed_draw_is_a_counted_rejection_and_a_benchmark_without_levels_is_refused(twx, heldout_keys):
    spec, seeds, _ = twx
    st = _settings("generation.prompts_per_iteration=1", "generation.generations_per_prompt=2")
    source = build_task_source(st)
    source._levels = ["coin includeDoors=0,numDistractorItems=0,numLocations=2 steps=9"]  # no such game
    records, rejected = source.write(_loop(st, spec, TaskPool(seeds)), 0)
    assert len(records) == 6 and all(r.task is None for r in records)  # 3 tries per slot
    assert rejected == Counter({"steps_unreachable": 6})
    # 2 rooms, 3 steps: 8 distinct games in all, some of them games of the graded held-out set (a dev seed and a
    # train seed can generate the same game): drawn, they are rejected
    st = _settings("generation.prompts_per_iteration=1", "generation.generations_per_prompt=12")
    source = build_task_source(st)
    source._levels = ["coin includeDoors=0,numDistractorItems=0,numLocations=2 steps=3"]
    records, rejected = source.write(_loop(st, spec, TaskPool(seeds)), 0)
    assert rejected["heldout_game"] > 0
    assert all(game_key(r.task) not in heldout_keys for r in records if r.task is not None)
    bamboogle = get_benchmark("bamboogle", None)
    st = run_settings(compose_config(["benchmark=bamboogle", "run_dir=/tmp/unused", "task_source=oracle"]))
    with pytest.raises(ConfigError, match="task_source=oracle needs a benchmark with difficulty levels"):
        build_task_source(st).prepare(_loop(st, bamboogle, TaskPool(bamboogle.load(split="train"))))


def test_the_discriminating_set_is_120_distinct_games_no_train_seed_generates(monkeypatch, tmp_path):
    tasks = twx_env.load_twx_tasks("heldout", games="coin", graded="discriminating")
    assert len(tasks) == 120 and len({game_key(t) for t in tasks}) == 120
    assert {t.metadata["fold"] for t in tasks} == {"dev"}
    cells = Counter((int(t.metadata["params"]["numLocations"]), len(t.gold)) for t in tasks)
    assert sum(c for (_, steps), c in cells.items() if steps == 3) == 80 and min(s for _, s in cells) == 3
    assert {r for r, _ in cells} == {r for r, _, _ in DISCRIMINATING_CELLS} == {3, 4, 5, 6}
    assert Counter(t.metadata["bins"]["steps"] for t in tasks) == Counter({"3": 80, "4": 32, "5-6": 8})
    for rooms in (3, 4, 5, 6):  # no writer that draws from the train fold can write a held-out game
        params = {"numLocations": rooms, "includeDoors": 0, "numDistractorItems": 0}
        assert not train_fold_games(params) & {game_key(t) for t in tasks if t.metadata["params"] == params}
    with pytest.raises(ValueError, match="unknown TextWorldExpress held-out set 'hardest'"):
        twx_env.load_twx_tasks("heldout", games="coin", graded="hardest")

    # an edited file is refused; a file whose games the engine no longer generates is refused
    edited = tmp_path / "set.yaml"
    text = twx_env.HELDOUT_SETS["discriminating"].read_text()
    edited.write_text(text.replace("numLocations: 3", "numLocations: 6", 1))
    monkeypatch.setitem(twx_env.HELDOUT_SETS, "discriminating", edited)
    with pytest.raises(ValueError, match="was edited"):
        twx_env.graded_tasks("discriminating")
    monkeypatch.setitem(twx_env.HELDOUT_SHA256, "discriminating", hashlib.sha256(edited.read_bytes()).hexdigest())
    with pytest.raises(ValueError, match="the engine generates another game"):
        twx_env.graded_tasks("discriminating")


def test_one_iteration_of_the_loop_with_the_oracle(tmp_path, tiny_model_dir, heldout_keys):
    import json

    from genenv.trainer.loop import CoEvolutionTrainer

    cfg = compose_config(["benchmark=twx", f"run_dir={tmp_path}", "task_source=oracle", "iterations=1",
                          "tensorboard=false", "threads=1", f"agent.policy.model={tiny_model_dir}",
                          f"env_policy.policy.model={tiny_model_dir}", "generation.prompts_per_iteration=1",
                          "generation.generations_per_prompt=3", "agent.batch_tasks=2", "agent.n=2",
                          "agent.max_new_tokens=4", "benchmark.seed_limit=6", "eval.every=0",
                          f"+benchmark.seed_options.params.coin='{POOL}'"])
    trainer = CoEvolutionTrainer(cfg)
    env_before = trainer.backend.fingerprint("env_policy")
    (row,) = trainer.run()
    assert row["gen/admitted"] == 3 and len(trainer.pool) == 9
    assert trainer.backend.fingerprint("env_policy") == env_before  # never updated
    rows = [json.loads(line) for line in (tmp_path / "generations.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["admitted"] and r["p_hat"] is not None for r in rows)
    written = [t for t in trainer.pool.tasks if t.origin == "generated"]
    assert all(game_key(t) not in heldout_keys and t.metadata["fold"] == "train" for t in written)
    # the outcome report reads the levels drawn from the run's own counters
    from genenv.trainer.experiments.contrasts import source_summary
    from genenv.trainer.experiments.run import finish_arm

    finish_arm(tmp_path, 1, keep_checkpoints=True)  # the loop state an experiment keeps beside a finished run
    summary = source_summary(tmp_path, [row])
    assert summary["admitted"] == summary["generated"] == 3 and summary["in_band"] == row["gen/in_band"]
    assert sum(summary["levels"].values()) == 3
    drawn = {k.split("=", 1)[1]: v for k, v in trainer.counters.items() if k.startswith("oracle/level=")}
    assert summary["levels"] == drawn
