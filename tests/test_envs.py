"""BFCL and Bamboogle specifics of the Gymnasium contract (more categories than the conformance suite's default
split), the text wrapper, and data errors. The contract of every registered env is in ``test_conformance.py``."""
from __future__ import annotations


import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import genenv.envs  # noqa: F401  (registers the envs)
from genenv.envs import DataError, TextActionWrapper
from genenv.benchmarks.bamboogle.env import load_bamboogle_tasks
from genenv.benchmarks.bfcl.env import load_bfcl_tasks

from conftest import FULL_DATA

ENV_CASES = [("genenv/BFCL-v0", {"category": c}) for c in ("simple_python", "parallel_multiple", "irrelevance",
                                                            "simple_java", "live_multiple")] + [
    ("genenv/Bamboogle-v0", {})]


@pytest.mark.parametrize("env_id,kwargs", ENV_CASES)
def test_check_env_passes_raw_and_wrapped(env_id, kwargs, data_dir):
    env = gym.make(env_id, data_dir=data_dir, render_mode="ansi", **kwargs)
    check_env(env.unwrapped)
    check_env(TextActionWrapper(env.unwrapped), skip_render_check=True)


def test_reset_is_deterministic_under_a_seed_and_selectable_by_id():
    env = gym.make("genenv/BFCL-v0", category="multiple")
    a = [env.reset(seed=7)[1]["task_id"] for _ in range(3)]
    b = [env.reset(seed=7)[1]["task_id"] for _ in range(3)]
    assert a == b
    task = env.unwrapped.tasks[3]
    assert env.reset(options={"task_id": task.id})[1]["task_id"] == task.id
    with pytest.raises(ValueError, match="unknown task_id"):
        env.reset(options={"task_id": "nope"})


def test_text_wrapper_turns_garbage_into_reward_zero_with_error():
    for parsing, reason in (("lenient", "no tool call"), ("official", "Wrong number of functions")):
        env = TextActionWrapper(gym.make("genenv/BFCL-v0", category="simple_python", parsing=parsing).unwrapped)
        env.reset(options={"task_index": 0})
        obs, reward, terminated, truncated, info = env.step("I think the answer is 42 {")
        assert reward == 0.0 and terminated and not truncated and info["success"] is False
        assert reason in info["error"], parsing  # official: bfcl-eval's decoder reads no call ([]); its runner
        # passes that to the AST checker, which reports wrong_count
    assert info["parsed_action"] == []
    benv = TextActionWrapper(gym.make("genenv/Bamboogle-v0").unwrapped)
    benv.reset(options={"task_index": 0})
    _, reward, _, _, info = benv.step(12345)
    assert reward == 0.0 and "expected model text" in info["error"]


def test_structured_actions_drive_the_env_directly():
    env = gym.make("genenv/BFCL-v0", category="simple_python").unwrapped
    _, info = env.reset(options={"task_index": 0})
    task = env.task
    _, r, *_ = env.step(type(env).gold_action(task))
    assert r == 1.0
    env.reset(options={"task_index": 0})
    _, r, *_, info = env.step([{"name": task.tools[0]["name"], "arguments": {}}])
    assert r == 0.0 and "Missing required parameter" in info["error"]


def test_data_sizes_match_sources_md_on_full_data():
    n_bamboogle = len(load_bamboogle_tasks())
    n_simple = len(load_bfcl_tasks("simple_python"))
    if FULL_DATA:
        assert (n_bamboogle, n_simple) == (125, 400)
        assert len(load_bfcl_tasks("live_irrelevance")) == 884
    else:  # packaged samples: the full Bamboogle set, the first 50 simple_python entries
        assert (n_bamboogle, n_simple) == (125, 50)
    tr, ho = load_bamboogle_tasks("train"), load_bamboogle_tasks("heldout")
    assert len(tr) + len(ho) == n_bamboogle and not {t.id for t in tr} & {t.id for t in ho}
    assert next(t for t in load_bamboogle_tasks() if t.id == "bamboogle_75").gold == "George VI"


def test_missing_and_malformed_files_name_the_file_and_line(tmp_path):
    assert len(load_bamboogle_tasks(data_dir=str(tmp_path))) == 125  # no bamboogle/ there: the packaged sample
    (tmp_path / "bamboogle").mkdir()
    with pytest.raises(DataError, match="missing data file .*bamboogle/test.jsonl"):  # a folder without its file
        load_bamboogle_tasks(data_dir=str(tmp_path))
    (tmp_path / "bamboogle" / "test.jsonl").write_text('{"idx": 1, "question": "q", "answer": "a"}\n{oops\n')
    with pytest.raises(DataError, match="test.jsonl: line 2 is not valid JSON"):
        load_bamboogle_tasks(data_dir=str(tmp_path))
    (tmp_path / "bamboogle" / "test.jsonl").write_text('{"idx": 1, "question": "q"}\n')
    with pytest.raises(DataError, match=r"line 1: missing field\(s\) \['answer'\]"):
        load_bamboogle_tasks(data_dir=str(tmp_path))
    with pytest.raises(DataError, match="not a directory"):
        load_bamboogle_tasks(data_dir=str(tmp_path / "nope"))


def test_structured_tool_calls_go_to_the_env_unparsed():
    """A list of ToolCall reaches an env whose actions are calls as they are (BFCL's gold calls score 1); a
    text-only env scores them 0 with the reason; TravelPlanner two-stage takes one call a step, its arguments
    named in any order or given in the tool's order."""
    from genenv.benchmarks.bfcl.env import BFCLEnv
    from genenv.benchmarks.travelplanner.env import TravelPlannerTwoStageEnv
    from genenv.envs.parsing import ToolCall
    from genenv.envs.wrappers import make_text_env

    task = load_bfcl_tasks("simple_python")[0]
    env = make_text_env([task])
    env.reset(options={"task_id": task.id})
    _, reward, done, _, info = env.step(BFCLEnv.gold_action(task))
    assert reward == 1.0 and done and info["raw_action"].startswith("[{")
    answer = load_bamboogle_tasks()[0]
    env = make_text_env([answer])
    env.reset(options={"task_id": answer.id})
    _, reward, _, _, info = env.step([ToolCall("search", {"q": "x"})])
    assert reward == 0.0 and "takes model text" in info["error"]
    call = TravelPlannerTwoStageEnv.action_from_calls(
        [ToolCall("FlightSearch", {"Date": "2022-03-16", "Destination City": "Atlanta", "Departure City": "Sarasota"})])
    assert list(call.arguments) == ["Departure City", "Destination City", "Date"]
    for bad in ([], [call, call], [ToolCall("Teleport", {})], [ToolCall("CitySearch", {"a": 1, "b": 2})]):
        with pytest.raises(ValueError):
            TravelPlannerTwoStageEnv.action_from_calls(bad)
