"""The veRL agent loop over our Gymnasium environments, and a transformers-backed generate client for it.

`GymAgentLoop` is registered with veRL as `AGENT_LOOP_NAME` (``verl.experimental.agent_loop.register``)
and is instantiated the way veRL's ``AgentLoopWorker`` does it (``hydra.utils.instantiate`` of the registry entry
with ``trainer_config``, ``server_manager``, ``tokenizer``, ...). Each ``run`` plays one episode of the task named
in the row's ``extra_info.task_json`` (`genenv.envs.verl_rows`) through the same
`Episode` as evaluation and local training, so the prompt of every turn is
the same token stream: the `PromptWindow` messages encoded with the tokenizer's chat
template.

Budget: every turn's ``max_tokens`` is the response budget left (``rollout.response_length`` minus the tokens the
episode holds after its first prompt, `prompt`), as veRL's vLLM
server computes its default ``max_tokens`` from the budget left (``verl/workers/rollout/vllm_rollout/
vllm_async_server.py: generate``); a server reply longer than ``max_tokens`` is cut to it before the env sees the
text (the first ``k`` tokens of a sample are a sample with ``max_tokens=k``, as `TransformersPolicy` cuts
to a prompt's cap), so the env rewards exactly the tokens that are trained on, and the episode ends (truncated)
before it overflows. veRL's tool agent loop instead generates, then truncates the finished episode to
``response_length`` (``tool_agent_loop.py: run``), which can reward text that is not trained on.

Serving: one ``request_id`` serves the whole episode (veRL's ``GlobalRequestLoadBalancer`` keeps a request id on
one vLLM replica, ``verl/workers/rollout/router.py``: its prefix cache holds the conversation); env resets and
steps run off the worker's event loop, on one thread per process (`ENV_STEPS`: the engines are not
thread-safe, e.g. TextWorld's PDDL parser), so generation requests of other episodes go on while an env steps;
the server's log-probs (sent when veRL's ``AgentLoopWorker`` asks for them, ``rollout.calculate_log_probs``) are
kept per turn and returned as ``response_logprobs`` (0.0 on environment tokens), which veRL's worker turns into
the batch's ``rollout_log_probs``.

Output: veRL's `AgentLoopOutput` with the episode's first update sequence
(`segments`: the packed conversation, ``response_mask`` 0 on
environment tokens, its ``response_logprobs`` when every turn has them) and ``reward_score`` = the episode's
return; ``extra_fields["segments"]`` holds every update sequence (a new one wherever a prompt did not extend the
previous prompt and response, e.g. each turn once a prompt window rewrites the history), which the ``verl_ray``
engine trains on.

On a GPU cluster ``server_manager`` is veRL's vLLM client; here `LocalGenerateClient` stands in for it with
batched ``transformers.generate`` (concurrent requests of one event-loop tick form one batch).
"""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any, Sequence
from uuid import uuid4

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import (AgentLoopBase, AgentLoopMetrics, AgentLoopOutput,
                                                     DictConfigWrap, ToolListWrap, _agent_loop_registry, register)
from verl.workers.rollout.replica import TokenOutput

from genenv.envs.task import Task
from genenv.envs.verl_rows import task_extra_info
from genenv.runtime.episodes import Episode, Segment, Trajectory, Turn, episode_runner
from genenv.runtime.models import chat_prompt_ids
from genenv.runtime.policies import Generation

__all__ = [
    "AGENT_LOOP_NAME", "GymAgentLoop", "LocalGenerateClient", "agent_loop_config", "make_agent_loop",
    "rollout_agent_loop", "trajectory_of",
]

AGENT_LOOP_NAME = "genenv_gym"
"""The name our agent loop is registered under in veRL (``actor_rollout_ref.rollout.agent.default_agent_loop``)."""
ENV_STEPS = ThreadPoolExecutor(max_workers=1, thread_name_prefix="genenv-env")
"""Where the agent loop's env resets and steps run: one thread, off the event loop (see the module docstring)."""


async def _off_loop(fn, *args):
    """``fn(*args)`` on `ENV_STEPS`, awaited."""
    return await asyncio.get_running_loop().run_in_executor(ENV_STEPS, fn, *args)


@register(AGENT_LOOP_NAME)
class GymAgentLoop(AgentLoopBase):
    """Plays one episode of a genenv Gymnasium env per ``run`` call (see module docstring).

    Config: ``actor_rollout_ref.rollout.response_length`` (veRL's key: the episode's response budget) and
    ``genenv.{env_kwargs, max_new_tokens, env_server}``; ``max_new_tokens`` (tokens per turn) applies when the
    caller's sampling parameters carry no ``max_tokens`` (veRL's ``AgentLoopWorker`` passes none); ``env_server``:
    the URL of a ``genenv-serve`` server on which the episodes are played
    (`RemoteEpisodes`, the same rewards; ``None``: in this process).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.response_length = int(self.rollout_config.response_length)
        genenv_cfg = self.config.get("genenv", {}) or {}
        self.max_new_tokens = genenv_cfg.get("max_new_tokens")
        env_kwargs = genenv_cfg.get("env_kwargs") or {}
        self.env_kwargs = (OmegaConf.to_container(env_kwargs, resolve=True) if OmegaConf.is_config(env_kwargs)
                           else dict(env_kwargs))
        self.env_server = genenv_cfg.get("env_server") or None

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        """Play the episode of ``kwargs["extra_info"]["task_json"]``; returns veRL's `AgentLoopOutput`."""
        task = Task.from_json(kwargs["extra_info"]["task_json"])
        per_turn = int(sampling_params.get("max_tokens") or self.max_new_tokens or self.response_length)
        episode = Episode(task, 0, lambda m: chat_prompt_ids(self.tokenizer, m), per_turn, self.response_length)
        runner = episode_runner(self.env_server)
        request_id = uuid4().hex
        try:
            opened = await _off_loop(runner.open, [(0, task, self.env_kwargs.get(task.benchmark))])
            episode.opened(*opened[0])
            while not episode.done:
                prompt = episode.prompt()
                if prompt is None:
                    break
                max_tokens = int(prompt.max_new_tokens or per_turn)
                out: TokenOutput = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=prompt.token_ids,
                    sampling_params={**sampling_params, "max_tokens": max_tokens})
                ids = list(out.token_ids)[:max_tokens]
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                step = (await _off_loop(runner.step, [(0, text)]))[0]
                episode.record(prompt, Generation(text, list(prompt.token_ids), ids,
                                                  list(out.log_probs or [])[:len(ids)]), step)
        finally:
            await _off_loop(runner.shutdown)
        traj = episode.trajectory()
        segments = traj.segments()
        main = segments[0] if segments else Segment(list(episode.turns[0].prompt_ids) if episode.turns else [], [], [])
        # veRL stacks rollout_log_probs only when its first row has them: when they were asked for, an episode
        # without a response token still returns (empty) log-probs
        asked = bool(sampling_params.get("logprobs"))
        logprobs = main.response_logprobs or ([] if asked and not main.response_ids else None)
        return AgentLoopOutput(
            prompt_ids=main.prompt_ids, response_ids=main.response_ids, response_mask=main.response_mask,
            response_logprobs=logprobs, reward_score=traj.reward,
            num_turns=2 * len(traj.turns), metrics=AgentLoopMetrics(),
            extra_fields={"success": traj.success, "error": traj.info.get("error", ""), "info": traj.info,
                          "turns": [asdict(t) for t in traj.turns], "segments": [asdict(s) for s in segments]})


def trajectory_of(task: Task, sample_index: int, output: AgentLoopOutput | dict[str, Any]) -> Trajectory:
    """The `Trajectory` of one `GymAgentLoop` output (an ``AgentLoopOutput`` or veRL's non-tensor
    fields of its row: ``extra_fields`` keys and ``reward_score``)."""
    fields = output.extra_fields if isinstance(output, AgentLoopOutput) else output
    reward = output.reward_score if isinstance(output, AgentLoopOutput) else fields["reward_score"]
    turns = [Turn(**t) for t in fields["turns"]]
    return Trajectory(task, sample_index, [], "\n".join(t.text for t in turns), float(reward),
                      bool(fields["success"]), dict(fields["info"]), turns)


class LocalGenerateClient:
    """veRL's ``server_manager.generate`` interface over a local `TransformersPolicy`.

    Requests issued concurrently (in one event-loop tick) are generated as one batch. ``sampling_params``
    uses veRL's keys: ``temperature`` (0 = greedy) and ``max_tokens`` (or ``max_new_tokens``).
    """

    def __init__(self, policy, default_max_tokens: int = 256):
        self.policy = policy
        self.default_max_tokens = default_max_tokens
        self._pending: list[tuple[list[int], dict[str, Any], asyncio.Future]] = []
        self._scheduled = False

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **_: Any) -> TokenOutput:
        """Queue the request; it is generated with the others of this event-loop tick. Returns veRL's
        `TokenOutput` (response token ids, ending with the stop token when the model stopped)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._pending.append((list(prompt_ids), dict(sampling_params), fut))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await fut

    def _flush(self) -> None:
        pending, self._pending, self._scheduled = self._pending, [], False
        groups: dict[tuple, list] = {}
        for item in pending:
            sp = item[1]
            key = (float(sp.get("temperature", 1.0)),
                   int(sp.get("max_tokens", sp.get("max_new_tokens", self.default_max_tokens))))
            groups.setdefault(key, []).append(item)
        for (temperature, max_tokens), items in groups.items():
            try:
                gens = self.policy.generate_from_ids([i[0] for i in items], n=1, temperature=temperature,
                                                     max_new_tokens=max_tokens)
                for (_, _, fut), g in zip(items, gens):
                    fut.set_result(TokenOutput(token_ids=g[0].response_ids, stop_reason="completed"))
            except Exception as exc:  # surface the error in every waiting episode
                for _, _, fut in items:
                    fut.set_exception(exc)


def agent_loop_config(prompt_length: int = 4096, response_length: int = 1024,
                      env_kwargs: dict[str, Any] | None = None, max_new_tokens: int | None = None,
                      env_server: str | None = None):
    """The slice of veRL's trainer config an agent loop reads, with veRL's key names."""
    return OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": prompt_length, "response_length": response_length}},
        "data": {"apply_chat_template_kwargs": {}},
        "genenv": {"env_kwargs": env_kwargs or {}, "max_new_tokens": max_new_tokens, "env_server": env_server},
    })


def make_agent_loop(tokenizer, server_manager, config=None) -> GymAgentLoop:
    """Instantiate `GymAgentLoop` as veRL's ``AgentLoopWorker._run_agent_loop`` does."""
    import hydra
    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = config if config is not None else agent_loop_config()
    return hydra.utils.instantiate(
        config=_agent_loop_registry[AGENT_LOOP_NAME], trainer_config=DictConfigWrap(config=config),
        server_manager=server_manager, tokenizer=tokenizer, processor=None, hf_model_type=None,
        dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data), tools=ToolListWrap([]))


def rollout_agent_loop(tasks: Sequence[Task], policy, n: int = 1, temperature: float = 0.0,
                       max_new_tokens: int = 256, env_kwargs: dict[str, Any] | None = None,
                       server_manager=None, response_length: int = 8192,
                       env_server: str | None = None) -> list[Trajectory]:
    """``n`` episodes per task through `GymAgentLoop` in this process, all concurrently (batched by the
    client; default: `LocalGenerateClient` over ``policy``), as veRL's agent-loop workers would play them.

    ``response_length`` is the episode's response budget (veRL's ``rollout.response_length``); ``env_server``: play
    the episodes on that ``genenv-serve`` server. Returns trajectories like
    `play_episodes`'.
    """
    client = server_manager or LocalGenerateClient(policy, max_new_tokens)
    cfg = agent_loop_config(response_length=response_length, env_kwargs=env_kwargs, max_new_tokens=max_new_tokens,
                            env_server=env_server)
    sampling = {"temperature": temperature, "max_tokens": max_new_tokens}

    async def _all():
        agent_loop = make_agent_loop(policy.tokenizer, client, cfg)
        jobs = [agent_loop.run(sampling, extra_info=task_extra_info(t)) for t in tasks for _ in range(n)]
        return await asyncio.gather(*jobs)

    outputs = asyncio.run(_all())
    return [trajectory_of(tasks[i // n], i % n, out) for i, out in enumerate(outputs)]
