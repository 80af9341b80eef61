"""genenv-serve with real clients: OpenEnv's own client plays every benchmark, evaluation over the wire gives the
in-process rewards, inline tasks are validated as generated tasks are, and bad input is answered while the
session and the server go on."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import gymnasium as gym
import pytest
from conftest import DATA_DIR
from openenv.core.generic_client import GenericEnvClient
from websockets.sync.client import connect

from genenv.benchmarks.registry import BENCHMARKS, get_benchmark
from genenv.envs.registry import env_entry, load_plugins
from genenv.envs.wrappers import make_text_env
from genenv.runtime.serve.protocol import task_sha256
from genenv.runtime.serve.launch import spawn
from genenv.runtime.episodes import RolloutSpec, play_episodes
from genenv.runtime.policies import GoldPolicy
from genenv.runtime.serve.client import RemoteEpisodes, SessionClient, reset_arguments

load_plugins()
DIR = str(DATA_DIR) if DATA_DIR else None


def first_task(benchmark: str, index: int = 0):
    entry = env_entry(benchmark)
    return entry.env_class.load_tasks(data_dir=DIR, **entry.split_options[0])[index]


class Raw:
    """One raw WebSocket session: send any frame, read the answer."""

    def __init__(self, url: str, headers: dict | None = None):
        self.ws = connect(url.replace("http", "ws") + "/ws", additional_headers=headers, max_size=2**24)

    def ask(self, message) -> dict:
        self.ws.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
        return json.loads(self.ws.recv(timeout=120))

    def close(self):
        self.ws.close()


@pytest.mark.parametrize("benchmark", sorted(BENCHMARKS))
def test_openenv_client_plays_the_gold_policy_and_a_bad_action(env_server_url, benchmark):
    """OpenEnv's own client: the gold policy's episode earns reward 1 (success); a bad action earns 0 with the
    reason."""
    task = first_task(benchmark)
    cls = env_entry(benchmark).env_class
    with GenericEnvClient(base_url=env_server_url).sync() as client:
        result = client.reset(**reset_arguments(task))
        assert result.observation["task_id"] == task.id and result.observation["messages"]
        total, turn = 0.0, 0
        while not result.done:
            result = client.step({"text": cls.gold_text(task, turn)})
            total, turn = total + result.reward, turn + 1
        assert total == pytest.approx(1.0) and result.observation["info"]["success"] is True
        result = client.reset(**reset_arguments(task))
        result = client.step({"text": "\x00 {{{ not an answer"})
        assert result.reward == 0.0
        info = result.observation["info"]
        assert info["success"] is False and "error" in info  # the reason where the text could not be read


def test_evaluation_over_the_server_equals_in_process(env_server_url):
    """The same policy and tasks give the same rewards and texts in-process and over the wire (multi-step too)."""
    for benchmark in ("bamboogle", "bfcl_multi_turn", "twx", "api_bank_plan"):
        entry = env_entry(benchmark)
        tasks = entry.env_class.load_tasks(data_dir=DIR, **entry.split_options[0])[:3]
        here = play_episodes(tasks, GoldPolicy(), RolloutSpec(env_kwargs={benchmark: {"data_dir": DIR}})).trajectories
        there = play_episodes(tasks, GoldPolicy(),
                              RolloutSpec(env_kwargs={benchmark: {"data_dir": DIR}},
                                          env_server=env_server_url)).trajectories
        assert [t.reward for t in here] == [t.reward for t in there]
        assert [t.text for t in here] == [t.text for t in there]
        assert [t.messages for t in here] == [t.messages for t in there]


def test_sessions_spread_over_several_servers_with_the_same_rewards(env_server_url):
    """``env_server`` with two URLs (the shared server and a second one) spreads a rollout's sessions evenly and
    gives the in-process rewards; a bad URL list is refused."""
    from genenv.runtime.serve.client import server_urls

    proc, second = spawn("--benchmarks", "bamboogle")
    try:
        entry = env_entry("bamboogle")
        tasks = entry.env_class.load_tasks(data_dir=DIR, **entry.split_options[0])[:3]
        spec = RolloutSpec(n=2, env_kwargs={"bamboogle": {"data_dir": DIR}})
        here = play_episodes(tasks, GoldPolicy(), spec).trajectories
        runner = RemoteEpisodes(f"{env_server_url}, {second}/")
        assert runner.urls == [env_server_url, second]
        opened = runner.open([(i, t, None) for i, t in enumerate(tasks * 2)])
        assert runner.open_on == {env_server_url: 3, second: 3} and len(opened) == 6
        runner.shutdown()
        assert runner.open_on == {env_server_url: 0, second: 0}
        there = play_episodes(tasks, GoldPolicy(), RolloutSpec(n=2, env_kwargs={"bamboogle": {"data_dir": DIR}},
                                                                 env_server=f"{env_server_url},{second}"))
        assert [t.reward for t in here] == [t.reward for t in there.trajectories]
        for bad in ("", " , ", "127.0.0.1:8011"):
            with pytest.raises(ValueError):
                server_urls(bad)
    finally:
        proc.kill()
        proc.wait(30)


def test_seed_draws_the_task_the_gymnasium_env_draws(env_server_url):
    entry = env_entry("bfcl")
    env = gym.make(entry.env_id, data_dir=DIR, **entry.split_options[0])
    with GenericEnvClient(base_url=env_server_url).sync() as client:
        for seed in (0, 7, 123):
            _, info = env.reset(seed=seed)
            first = client.reset(benchmark="bfcl", seed=seed).observation
            again = client.reset(benchmark="bfcl", seed=seed).observation
            assert first["task_id"] == again["task_id"] == info["task_id"]
            assert first["messages"] == again["messages"]


def test_inline_task_is_validated_as_a_generated_task(env_server_url):
    """A generation the spec admits is played (its gold answer earns 1); a rejected one is answered with the
    spec's rejection reason and leaves its session's episode as it was."""
    seed_task = first_task("bamboogle")
    generation = {"question": "Which river flows through the city where the Eiffel Tower stands?",
                  "answer": "Seine"}
    spec_view = get_benchmark("bamboogle", DIR).parse_generated(json.dumps(generation), "x", 0, seed_task)
    raw = Raw(env_server_url)
    try:
        answer = raw.ask({"type": "reset", "data": {"benchmark": "bamboogle", "task": generation,
                                                    "task_id": "mine-1", "parent_task_id": seed_task.id}})
        assert answer["type"] == "observation", answer
        assert answer["data"]["observation"]["task_id"] == "mine-1"
        assert answer["data"]["observation"]["prompt"] == env_entry("bamboogle").env_class.render_messages(
            spec_view)[-1]["content"]
        bad = raw.ask({"type": "reset", "data": {"benchmark": "bamboogle", "task": {"question": "Who?",
                                                                                     "answer": ""}}})
        assert bad["type"] == "error" and bad["data"]["message"].startswith("task rejected (")
        state = raw.ask({"type": "state"})
        assert state["data"]["task_id"] == "mine-1"  # unchanged by the rejected reset
        step = raw.ask({"type": "step", "data": {"text": "<answer>Seine</answer>"}})
        assert step["data"]["reward"] == 1.0 and step["data"]["done"] is True
    finally:
        raw.close()


def test_generated_pool_task_travels_and_a_different_one_is_refused(env_server_url):
    """A generated task of the trainer's pool is rebuilt on the server from its generation JSON with the same
    digest; a task whose record differs from the server's is refused instead of played."""
    seed_task = env_entry("twx").env_class.load_tasks(data_dir=DIR, split="train")[0]  # generated games: train fold
    spec = get_benchmark("twx", DIR)
    generated = spec.parse_generated(json.dumps(spec.as_generation(seed_task)), "gen-1-0-0", 1, seed_task)
    runner = RemoteEpisodes(env_server_url)
    try:
        (_, info), = runner.open([(0, generated, {"data_dir": DIR})])
        assert info["task_id"] == "gen-1-0-0"
        changed = type(seed_task)(**{**seed_task.to_dict(), "prompt": seed_task.prompt + " (changed)"})
        with pytest.raises(RuntimeError, match="task_sha256"):
            runner.open([(1, changed, None)])
    finally:
        runner.shutdown()
    assert task_sha256(generated.to_dict()) != task_sha256(changed.to_dict())


def test_structured_calls_and_mcp_tools(env_server_url):
    """BFCL's gold calls as structured ``tool_calls`` earn 1; over MCP a session lists the task's tools and a
    ``tools/call`` is one step; a text-only env refuses tool calls with the reason."""
    task = first_task("bfcl")
    cls = env_entry("bfcl").env_class
    calls = [c.to_json() for c in cls.gold_action(task)]
    raw = Raw(env_server_url)
    try:
        raw.ask({"type": "reset", "data": reset_arguments(task)})
        step = raw.ask({"type": "step", "data": {"tool_calls": calls}})
        assert step["data"]["reward"] == 1.0, step
        raw.ask({"type": "reset", "data": reset_arguments(task)})
        listed = raw.ask({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}})
        names = [t["name"] for t in listed["data"]["result"]["tools"]]
        assert names == [t["name"] for t in task.tools]
        if len(calls) == 1:
            called = raw.ask({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                      "params": {"name": calls[0]["name"],
                                                                 "arguments": calls[0]["arguments"]}}})
            assert called["data"]["result"]["structuredContent"]["reward"] == 1.0
        raw.ask({"type": "reset", "data": {"benchmark": "bamboogle", "seed": 1}})
        refused = raw.ask({"type": "step", "data": {"tool_calls": [{"name": "f", "arguments": {}}]}})
        assert refused["data"]["reward"] == 0.0
        assert "takes model text" in refused["data"]["observation"]["info"]["error"]
    finally:
        raw.close()


def test_bad_input_is_answered_and_the_session_goes_on(env_server_url):
    raw, other = Raw(env_server_url), Raw(env_server_url)
    try:
        assert other.ask({"type": "reset", "data": {"benchmark": "bamboogle", "seed": 2}})["type"] == "observation"
        step_first = raw.ask({"type": "step", "data": {"text": "x"}})
        assert step_first["type"] == "error" and "reset before step" in step_first["data"]["message"]
        cases = {
            "{not json": "INVALID_JSON",
            "[1, 2]": "INVALID_JSON",
            '{"type": "reset", "data": {"benchmark": "bamboogle", "seed": ' + "9" * 5000 + "}}": "INVALID_JSON",
            json.dumps({"type": "reset", "data": {"benchmark": "bamboogle", "pad": "x" * (1 << 21)}}):
                "MESSAGE_TOO_LARGE",
            json.dumps({"type": "dance"}): "UNKNOWN_TYPE",
            '{"type": "step", "data": {"text": "a", "x": ' + "[" * 300 + "]" * 300 + "}}": "INVALID_JSON",
            "[" * 100_000: "INVALID_JSON",
            b'{"type": "state"}': "INVALID_JSON",  # a binary frame
            json.dumps({"type": "reset", "data": {"benchmark": "nope"}}): "EXECUTION_ERROR",
            json.dumps({"type": "reset", "data": {"benchmark": "bamboogle", "task_id": "nope"}}): "EXECUTION_ERROR",
            json.dumps({"type": "reset", "data": {"benchmark": "bamboogle", "sed": 1}}): "EXECUTION_ERROR",
        }
        for message, code in cases.items():
            answer = raw.ask(message)
            assert answer["type"] == "error" and answer["data"]["code"] == code, (message[:60], answer)
        assert raw.ask({"type": "reset", "data": {"benchmark": "bamboogle", "seed": 2}})["type"] == "observation"
        for action in ({"foo": 1}, {"text": 5}, {"text": "a", "tool_calls": []}):
            answer = raw.ask({"type": "step", "data": action})
            assert answer["type"] == "error" and answer["data"]["code"] == "VALIDATION_ERROR", answer
        for field, value in (("task_id", ["x"]), ("reading", ["official"]), ("seed", "1"), ("split", 3),
                             ("options", [1]), ("episode_id", {}), ("task_sha256", 1), ("benchmark", ["bamboogle"])):
            answer = raw.ask({"type": "reset", "data": {"benchmark": "bamboogle", field: value}})
            assert answer["type"] == "error" and f"reset argument {field!r} must be" in answer["data"]["message"], \
                (field, answer)
        assert raw.ask({"type": "reset", "data": {"benchmark": "bamboogle", "seed": 2}})["type"] == "observation"
        lone = raw.ask('{"type": "step", "data": {"text": "<answer>\\ud800</answer>"}}')  # no character
        assert lone["type"] == "observation" and lone["data"]["reward"] == 0.0
        assert lone["data"]["observation"]["info"]["answer"] == "\ufffd"
        assert raw.ask({"type": "reset", "data": {"benchmark": "bamboogle", "seed": 2}})["type"] == "observation"
        pair = raw.ask('{"type": "step", "data": {"text": "<answer>\\ud83d\\ude00</answer>"}}')  # one emoji
        assert pair["data"]["observation"]["info"]["answer"] == "\U0001F600"
        assert raw.ask({"type": "reset", "data": {"benchmark": "bamboogle", "seed": 2}})["type"] == "observation"
        payload = "__import__('os').system('touch /tmp/genenv-pwned') " + "9" * 5000
        done = raw.ask({"type": "step", "data": {"text": payload}})
        assert done["data"]["reward"] == 0.0 and done["data"]["done"] is True
        after = raw.ask({"type": "step", "data": {"text": "x"}})
        assert after["type"] == "error" and "episode is over" in after["data"]["message"]
        assert other.ask({"type": "step", "data": {"text": "<answer>x</answer>"}})["type"] == "observation"
    finally:
        raw.close()
        other.close()
    assert not os.path.exists("/tmp/genenv-pwned")


def test_capacity_and_token():
    """Over ``--max-sessions`` a connection gets OpenEnv's CAPACITY_REACHED; with a token every request without it
    is refused; another interface than loopback without a token does not start."""
    token = "s3cret-for-test"
    proc, url = spawn("--max-sessions", "1", "--benchmarks", "bamboogle",
                                 env={"GENENV_SERVE_TOKEN": token})
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url + "/health", timeout=10)
        assert refused.value.code == 401
        with pytest.raises(Exception):
            Raw(url).ask({"type": "state"})
        first = Raw(url, headers={"Authorization": f"Bearer {token}"})
        assert first.ask({"type": "reset", "data": {"benchmark": "bamboogle", "seed": 0}})["type"] == "observation"
        second = Raw(url, headers={"Authorization": f"Bearer {token}"})
        answer = json.loads(second.ws.recv(timeout=30))
        assert answer["type"] == "error" and answer["data"]["code"] == "CAPACITY_REACHED"
        import socket
        import time

        first.ws.socket.shutdown(socket.SHUT_RDWR)  # a client that drops mid-episode, without a close frame
        deadline, opened = time.time() + 10, None
        while opened is None and time.time() < deadline:
            third = Raw(url, headers={"Authorization": f"Bearer {token}"})
            answer = third.ask({"type": "reset", "data": {"benchmark": "bamboogle", "seed": 0}})
            opened = answer if answer["type"] == "observation" else time.sleep(0.2)
        assert opened is not None, "the dropped client's session was not freed"
        client = SessionClient(url, token=token).sync()  # over capacity: our client names the server's error
        with pytest.raises((ConnectionError, RuntimeError), match="CAPACITY_REACHED"):
            client.connect()
            client.reset(benchmark="bamboogle", seed=0)
        third.close()
        client = SessionClient(url, token=token).sync()
        client.connect()
        client.reset(benchmark="bamboogle", seed=0)
        with pytest.raises(RuntimeError, match=r"VALIDATION_ERROR.*text: Input should be a valid string"):
            client.step({"text": 5})
        proc.kill()  # the server dies: the client's next call fails at once, naming the session
        proc.wait(30)
        with pytest.raises(ConnectionError, match="was closed"):
            client.step({"text": "x"})
    finally:
        proc.kill()
        proc.wait(30)
    out = subprocess.run([sys.executable, "-m", "genenv.runtime.serve.app", "--host", "0.0.0.0"],
                         capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "GENENV_SERVE_TOKEN"})
    assert out.returncode != 0 and "GENENV_SERVE_TOKEN" in out.stderr


def test_idle_sessions_are_closed_and_free_their_slots():
    """A session that sends nothing for ``--session-timeout`` seconds is closed with code 4000 and a reason that
    says why; its slot goes to a new client. A session that keeps talking stays open."""
    import time

    from websockets.exceptions import ConnectionClosed

    proc, url = spawn("--max-sessions", "2", "--benchmarks", "bamboogle", "--session-timeout", "2")
    try:
        idle, busy = Raw(url), Raw(url)
        reset = {"type": "reset", "data": {"benchmark": "bamboogle", "seed": 0}}
        assert idle.ask(reset)["type"] == "observation"
        assert busy.ask(reset)["type"] == "observation"
        refused = Raw(url)
        assert json.loads(refused.ws.recv(timeout=30))["data"]["code"] == "CAPACITY_REACHED"
        t0 = time.time()
        while time.time() - t0 < 3.5:  # the busy one talks every half second
            assert busy.ask({"type": "state"})["type"] == "state"
            time.sleep(0.5)
        with pytest.raises(ConnectionClosed) as closed:
            idle.ws.recv(timeout=10)
        assert closed.value.rcvd.code == 4000 and "idle for 2 s" in closed.value.rcvd.reason
        newcomer = Raw(url)
        assert newcomer.ask(reset)["type"] == "observation"
        assert busy.ask({"type": "step", "data": {"text": "<answer>x</answer>"}})["type"] == "observation"
        newcomer.close()
        busy.close()
    finally:
        proc.kill()
        proc.wait(30)


def test_alfworld_sessions_run_in_worker_processes_and_a_dead_worker_fails_only_its_session():
    """ALFWorld sessions play on the server's worker processes (the same episode as in-process); a worker killed
    under a session answers its next step with an error that says so, the session plays again after a reset, and
    the server replaces the worker."""
    import signal
    import time

    task = first_task("alfworld")
    env = make_text_env([task], {"data_dir": DIR})
    first = env.reset(options={"task_id": task.id})[0]
    gold = env_entry("alfworld").env_class.gold_text(task, 0)
    expected = env.step(gold)[0]
    env.close()
    proc, url = spawn("--benchmarks", "alfworld", "--workers", "1")
    try:
        raw = Raw(url)
        reset = {"type": "reset", "data": reset_arguments(task)}
        assert raw.ask(reset)["data"]["observation"]["prompt"] == first
        assert raw.ask({"type": "step", "data": {"text": gold}})["data"]["observation"]["prompt"] == expected
        import glob

        children = [int(c) for f in glob.glob(f"/proc/{proc.pid}/task/*/children") for c in open(f).read().split()]
        children = [c for c in children if b"spawn_main" in open(f"/proc/{c}/cmdline", "rb").read()]
        assert len(children) == 1
        os.kill(children[0], signal.SIGKILL)
        time.sleep(0.5)
        lost = raw.ask({"type": "step", "data": {"text": gold}})
        assert lost["type"] == "error" and "died" in lost["data"]["message"], lost
        after = raw.ask({"type": "step", "data": {"text": gold}})
        assert after["type"] == "error" and "reset before step" in after["data"]["message"]
        assert raw.ask(reset)["data"]["observation"]["prompt"] == first
        raw.close()
    finally:
        proc.kill()
        proc.wait(30)


def test_training_over_the_server_gives_the_same_rewards(tmp_path, tiny_model_dir, env_server_url):
    """One co-evolution iteration (tiny random model, soft-similarity rewards) with ``env_server`` set plays the
    same episodes and gets the same rewards as in-process."""
    from genenv.trainer.cli import compose_config
    from genenv.trainer.loop import CoEvolutionTrainer

    def run(name: str, *extra: str) -> tuple[dict, list[float]]:
        cfg = compose_config([f"run_dir={tmp_path}/{name}", "benchmark=bamboogle", "iterations=1", "seed=3",
                              "tensorboard=false", "threads=1", f"agent.policy.model={tiny_model_dir}",
                              f"env_policy.policy.model={tiny_model_dir}", "generation.prompts_per_iteration=1",
                              "generation.generations_per_prompt=2", "agent.batch_tasks=3", "agent.n=2",
                              "agent.max_new_tokens=8", "agent.temperature=1.0",
                              "reward.free_text_metric=fuzz", *extra])
        trainer = CoEvolutionTrainer(cfg)
        rewards, rollout = [], trainer.rollout

        def spy(*args, **kwargs):
            out = rollout(*args, **kwargs)
            rewards.extend(t.reward for t in out.trajectories)
            return out

        trainer.rollout = spy
        return trainer.run()[0], rewards

    here, here_rewards = run("here")
    there, there_rewards = run("there", f"env_server={env_server_url}")
    assert len(here_rewards) == 6 and any(r > 0 for r in here_rewards)
    assert there_rewards == here_rewards
    assert there["agent/reward_mean"] == here["agent/reward_mean"]


def verifiers_python() -> str:
    """The verifiers client venv's interpreter (``.ci/install`` builds it; ``GENENV_CLIENT_VENVS`` moves it)."""
    from pathlib import Path

    root = Path(os.environ.get("GENENV_CLIENT_VENVS", Path.home() / ".cache/genenv/venvs"))
    python = root / "verifiers-0.4.0" / "bin" / "python"
    assert python.exists(), f"{python} missing: .ci/install builds the verifiers client venv"
    return str(python)


def test_verifiers_openenv_taskset_scores_episodes(env_server_url):
    """verifiers' ``OpenEnvTaskset`` (its own venv: its pins conflict with ours) reads the server's schema, parses
    scripted replies with its own ``parse_lenient`` and scores episodes with its own ``OpenEnvEnv.run``: the gold
    answer 1, a wrong one 0; BFCL's gold calls as structured ``tool_calls`` 1."""
    from pathlib import Path

    script = str(Path(__file__).resolve().parents[1] / "tests" / "clients" / "client_verifiers.py")
    bamboogle, bfcl = first_task("bamboogle"), first_task("bfcl")
    calls = [c.to_json() for c in env_entry("bfcl").env_class.gold_action(bfcl)]
    gold = env_entry("bamboogle").env_class.gold_text(bamboogle)
    cases = [(bamboogle, {"text": gold}, 1.0), (bamboogle, {"text": "<answer>nobody</answer>"}, 0.0),
             (bfcl, {"tool_calls": calls}, 1.0)]
    for task, reply, reward in cases:
        reset = {k: v for k, v in reset_arguments(task).items() if k != "task_sha256"}
        out = subprocess.run([verifiers_python(), script, "--base-url", env_server_url, "--reset", json.dumps(reset),
                              "--reply", json.dumps(reply)], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr[-3000:]
        result = json.loads(out.stdout.strip().splitlines()[-1])
        assert result["action_schema_title"] == "SessionAction" and result["parsed"] == [reply]
        assert result["reward"] == reward, (task.id, reply, result)


def test_per_message_compression_is_off_unless_asked_for(env_server_url):
    """A client that offers WebSocket per-message deflate (``websockets`` does by default) gets plain frames from a
    default ``genenv-serve`` and compressed ones under ``--ws-compression``; both play a Bamboogle episode."""
    proc, url = spawn("--benchmarks", "bamboogle", "--ws-compression")
    try:
        for base, compressed in ((env_server_url, False), (url, True)):
            with connect(base.replace("http", "ws") + "/ws", proxy=None) as ws:
                extensions = ws.response.headers.get("Sec-WebSocket-Extensions") or ""
                assert ("permessage-deflate" in extensions) is compressed
                task = first_task("bamboogle")
                ws.send(json.dumps({"type": "reset", "data": reset_arguments(task)}))
                assert json.loads(ws.recv(timeout=30))["type"] == "observation"
                ws.send(json.dumps({"type": "step", "data": {"text": env_entry("bamboogle").env_class.gold_text(task)}}))
                assert json.loads(ws.recv(timeout=30))["data"]["reward"] == 1.0
    finally:
        proc.terminate()
        proc.wait(30)
