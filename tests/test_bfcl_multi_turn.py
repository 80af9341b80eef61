"""BFCL multi-turn: the gold policy under bfcl-eval's checker in all four categories and both protocols, execution
only through bfcl-eval's backends, fuzzed call strings, miss_func reveals, and generated multi-turn tasks."""
from __future__ import annotations

import json
import re
import random

import gymnasium as gym
import pytest

from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.task_writer import Rejection
from genenv.envs import TextActionWrapper
from genenv.benchmarks.bfcl.multi_turn_env import (
    DEMO,
    MULTI_TURN_CATEGORIES,
    REVEAL_MESSAGE,
    TURN_STEP_LIMIT,
    BFCLMultiTurnEnv,
    load_multi_turn_tasks,
)
from genenv.runtime.policies import GoldPolicy
from genenv.runtime.episodes import play_episodes

from conftest import DATA_DIR, FULL_DATA


@pytest.mark.parametrize("protocol", ["official", "per_turn"])
@pytest.mark.parametrize("category", MULTI_TURN_CATEGORIES)
def test_gold_policy_passes_every_entry_under_the_official_checker(category, protocol):
    tasks = load_multi_turn_tasks(category, protocol=protocol)
    if protocol == "official":
        assert len(tasks) == (200 if FULL_DATA else 12)
    trajs = play_episodes(tasks, GoldPolicy(), chunk_size=256).trajectories
    failures = [(t.task.id, t.info.get("error_type")) for t in trajs if t.reward != 1.0]
    assert not failures


def test_wrong_calls_fail_with_the_checkers_reason():
    task = load_multi_turn_tasks("multi_turn_base")[0]
    env = TextActionWrapper(BFCLMultiTurnEnv(tasks=[task], parsing="lenient"))
    env.reset(options={"task_index": 0})
    for _ in task.gold:  # end every turn without a call
        obs, reward, terminated, truncated, info = env.step("I am not sure.")
    assert terminated and reward == 0.0 and info["error_type"] == "multi_turn:empty_turn_model_response"
    gold = BFCLMultiTurnEnv.gold_action(task)
    env.reset(options={"task_index": 0})
    first = re.findall(r"<tool_call>.*?</tool_call>", gold[0], re.DOTALL)
    env.step("\n".join(first[:-1]) if len(first) > 1 else "Done.")  # drop the turn's last gold call
    for text in gold[1:]:
        obs, reward, terminated, truncated, info = env.step(text)
        if terminated:
            break
    assert reward == 0.0 and info["error_type"].startswith("multi_turn:")


def test_calls_execute_only_through_the_backends_and_unknown_names_never_run(tmp_path):
    task = load_multi_turn_tasks("multi_turn_base")[0]
    env = TextActionWrapper(BFCLMultiTurnEnv(tasks=[task], parsing="lenient"))
    env.reset(options={"task_index": 0})
    marker = tmp_path / "pwned"
    obs, reward, terminated, _, info = env.step(f"[open(file='{marker}', mode='w')]")
    assert "no function named 'open'" in obs and "not a function of this system" in info["error"]
    payload = f"__import__('os').system('touch {marker}')"  # a string value: passed to cd, never evaluated
    obs, *_ = env.step(f'<tool_call>{json.dumps({"name": "cd", "arguments": {"folder": payload}})}</tool_call>')
    assert obs.startswith("Results:\ncd(") and "error" in obs
    obs, *_ = env.step(f"[cd(folder=__import__('os').system('touch {marker}'))]")  # not a literal: never parsed
    assert not marker.exists()
    obs, _, _, _, info = env.step("[ls(bogus=1)]")
    assert "Error during execution" in obs and "unexpected keyword argument" in obs


def fuzz_call_strings(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    names = ["cd", "ls", "mkdir", "mv", "grep", "sort", "post_tweet", "exit", "eval", "open", "__import__",
             "os.system", "ls.__class__", "not_a_function", ""]
    values = ["1", "-3.5", "'x'", "\"..\"", "True", "None", "[1, 2]", "{'a': 1}", "ls()", "__import__('os')",
              "1/0", "'" + "y" * 300 + "'", "(", "lambda: 1", "b'bytes'", "1e309", "[" * 40, "{**x}"]
    out = []
    for _ in range(n):
        kind = rng.random()
        name = rng.choice(names)
        args = ", ".join(f"{rng.choice(['folder', 'dir_name', 'a', 'x', 'file_name'])}={rng.choice(values)}"
                         for _ in range(rng.randint(0, 3)))
        if kind < 0.4:
            out.append(f"[{name}({args})]")
        elif kind < 0.6:
            out.append(f"{name}({rng.choice(values)})")
        elif kind < 0.8:
            arguments = {rng.choice(["folder", "a", "x"]): json.loads(rng.choice(["1", "\"x\"", "null", "[1]",
                                                                                  "{\"k\": 2}"]))}
            out.append(f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>')
        else:
            text = f"[{name}({args})]"
            cut = rng.randint(0, len(text))
            out.append(text[:cut] + rng.choice(["", ")", "]", "((", "\x00", "<tool_call>"]) + text[cut:])
    return out


def test_fuzzed_call_strings_never_raise():
    tasks = load_multi_turn_tasks("multi_turn_base")[:2]
    env = TextActionWrapper(BFCLMultiTurnEnv(tasks=tasks, max_steps=25))
    strings = fuzz_call_strings(1200)
    env.reset(options={"task_index": 0})
    for i, text in enumerate(strings):
        obs, reward, terminated, truncated, info = env.step(text)
        assert isinstance(obs, str) and 0.0 <= reward <= 1.0 and isinstance(info["error"], str)
        if terminated or truncated:
            env.reset(options={"task_index": i % 2})


def test_miss_func_reveals_the_held_out_functions_at_their_turn():
    task = load_multi_turn_tasks("multi_turn_miss_func")[0]
    (turn, docs), = task.metadata["missed_function"].items()
    names = {d["name"] for d in docs}
    assert not names & {f["name"] for f in task.tools}  # not offered at the start
    env = TextActionWrapper(BFCLMultiTurnEnv(tasks=[task], parsing="lenient"))
    obs, info = env.reset(options={"task_index": 0})
    assert not any(f'"name": "{n}"' in info["messages"][0]["content"] for n in names)
    for text in BFCLMultiTurnEnv.gold_action(task):
        obs, reward, terminated, _, info = env.step(text)
        if REVEAL_MESSAGE in obs:
            assert info["turn"] == int(turn) and all(f'"name": "{n}"' in obs for n in names)
            break
    else:
        pytest.fail("no reveal message")


def test_per_turn_tasks_show_the_executed_gold_history():
    entry = load_multi_turn_tasks("multi_turn_long_context")[0]
    per_turn = [t for t in load_multi_turn_tasks("multi_turn_long_context", protocol="per_turn")
                if t.metadata["entry_id"] == entry.id]
    assert len(per_turn) == sum(bool(g) for g in entry.gold)
    last = per_turn[-1]
    messages = BFCLMultiTurnEnv.render_messages(last)[1 + len(DEMO):]  # after the system prompt and the demo
    k = last.metadata["start_turn"]
    assert sum(m["role"] == "user" and m["content"].startswith("Results:") for m in messages) == \
        sum(bool(g) for g in entry.gold[:k])
    assert messages[-1]["content"] == last.prompt


def test_a_turn_longer_than_the_step_limit_is_force_terminated():
    task = load_multi_turn_tasks("multi_turn_base")[0]
    env = TextActionWrapper(BFCLMultiTurnEnv(tasks=[task], parsing="lenient"))
    env.reset(options={"task_index": 0})
    for step in range(TURN_STEP_LIMIT + 1):
        _, reward, terminated, _, info = env.step("[ls()]")
        assert terminated == (step == TURN_STEP_LIMIT)
    assert reward == 0.0 and info["error_type"] == "multi_turn:force_terminated"


def test_bfcl_v0_makes_the_multi_turn_env_for_multi_turn_categories():
    env = gym.make("genenv/BFCL-v0", category="multi_turn_miss_param")
    assert isinstance(env.unwrapped, BFCLMultiTurnEnv) and env.unwrapped.tasks[0].id.startswith("multi_turn_miss_param")


@pytest.mark.parametrize("proposal,reason", [
    ({"question": "Go to the documents.", "calls": ["cd(folder=ls())"]}, "bad_call"),
    ({"question": "Send it.", "calls": ["send_email(to='a')"]}, "unknown_function"),
    ({"question": "Open the folder nowhere.", "calls": ["cd(folder='nowhere_at_all')"]}, "execution_error"),
    ({"question": "List with a bad flag.", "calls": ["ls(bogus=1)"]}, "execution_error"),
    ({"question": "", "calls": ["ls()"]}, "missing_fields"),
])
def test_generated_multi_turn_tasks_are_validated_by_execution(proposal, reason):
    spec = get_benchmark("bfcl_multi_turn", DATA_DIR)
    parent = load_multi_turn_tasks("multi_turn_base")[0]
    out = spec.parse_generated(json.dumps(proposal), "gen-0-0-0", 0, parent)
    assert isinstance(out, Rejection) and out.reason == reason, out
    assert spec.parse_generated(json.dumps({"question": "List files.", "calls": ["ls()"]}), "g", 0, None).reason \
        == "no_parent"


def test_an_admitted_generated_task_changes_state_and_is_won_by_its_gold():
    spec = get_benchmark("bfcl_multi_turn", DATA_DIR)
    parent = load_multi_turn_tasks("multi_turn_base")[0]
    proposal = {"question": "Create a folder named 'backup_2031' in the current directory, then list the files.",
                "calls": ["mkdir(dir_name='backup_2031')", "ls()"]}
    task = spec.parse_generated(json.dumps(proposal), "gen-2-0-1", 2, parent)
    assert not isinstance(task, Rejection), task
    assert task.metadata["initial_config"] == parent.metadata["initial_config"] and task.parent_id == parent.id
    traj = play_episodes([task], GoldPolicy()).trajectories[0]
    assert traj.reward == 1.0 and traj.success
    env = TextActionWrapper(BFCLMultiTurnEnv(tasks=[task], parsing="lenient"))
    env.reset(options={"task_index": 0})
    env.step("[ls()]")  # the listing alone does not create the folder: the state check fails
    _, reward, terminated, _, info = env.step("Done.")
    assert terminated and reward == 0.0 and info["error_type"] == "multi_turn:instance_state_mismatch"
