"""The veRL agent-loop adapter: instantiated as veRL does, batches concurrent episodes, masks env tokens.

(Gold episodes of every registered env are played in ``test_conformance.py``.)"""
from __future__ import annotations

from typing import Any

import pytest
from verl.workers.rollout.replica import TokenOutput

from genenv.benchmarks.bamboogle.env import BamboogleEnv, load_bamboogle_tasks
from genenv.benchmarks.bfcl.env import load_bfcl_tasks
from genenv.envs.registry import ENVS, EnvEntry
from genenv.envs.task import Task
from genenv.trainer.rollout.agent_loop import LocalGenerateClient, make_agent_loop, rollout_agent_loop
from genenv.trainer.rollout.policies import TransformersPolicy


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
    monkeypatch.setitem(ENVS, "two_guess", EnvEntry("two_guess", "genenv/TwoGuess-v0",
                                                    f"{__name__}:TwoGuessEnv", ({},)))
    task = Task(id="q1", benchmark="two_guess", split="test", prompt="Who wrote Hamlet?", gold="William Shakespeare",
                action_kind="free_text")
    client = ScriptedClient(smollm2_policy.tokenizer,
                            {task.prompt: ["Answer: Marlowe", "Answer: William Shakespeare"]})
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
