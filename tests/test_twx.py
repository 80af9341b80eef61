"""TextWorldExpress specifics (the worked example): gold sequences, engine time-sharing, generated games."""
from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.task_writer import Rejection
from genenv.benchmarks.twx.spec import gold_wins
from genenv.envs.parsing import ActionParseError, parse_command
from genenv.benchmarks.twx.env import (TextWorldExpressEnv, TWXEngine, cancel_detours, load_twx_tasks, make_task,
                                       params_dict, params_string)
from genenv.envs.task import Task

from conftest import DATA_DIR


def test_default_test_split_loads_deterministically_and_every_gold_wins():
    a, b = load_twx_tasks("test"), load_twx_tasks("test")
    assert len(a) == 30 and [t.id for t in a] == [t.id for t in b] and [t.gold for t in a] == [t.gold for t in b]
    assert {t.metadata["game"] for t in a} == {"coin", "cookingworld", "twc"}
    assert all(20000 <= t.metadata["seed"] < 21000 for t in a)
    assert all(gold_wins(t) and len(t.gold) <= TextWorldExpressEnv.default_max_steps for t in a)
    heldout, train = load_twx_tasks("heldout", episodes=2), load_twx_tasks("train", episodes=2)
    assert {t.metadata["fold"] for t in heldout} == {"dev"} and {t.metadata["fold"] for t in train} == {"train"}


def test_interleaved_episodes_match_sequential_ones():
    """Envs time-share one simulator by replay: alternating steps of two games gives the same observations."""
    t1, t2 = load_twx_tasks("test", games="cookingworld", episodes=2)

    def sequential(task):
        env = TextWorldExpressEnv(tasks=[task])
        env.reset(options={"task_index": 0})
        return [env.step(c)[:3] for c in task.gold]

    expected = [sequential(t1), sequential(t2)]
    envs = [TextWorldExpressEnv(tasks=[t]) for t in (t1, t2)]
    for env in envs:
        env.reset(options={"task_index": 0})
    got = [[], []]
    for k in range(max(len(t1.gold), len(t2.gold))):
        for i, (env, task) in enumerate(zip(envs, (t1, t2))):
            if k < len(task.gold):
                got[i].append(env.step(task.gold[k])[:3])
    assert got == expected and got[0][-1][1] == 1.0 and got[1][-1][1] == 1.0


def test_commands_are_matched_to_the_admissible_set_and_truncated_at_max_steps():
    task = load_twx_tasks("test", games="coin", episodes=1)[0]
    env = TextWorldExpressEnv(tasks=[task], max_steps=3)
    env.reset(options={"task_index": 0})
    obs, reward, terminated, truncated, info = env.step("fly to the moon")
    assert (reward, terminated, truncated) == (0.0, False, False) and "not an admissible command" in info["error"]
    assert "Valid actions:" in obs and "look around" in obs
    env.step("LOOK   Around")
    obs, reward, terminated, truncated, info = env.step("inventory")
    assert truncated and not terminated and info["steps"] == 3 and not info["error"]
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("look around")


def test_parse_command():
    assert parse_command("Action: Take Coin.") == "take coin"
    assert parse_command("> move   north\nbecause it is there") == "move north"
    assert parse_command("<think>hmm</think>`open fridge`") == "open fridge"
    for bad in ("", "  \n", "...", None):
        with pytest.raises(ActionParseError):
            parse_command(bad)
    assert cancel_detours(["look around", "move west", "move east", "move south", "take coin"]) == [
        "look around", "move south", "take coin"]
    assert params_dict("a=1, b=0") == {"a": 1, "b": 0} and params_dict({"x": True}) == {"x": 1}
    with pytest.raises(ValueError):
        params_dict({"x": 1.5})


def test_coin_gold_is_the_shortest_path_to_the_coin_and_the_same_on_every_call():
    """Coin Collector with doors (the engine's default map): TWX's own gold path is a random walk that differs between
    calls; ours (TWXEngine.coin_gold) is the same on every call, wins, and is never longer than a winning TWX draw
    with its detours removed. Train seed 4's shortest path was read off the engine's map by hand."""
    from textworld_express import TextWorldExpressEnv as Simulator  # TWX itself draws its gold path
    engine, sim = TWXEngine.shared(), Simulator(envStepLimit=1_000)
    sim.load(gameName="coin", gameParams=params_string({}))
    for seed in range(4, 8):
        gold = engine.generate("coin", {}, "train", seed, gold=True)["gold"]
        assert gold == engine.generate("coin", {}, "train", seed, gold=True)["gold"]
        assert gold[0] == "look around" and gold[-1] == "take coin"
        task = make_task("coin", {}, "train", seed)
        assert task.gold == gold and gold_wins(task)
        sim.reset(seed=seed, gameFold="train", generateGoldPath=True)
        draw = cancel_detours(list(sim.getGoldActionSequence()))
        assert not gold_wins(dataclasses.replace(task, gold=draw)) or len(gold) <= len(draw)
    assert engine.generate("coin", {}, "train", 4, gold=True)["gold"] == [
        "look around", "move west", "open door to north", "move north", "open door to west", "move west", "take coin"]
    spec = get_benchmark("twx", DATA_DIR)
    text = json.dumps({"game": "coin", "params": {}, "steps": 7, "seed": 4})
    first, again = (spec.parse_generated(text, "gen-0-0-0", 0, None) for _ in range(2))
    assert isinstance(first, Task) and first.metadata["seed"] == again.metadata["seed"] == 4


@pytest.mark.parametrize("proposal,reason", [
    ({"game": "chess", "params": {}, "seed": 3}, "unknown_game"),
    ({"game": "coin", "params": {"numLocations": "lots"}, "seed": 3}, "bad_params"),
    ({"game": "coin", "params": {}, "seed": 20001}, "seed_outside_train_fold"),
    ({"game": "coin", "params": {"numLocations": 40}, "seed": 3}, "engine_rejected"),
    ({"game": "coin", "params": {"bogus": 1}, "seed": 3}, "engine_rejected"),
    ({"game": "cookingworld", "params": {"numLocations": 11, "numIngredients": 5, "includeDoors": 1}, "seed": 5},
     "exceeds_step_limit"),
    ({"params": {}, "seed": 3}, "missing_fields"),
])
def test_generated_games_are_validated_by_the_engine(proposal, reason):
    out = get_benchmark("twx", DATA_DIR).parse_generated(json.dumps(proposal), "gen-0-0-0", 0, None)
    assert isinstance(out, Rejection) and out.reason == reason, out


def test_an_admitted_generated_game_is_won_by_its_gold_in_the_env():
    spec = get_benchmark("twx", DATA_DIR)
    proposal = {"game": "coin", "params": {"numLocations": 4, "numDistractorItems": 1, "includeDoors": 0}, "seed": 17}
    task = spec.parse_generated(json.dumps(proposal), "gen-3-1-2", 3, None)
    assert not isinstance(task, Rejection), task
    assert task.origin == "generated" and task.admitted_iteration == 3 and task.metadata["fold"] == "train"
    env = TextWorldExpressEnv(tasks=[task])
    env.reset(options={"task_index": 0})
    for command in task.gold:
        _, reward, terminated, _, info = env.step(command)
    assert reward == 1.0 and terminated and info["success"]
    pool = load_twx_tasks("train", games="coin", episodes=20)
    assert spec.near_duplicate(task, pool) is None
    assert isinstance(spec.near_duplicate(task, pool + [task]), Rejection)


def test_the_graded_held_out_set_spreads_over_difficulty_and_is_scored_per_bin(tmp_path, monkeypatch):
    """The graded held-out set (benchmarks/twx/graded.py): 120 dev-fold Coin Collector games over rooms, doors,
    distractors and steps to win; the gold policy wins every one and the report gives the win rate per bin; other
    splits and games are untouched; a game the engine no longer generates as recorded is an error."""
    from collections import Counter

    import yaml

    from genenv.benchmarks.twx import env as twx_env
    from genenv.runtime.evaluation import evaluate
    from genenv.runtime.policies import GoldPolicy

    tasks = load_twx_tasks("heldout", games="coin", graded=True)
    assert len(tasks) == 120 and len({t.id for t in tasks}) == 120 and {t.metadata["fold"] for t in tasks} == {"dev"}
    bins = Counter((d, v) for t in tasks for d, v in t.metadata["bins"].items())
    assert {v for d, v in bins if d == "rooms"} == {"2", "4", "6"}
    assert {v for d, v in bins if d == "steps"} == {"2", "3-4", "5-6", "7+"} and bins[("steps", "7+")] >= 10
    assert load_twx_tasks("train", games="coin", graded=True, episodes=2)[0].metadata["fold"] == "train"
    assert load_twx_tasks("heldout", games="cookingworld", graded=True) == []
    res = evaluate(GoldPolicy(), ["twx"], split="heldout", options={"twx": {"games": "coin", "graded": True}},
                   progress=False)
    metrics = {m.key: m for m in res.metrics}
    assert metrics["twx/coin/success"].value == 1.0 and res.headlines["twx"].n == 120
    per_bin = {k: m for k, m in metrics.items() if "/graded/" in k}
    assert sum(m.n for k, m in per_bin.items() if "/graded/rooms=" in k) == 120
    assert all(m.value == 1.0 for m in per_bin.values()) and "twx/coin/graded/steps=7+" in per_bin
    entries = yaml.safe_load(twx_env.HELDOUT_SETS["graded"].read_text())
    entries[5]["digest"] = "0" * 12
    (tmp_path / "graded.yaml").write_text(yaml.safe_dump(entries))
    monkeypatch.setitem(twx_env.HELDOUT_SETS, "graded", tmp_path / "graded.yaml")
    with pytest.raises(ValueError, match="was edited"):
        twx_env.graded_tasks()
    monkeypatch.setitem(twx_env.HELDOUT_SHA256, "graded",
                        hashlib.sha256((tmp_path / "graded.yaml").read_bytes()).hexdigest())
    with pytest.raises(ValueError, match="the engine generates another game"):
        twx_env.graded_tasks()
