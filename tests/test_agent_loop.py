"""The veRL agent-loop adapter: instantiated as veRL does, batches concurrent episodes, masks env tokens, keeps
each turn within the episode's response budget (even against a server that overshoots ``max_tokens``), keeps one
request id per episode (veRL's sticky routing), steps envs off the event loop and keeps the server's log-probs.

(Gold episodes of every registered env are played in ``test_conformance.py``.)"""
from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from verl.workers.rollout.replica import TokenOutput

from genenv.benchmarks.bamboogle.env import BamboogleEnv, load_bamboogle_tasks
from genenv.benchmarks.bfcl.env import load_bfcl_tasks
from genenv.envs.registry import ENVS, register_env
from genenv.envs.task import Task
from genenv.envs.verl_rows import task_extra_info
from genenv.trainer.engines.verl_ray.agent_loop import (LocalGenerateClient, agent_loop_config, make_agent_loop,
                                               rollout_agent_loop)
from genenv.runtime.policies import TransformersPolicy


class ScriptedClient:
    """A generate client that answers each episode with scripted texts, chosen by the task's prompt."""

    def __init__(self, tokenizer, scripts: dict[str, list[str]]):
        self.tok, self.scripts, self.calls = tokenizer, {k: list(v) for k, v in scripts.items()}, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_: Any) -> TokenOutput:
        text = self.tok.decode(prompt_ids)
        key = max((k for k in self.scripts if k in text), key=len)
        self.calls.append(len(prompt_ids))
        reply = self.scripts[key].pop(0)
        return TokenOutput(token_ids=self.tok.encode(reply, add_special_tokens=False) + [2])


@pytest.fixture(scope="module")
def smollm2_policy(smollm2_dir):
    return TransformersPolicy(str(smollm2_dir), batch_size=8)


def test_transformers_client_batches_concurrent_episodes(tiny_model_dir):
    policy = TransformersPolicy(str(tiny_model_dir), batch_size=8)
    tasks = load_bamboogle_tasks()[:2] + load_bfcl_tasks("simple_python")[:1]
    trajs = rollout_agent_loop(tasks, policy, n=2, temperature=1.0, max_new_tokens=8)
    assert len(trajs) == 6 and [t.task.id for t in trajs][::2] == [t.id for t in tasks]
    assert all(0.0 <= t.reward <= 1.0 and t.turns and all(0 < len(u.response_ids) <= 8 for u in t.turns)
               for t in trajs)
    assert all(t.info["error"] or t.reward >= 0 for t in trajs)


def register_test_env(monkeypatch, name: str, env_id: str, cls: str) -> None:
    """Register a test env as a benchmark does (its Gymnasium id included: episodes open envs with
    ``gymnasium.make``), in a copy of the env table that the test's end discards."""
    monkeypatch.setattr("genenv.envs.registry.ENVS", dict(ENVS))
    register_env(name, env_id, f"{__name__}:{cls}")


class TwoGuessEnv(BamboogleEnv):
    """A multi-step test env: a wrong first answer gets a hint and a second try."""

    benchmark = "two_guess"

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self._tries = getattr(self, "_tries", 0) + 1
        if reward < 1.0 and self._tries < 2:
            return "Wrong, try again.", 0.0, False, False, info
        return obs, reward, True, False, info

    def reset(self, *, seed=None, options=None):
        self._tries = 0
        return super().reset(seed=seed, options=options)


def test_multi_turn_episode_masks_environment_tokens(smollm2_policy, monkeypatch):
    register_test_env(monkeypatch, "two_guess", "genenv/TwoGuess-v0", "TwoGuessEnv")
    task = Task(id="q1", benchmark="two_guess", split="test", prompt="Who wrote Hamlet?", gold="William Shakespeare",
                action_kind="free_text")
    client = ScriptedClient(smollm2_policy.tokenizer,
                            {task.prompt: ["<answer>Marlowe</answer>", "<answer>William Shakespeare</answer>"]})
    traj = rollout_agent_loop([task], smollm2_policy, n=1, server_manager=client,
                              env_kwargs={"two_guess": {"metric": "exact_match"}})[0]
    (seg,) = traj.segments()  # the conversation grew append-only: one packed sequence
    mask = seg.response_mask
    assert traj.reward == 1.0 and traj.success and len(client.calls) == 2
    assert 0 in mask and mask[0] == 1 and mask[-1] == 1  # policy, then env tokens (0), then policy again
    hint = smollm2_policy.tokenizer.decode([tok for tok, m in zip(seg.response_ids, mask) if m == 0])
    assert "Wrong, try again." in hint
    assert client.calls[1] == len(seg.prompt_ids) + mask.index(1, mask.index(0))


def test_agent_loop_is_instantiated_through_verls_registry(smollm2_policy):
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

    assert _agent_loop_registry["genenv_gym"]["_target_"].endswith("GymAgentLoop")
    loop = make_agent_loop(smollm2_policy.tokenizer, LocalGenerateClient(smollm2_policy))
    assert loop.response_length == 1024 and loop.max_new_tokens is None


# ------------------------------------------------------------------ budget, request ids, env steps, log-probs
HAMLET = Task(id="q1", benchmark="two_guess", split="test", prompt="Who wrote Hamlet?", gold="William Shakespeare",
              action_kind="free_text")


@pytest.fixture(scope="module")
def tokenizer(smollm2_dir):
    """SmolLM2's tokenizer as the agent loop gets it (pad token, stop tokens)."""
    from transformers import AutoTokenizer

    from genenv.runtime.models import prepare_tokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    prepare_tokenizer(tok)
    return tok


@pytest.fixture
def two_guess(monkeypatch):
    register_test_env(monkeypatch, "two_guess", "genenv/TwoGuess-v0", "TwoGuessEnv")


def lead_then_gold(tokenizer, lead: int) -> list[int]:
    """``lead`` filler tokens, then the gold answer to `HAMLET` as the env parses it, then the stop token."""
    gold = BamboogleEnv.gold_text(HAMLET, 0)
    return (tokenizer.encode(" and" * lead, add_special_tokens=False)
            + tokenizer.encode("\n" + gold, add_special_tokens=False) + tokenizer.stop_token_ids[:1])


class OverlongServer:
    """A server that ignores ``max_tokens``: it always returns ``reply`` (with log-probs ``-(i+1)/100``) and
    records every request."""

    def __init__(self, reply: list[int]):
        self.reply, self.calls = reply, []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_: Any) -> TokenOutput:
        self.calls.append((request_id, list(prompt_ids), dict(sampling_params)))
        return TokenOutput(token_ids=list(self.reply), log_probs=[-(i + 1) / 100 for i in range(len(self.reply))])


def play(tokenizer, server, response_length: int, max_new_tokens: int, task: Task = HAMLET, **sampling):
    loop = make_agent_loop(tokenizer, server, agent_loop_config(
        response_length=response_length, max_new_tokens=max_new_tokens,
        env_kwargs={"two_guess": {"metric": "exact_match"}}))
    return asyncio.run(loop.run({"temperature": 1.0, **sampling}, extra_info=task_extra_info(task)))


def test_overlong_server_replies_are_cut_to_the_turn_budget(tokenizer, two_guess):
    """Every turn asks for at most the budget left, a longer reply is cut to it before the env reads it: the
    reward is the reward of the trained tokens, and the episode never exceeds ``response_length``."""
    reply = lead_then_gold(tokenizer, 60)
    full = play(tokenizer, OverlongServer(reply), response_length=400, max_new_tokens=200)
    assert full.reward_score == 1.0  # read whole, the reply earns the reward (at its end, past any cut below)

    budget, per_turn = 60, 30
    server = OverlongServer(reply)
    out = play(tokenizer, server, response_length=budget, max_new_tokens=per_turn, logprobs=True)
    turns = out.extra_fields["turns"]
    first = len(server.calls[0][1])
    assert len(server.calls) == len(turns) == 2
    for (_, prompt_ids, params), turn in zip(server.calls, turns):
        left = budget - (len(prompt_ids) - first)
        assert params["max_tokens"] == min(per_turn, left) and len(turn["response_ids"]) == params["max_tokens"]
        assert turn["response_ids"] == reply[:params["max_tokens"]]
        assert turn["text"] == tokenizer.decode(turn["response_ids"], skip_special_tokens=True)
    assert server.calls[1][2]["max_tokens"] < per_turn  # the last turn was capped by the budget left
    assert out.reward_score == 0.0 and sum(t["reward"] for t in turns) == 0.0  # the answer was never trained on
    assert len(out.response_ids) == len(out.response_mask) == budget
    # the server's log-probs of the kept tokens, 0.0 on the environment's tokens
    assert len(out.response_logprobs) == len(out.response_ids)
    kept = [lp for lp, m in zip(out.response_logprobs, out.response_mask) if m == 1]
    expected = [-(i + 1) / 100 for t in turns for i in range(len(t["response_ids"]))]
    assert kept == pytest.approx(expected)
    assert all(lp == 0.0 for lp, m in zip(out.response_logprobs, out.response_mask) if m == 0)
    assert 0 in out.response_mask


class RoutedServer:
    """Requests routed by veRL's own ``GlobalRequestLoadBalancer`` (sticky sessions by request id, least loaded
    first) over four stand-in replicas; records ``(request_id, replica)`` per request. Every reply is wrong."""

    def __init__(self, tokenizer):
        from verl.workers.rollout.router import GlobalRequestLoadBalancer

        self.balancer = GlobalRequestLoadBalancer({f"replica{i}": f"replica{i}" for i in range(4)})
        self.reply = tokenizer.encode("Christopher Marlowe", add_special_tokens=False) + tokenizer.stop_token_ids[:1]
        self.routed: list[tuple[str, str]] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_: Any) -> TokenOutput:
        server_id, _ = self.balancer.acquire_server(request_id)
        try:
            await asyncio.sleep(0.01)  # in flight while the other episodes' requests are routed
            self.routed.append((request_id, server_id))
            return TokenOutput(token_ids=list(self.reply))
        finally:
            self.balancer.release_server(server_id)


def test_one_request_id_per_episode_keeps_it_on_one_replica(tokenizer, two_guess):
    server = RoutedServer(tokenizer)
    loop = make_agent_loop(tokenizer, server, agent_loop_config(max_new_tokens=16))

    async def episodes():
        return await asyncio.gather(*[loop.run({"temperature": 1.0}, extra_info=task_extra_info(HAMLET))
                                      for _ in range(4)])

    outs = asyncio.run(episodes())
    assert [len(o.extra_fields["turns"]) for o in outs] == [2, 2, 2, 2]
    by_id: dict[str, list[str]] = {}
    for request_id, replica in server.routed:
        by_id.setdefault(request_id, []).append(replica)
    assert len(by_id) == 4 and all(len(r) == 2 and len(set(r)) == 1 for r in by_id.values()), server.routed


STEP_STARTED, STEP_RELEASED = threading.Event(), threading.Event()
STEPS: list[tuple[int, bool]] = []


class LoopCheckEnv(BamboogleEnv):
    """Its step waits until a coroutine on the agent loop's event loop releases it (at most 10 s)."""

    benchmark = "loop_check"

    def step(self, action):
        STEP_STARTED.set()
        STEPS.append((threading.get_ident(), STEP_RELEASED.wait(timeout=10)))
        return super().step(action)


def test_env_steps_run_off_the_event_loop(tokenizer, monkeypatch):
    """While an env steps, the worker's event loop keeps serving other coroutines (other episodes' requests)."""
    register_test_env(monkeypatch, "loop_check", "genenv/LoopCheck-v0", "LoopCheckEnv")
    task = Task(id="q1", benchmark="loop_check", split="test", prompt="Who wrote Hamlet?", gold="William Shakespeare",
                action_kind="free_text")
    server = OverlongServer(lead_then_gold(tokenizer, 0))
    loop = make_agent_loop(tokenizer, server, agent_loop_config(max_new_tokens=64))
    STEP_STARTED.clear(), STEP_RELEASED.clear(), STEPS.clear()

    async def release_when_stepping():
        while not STEP_STARTED.is_set():
            await asyncio.sleep(0.005)
        STEP_RELEASED.set()

    async def main():
        out, _ = await asyncio.gather(loop.run({"temperature": 1.0}, extra_info=task_extra_info(task)),
                                      release_when_stepping())
        return out, threading.get_ident()

    out, loop_thread = asyncio.run(main())
    assert out.reward_score == 1.0
    assert len(STEPS) == 1 and STEPS[0][0] != loop_thread and STEPS[0][1], STEPS


def test_agent_loop_plays_on_a_session_server(smollm2_policy, env_server_url):
    """With ``genenv.env_server`` set, veRL's agent loop plays its episodes on ``genenv-serve``: a multi-step
    episode (TextWorldExpress, scripted replies) gets the same reward, turns and token masks as in-process."""
    from genenv.benchmarks.twx.env import TextWorldExpressEnv

    task = TextWorldExpressEnv.load_tasks(split="test")[0]
    gold = TextWorldExpressEnv.gold_action(task)
    script = ["look around"] + gold  # one turn that is not a gold command, then the gold sequence

    def play(**kw):
        client = ScriptedClient(smollm2_policy.tokenizer, {task.prompt: list(script)})
        return rollout_agent_loop([task], smollm2_policy, n=1, server_manager=client, **kw)[0]

    here, there = play(), play(env_server=env_server_url)
    assert here.reward == there.reward == 1.0 and len(there.turns) == len(script)
    assert [s.response_mask for s in here.segments()] == [s.response_mask for s in there.segments()]
    assert [s.response_ids for s in here.segments()] == [s.response_ids for s in there.segments()]
