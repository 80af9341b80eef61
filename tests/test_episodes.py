"""The one episode loop: training and evaluation show the agent the same token streams in every multi-step env, the
prompt window is one wrapper, update sequences are packed or per turn, and the response budget stops an episode
before it overflows."""
from __future__ import annotations

from typing import Any

import pytest
from verl.workers.rollout.replica import TokenOutput

from genenv.envs import ENVS
from genenv.envs.wrappers import make_text_env
from genenv.trainer.engines.verl_ray.agent_loop import rollout_agent_loop
from genenv.runtime.episodes import BUDGET_EXHAUSTED, RolloutSpec, Trajectory, Turn, play_episodes
from genenv.runtime.models import chat_prompt_ids
from genenv.runtime.policies import Generation, Prompt

from conftest import DATA_DIR
from test_conformance import ScriptedClient, sample_tasks

MULTI_STEP = sorted(n for n, e in ENVS.items() if e.env_class.multi_step)


class GoldTokenPolicy:
    """A local-style policy (chat template, token ids) that answers every turn with the task's gold text."""

    name = "gold-tokens"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def encode_prompt(self, messages: list[dict[str, str]]) -> list[int]:
        return chat_prompt_ids(self.tokenizer, messages)

    def generate(self, prompts: list[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        out = []
        for p in prompts:
            text = ENVS[p.task.benchmark].env_class.gold_text(p.task, p.turn)
            ids = (self.tokenizer.encode(text, add_special_tokens=False) + [2])[:p.max_new_tokens or max_new_tokens]
            out.append([Generation(self.tokenizer.decode(ids, skip_special_tokens=True), list(p.token_ids), ids)
                        for _ in range(n)])
        return out


class CappedClient(ScriptedClient):
    """The scripted server, honouring ``max_tokens`` as a real server does."""

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs: Any) -> TokenOutput:
        out = await super().generate(request_id, prompt_ids=prompt_ids, sampling_params=sampling_params)
        return TokenOutput(token_ids=out.token_ids[:sampling_params["max_tokens"]])


@pytest.fixture(scope="module")
def tokenizer(smollm2_dir):
    from transformers import AutoTokenizer

    from genenv.runtime.models import prepare_tokenizer

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    prepare_tokenizer(tok)
    return tok


def _streams(trajs: list[Trajectory]) -> list[list[tuple[list[int], list[int]]]]:
    return [[(t.prompt_ids, t.response_ids) for t in traj.turns] for traj in trajs]


@pytest.mark.parametrize("name", MULTI_STEP)
def test_training_and_evaluation_show_the_same_token_streams(name, tokenizer):
    """Evaluation and the local engine play through ``play_episodes``; the veRL agent loop plays the same
    ``Episode`` against a server: every turn's prompt tokens and response tokens must be equal."""
    tasks = sample_tasks(name, 2)
    cls = ENVS[name].env_class
    kwargs = {name: {"data_dir": DATA_DIR}}
    evaluation = play_episodes(tasks, GoldTokenPolicy(tokenizer),
                               RolloutSpec(env_kwargs=kwargs, max_new_tokens=1024)).trajectories
    client = CappedClient(tokenizer, {t.prompt: [cls.gold_text(t, k) for k in range(len(cls.gold_action(t)))]
                                      for t in tasks})
    training = rollout_agent_loop(tasks, GoldTokenPolicy(tokenizer), server_manager=client, env_kwargs=kwargs,
                                  max_new_tokens=1024, response_length=1 << 20)
    assert [t.reward for t in evaluation] == [t.reward for t in training] == [1.0] * len(tasks)
    assert _streams(training) == _streams(evaluation)
    assert all(len(t.turns) == len(cls.gold_action(t.task)) > 1 for t in evaluation)
    for traj in evaluation:  # each turn's prompt is the PromptWindow's messages of that turn
        for turn in traj.turns:
            assert turn.prompt_ids == chat_prompt_ids(tokenizer, turn.messages)


def test_prompt_window_is_one_wrapper_and_bounds_alfworld_prompts(tokenizer):
    tasks = [t for t in sample_tasks("alfworld", 4) if len(t.gold) >= 7][:1] or sample_tasks("alfworld", 1)
    (traj,) = play_episodes(tasks, GoldTokenPolicy(tokenizer),
                            RolloutSpec(env_kwargs={"alfworld": {"data_dir": DATA_DIR}})).trajectories
    keep = ENVS["alfworld"].env_class.prompt_window
    head = len(make_text_env(tasks).reset()[1]["messages"])
    for k, turn in enumerate(traj.turns):  # the rendered prompt plus at most `keep` exchanges
        assert len(turn.messages) == head + 2 * min(k, keep)
    if len(traj.turns) > keep + 1:  # history was dropped: one update sequence per turn
        assert len(traj.segments()) == len(traj.turns)


def test_segments_pack_an_append_only_conversation():
    turns = [Turn([], "a", 0.0, [1, 2, 3], [10, 11, 2]), Turn([], "b", 1.0, [1, 2, 3, 10, 11, 2, 7, 8], [12, 2])]
    traj = Trajectory(None, 0, [], "a\nb", 1.0, True, {}, turns)
    (seg,) = traj.segments()
    assert seg.prompt_ids == [1, 2, 3] and seg.response_ids == [10, 11, 2, 7, 8, 12, 2]
    assert seg.response_mask == [1, 1, 1, 0, 0, 1, 1]
    windowed = Trajectory(None, 0, [], "", 1.0, True, {}, [turns[0], Turn([], "b", 1.0, [1, 2, 9], [12, 2])])
    assert [(s.prompt_ids, s.response_ids, s.response_mask) for s in windowed.segments()] == [
        ([1, 2, 3], [10, 11, 2], [1, 1, 1]), ([1, 2, 9], [12, 2], [1, 1])]


def test_a_broken_chain_packs_the_runs_on_either_side_of_the_break():
    """Turns 0-1 extend each other, turn 2's prompt re-encodes turn 1's response (the chain breaks), turn 3 extends
    turn 2: two sequences, each with its own prompt, environment tokens masked 0 and the sampler's log-probs on
    the policy's tokens only; no turn's tokens trained twice."""
    t0 = Turn([], "a", 0.0, [1, 2], [10, 2], response_logprobs=[-0.1, -0.2])
    t1 = Turn([], "b", 0.0, [1, 2, 10, 2, 7], [11, 2], response_logprobs=[-0.3, -0.4])
    t2 = Turn([], "c", 0.0, [1, 2, 10, 2, 7, 99, 2, 8], [12, 2], response_logprobs=[-0.5, -0.6])
    t3 = Turn([], "d", 1.0, [1, 2, 10, 2, 7, 99, 2, 8, 12, 2, 6, 6], [13], response_logprobs=[-0.7])
    traj = Trajectory(None, 0, [], "", 1.0, True, {}, [t0, t1, t2, t3])
    first, second = traj.segments()
    assert (first.prompt_ids, first.response_ids, first.response_mask) == ([1, 2], [10, 2, 7, 11, 2], [1, 1, 0, 1, 1])
    assert first.response_logprobs == [-0.1, -0.2, 0.0, -0.3, -0.4]
    assert second.prompt_ids == t2.prompt_ids and second.response_ids == [12, 2, 6, 6, 13]
    assert second.response_mask == [1, 1, 0, 0, 1] and second.response_logprobs == [-0.5, -0.6, 0.0, 0.0, -0.7]
    trained = sum(sum(s.response_mask) for s in traj.segments())
    assert trained == sum(len(t.response_ids) for t in traj.turns)


def test_response_budget_stops_before_overflow_and_rewards_only_trained_tokens(tokenizer):
    tasks = sample_tasks("twx", 1)
    kwargs: dict[str, Any] = {"twx": {"data_dir": DATA_DIR}}
    full = play_episodes(tasks, GoldTokenPolicy(tokenizer), RolloutSpec(env_kwargs=kwargs)).trajectories[0]
    assert full.success and len(full.turns) >= 2
    first = len(full.turns[0].prompt_ids)
    budget = len(full.turns[1].prompt_ids) - first + 1  # room for one token of the second turn
    cut = play_episodes(tasks, GoldTokenPolicy(tokenizer),
                        RolloutSpec(env_kwargs=kwargs, max_response_tokens=budget)).trajectories[0]
    (seg,) = cut.segments()
    assert len(seg.response_ids) <= budget and len(cut.turns[1].response_ids) == 1
    assert cut.turns[1].text == tokenizer.decode(cut.turns[1].response_ids, skip_special_tokens=True)
    assert not cut.success and cut.reward == sum(t.reward for t in cut.turns)
    tight = play_episodes(tasks, GoldTokenPolicy(tokenizer),
                          RolloutSpec(env_kwargs=kwargs,
                                      max_response_tokens=len(full.turns[0].response_ids))).trajectories[0]
    assert len(tight.turns) == 1 and tight.info["error"] == BUDGET_EXHAUSTED and tight.info["truncated_by_budget"]
    client = CappedClient(tokenizer, {tasks[0].prompt: [ENVS["twx"].env_class.gold_text(tasks[0], k)
                                                        for k in range(len(full.turns))]})
    veRL = rollout_agent_loop(tasks, GoldTokenPolicy(tokenizer), server_manager=client, env_kwargs=kwargs,
                              response_length=budget)[0]
    assert _streams([veRL]) == _streams([cut])  # veRL's agent loop caps max_tokens the same way


def test_samples_of_a_prompt_share_one_prefill_and_are_the_same_samples(tiny_model_dir):
    """``TransformersPolicy.sample``: one prefill whose KV cache is repeated n times draws, seed for seed, the
    tokens that transformers' ``num_return_sequences`` (a prefill per copy) draws."""
    import torch

    from genenv.runtime.policies import TransformersPolicy

    policy = TransformersPolicy(str(tiny_model_dir), dtype="float32")
    prompts = [Prompt([{"role": "user", "content": "Name a colour."}]),
               Prompt([{"role": "user", "content": "Write the first five prime numbers, separated by commas."}])]
    outs = {}
    for shared in (True, False):
        policy.share_prefix = shared
        torch.manual_seed(3)
        outs[shared] = policy.generate(prompts, n=3, temperature=1.0, max_new_tokens=12)
    ids = {shared: [[g.response_ids for g in gens] for gens in out] for shared, out in outs.items()}
    assert ids[True] == ids[False]
    assert len({tuple(r) for r in ids[True][0]}) > 1  # the three samples of a prompt differ: they were sampled


def test_every_episode_runner_is_one_interface_chosen_in_one_place():
    """``LocalEpisodes``, ``ProcessEpisodes`` and ``RemoteEpisodes`` implement the one ``EpisodeRunner`` protocol,
    and ``episode_runner`` (the only constructor call of a runner outside the runners' own modules, besides the
    session server's worker pool for envs that are not thread-safe) picks one."""
    import ast
    import inspect
    from pathlib import Path

    from genenv.envs.workers import EpisodeRunner, LocalEpisodes, ProcessEpisodes
    from genenv.runtime.episodes import episode_runner
    from genenv.runtime.serve.client import RemoteEpisodes

    for cls in (LocalEpisodes, ProcessEpisodes, RemoteEpisodes):
        for method in ("open", "step", "close", "shutdown"):
            ours = inspect.signature(getattr(cls, method)).parameters
            assert list(ours) == list(inspect.signature(getattr(EpisodeRunner, method)).parameters), (cls, method)
    local = episode_runner()
    assert type(local) is LocalEpisodes and isinstance(local, EpisodeRunner)
    remote = episode_runner("http://127.0.0.1:9", workers=4)  # a server wins over workers; nothing connects yet
    assert type(remote) is RemoteEpisodes and isinstance(remote, EpisodeRunner)
    remote.shutdown()
    root = Path(__file__).resolve().parents[1]
    made = []
    for path in root.glob("*/**/*.py"):
        if ".venv" in path.parts or path.parts[len(root.parts)] in ("tests", "results"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in (
                    "LocalEpisodes", "ProcessEpisodes", "RemoteEpisodes"):
                made.append(str(path.relative_to(root)))
    # a worker's own LocalEpisodes, the chooser, the session server's SessionWorkers
    assert sorted(set(made)) == ["envs/workers.py", "runtime/episodes.py", "runtime/serve/environment.py"]
