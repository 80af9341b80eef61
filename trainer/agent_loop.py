"""A veRL agent loop over our Gymnasium environments, and a transformers-backed generate client for it.

:class:`GymAgentLoop` is registered with veRL as ``"genenv_gym"`` (``verl.experimental.agent_loop.register``)
and is instantiated the way veRL's ``AgentLoopWorker`` does it (``hydra.utils.instantiate`` of the registry
entry with ``trainer_config``, ``server_manager``, ``tokenizer``, ...). Each ``run`` plays one episode of the
task named in the row's ``extra_info.task_json`` (our veRL parquet rows, :meth:`Task.to_verl_row`):

    reset → chat messages → tokens (veRL's Continuous Token builder) → ``server_manager.generate`` →
    env.step(decoded text) → if not done: the observation is appended as a user message
    (``ct_merge_context_msg``, mask 0) → generate again … until terminated / truncated / ``max_turns``.

``response_mask`` is 1 on policy tokens and 0 on environment tokens; ``reward_score`` is the episode return.
On a GPU cluster ``server_manager`` is veRL's vLLM client; here :class:`LocalGenerateClient` stands in for
it with batched ``transformers.generate`` (concurrent requests of one event-loop tick form one batch).
"""
from __future__ import annotations

import asyncio
from typing import Any, Sequence
from uuid import uuid4

from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import (AgentLoopBase, AgentLoopMetrics, AgentLoopOutput,
                                                     DictConfigWrap, ToolListWrap, _agent_loop_registry, register)
from verl.workers.rollout.replica import TokenOutput

from genenv.envs.task import Task
from genenv.trainer.rollout import Trajectory, make_text_env

AGENT_LOOP_NAME = "genenv_gym"


@register(AGENT_LOOP_NAME)
class GymAgentLoop(AgentLoopBase):
    """Plays one episode of a genenv Gymnasium env per ``run`` call (see module docstring).

    Config: ``actor_rollout_ref.rollout.{prompt_length,response_length}`` (veRL's keys) and
    ``genenv.{max_turns, env_kwargs, max_new_tokens}``; ``max_new_tokens`` (tokens per assistant turn) applies
    when the caller's sampling parameters carry no ``max_tokens`` (veRL's ``AgentLoopWorker`` passes none).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.response_length = self.rollout_config.response_length
        genenv_cfg = self.config.get("genenv", {}) or {}
        self.max_turns = int(genenv_cfg.get("max_turns", 8))
        self.max_new_tokens = genenv_cfg.get("max_new_tokens")
        env_kwargs = genenv_cfg.get("env_kwargs") or {}
        self.env_kwargs = (OmegaConf.to_container(env_kwargs, resolve=True) if OmegaConf.is_config(env_kwargs)
                           else dict(env_kwargs))

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        """Play the episode of ``kwargs["extra_info"]["task_json"]``; returns veRL's :class:`AgentLoopOutput`."""
        task = Task.from_json(kwargs["extra_info"]["task_json"])
        if self.max_new_tokens is not None and "max_tokens" not in sampling_params:
            sampling_params = {**sampling_params, "max_tokens": int(self.max_new_tokens)}
        env = make_text_env(task.benchmark, [task], self.env_kwargs.get(task.benchmark))
        _, info = env.reset(options={"task_id": task.id})
        messages = list(info["messages"])
        prompt_ids = await self.ct_build_initial_tokens(messages)
        runtime, response_mask = list(prompt_ids), []
        episode_return, turns, texts = 0.0, 0, []
        terminated = truncated = False
        while True:
            out: TokenOutput = await self.server_manager.generate(request_id=uuid4().hex, prompt_ids=runtime,
                                                                  sampling_params=sampling_params)
            merge, response_mask, _ = await self.ct_merge_assistant_token(runtime, out.token_ids, response_mask)
            runtime = merge.token_ids
            text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
            texts.append(text)
            obs, reward, terminated, truncated, info = env.step(text)
            episode_return += float(reward)
            turns += 1
            if terminated or truncated or turns >= self.max_turns or len(response_mask) >= self.response_length:
                break
            messages.append({"role": "assistant", "content": text})
            previous = list(messages)
            messages.append({"role": "user", "content": obs})
            merge, response_mask, _ = await self.ct_merge_context_msg(previous, messages, runtime, response_mask)
            runtime = merge.token_ids
        env.close()
        n_resp = len(response_mask)
        return AgentLoopOutput(
            prompt_ids=runtime[: len(runtime) - n_resp], response_ids=runtime[len(runtime) - n_resp:][
                : self.response_length], response_mask=response_mask[: self.response_length],
            reward_score=episode_return, num_turns=2 * turns, metrics=AgentLoopMetrics(),
            extra_fields={"success": bool(info.get("success")), "error": info.get("error", ""), "texts": texts,
                          "terminated": bool(terminated), "truncated": bool(truncated), "info": info})


class LocalGenerateClient:
    """veRL's ``server_manager.generate`` interface over a local :class:`TransformersPolicy`.

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
        :class:`TokenOutput` (response token ids, ending with the stop token when the model stopped)."""
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


def agent_loop_config(prompt_length: int = 4096, response_length: int = 1024, max_turns: int = 8,
                      env_kwargs: dict[str, Any] | None = None):
    """The slice of veRL's trainer config an agent loop reads, with veRL's key names."""
    return OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": prompt_length, "response_length": response_length}},
        "data": {"apply_chat_template_kwargs": {}},
        "genenv": {"max_turns": max_turns, "env_kwargs": env_kwargs or {}},
    })


def make_agent_loop(tokenizer, server_manager, config=None) -> GymAgentLoop:
    """Instantiate :class:`GymAgentLoop` as veRL's ``AgentLoopWorker._run_agent_loop`` does."""
    import hydra
    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = config if config is not None else agent_loop_config()
    return hydra.utils.instantiate(
        config=_agent_loop_registry[AGENT_LOOP_NAME], trainer_config=DictConfigWrap(config=config),
        server_manager=server_manager, tokenizer=tokenizer, processor=None, hf_model_type=None,
        dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data), tools=ToolListWrap([]))


def rollout_agent_loop(tasks: Sequence[Task], policy, n: int = 1, temperature: float = 0.0,
                       max_new_tokens: int = 256, env_kwargs: dict[str, Any] | None = None, max_turns: int = 8,
                       server_manager=None, response_length: int | None = None) -> list[Trajectory]:
    """``n`` episodes per task through :class:`GymAgentLoop`, all concurrently (batched by the client).

    ``response_length`` caps the episode's response tokens, policy and environment tokens together (default
    ``max_new_tokens * max_turns``; multi-step envs with long observations need more). Returns trajectories
    like :func:`genenv.trainer.rollout.rollout_tasks`, plus ``info["response_mask"]`` (0 on environment
    tokens) for multi-turn updates.
    """
    client = server_manager or LocalGenerateClient(policy, max_new_tokens)
    cfg = agent_loop_config(response_length=response_length or max_new_tokens * max_turns, max_turns=max_turns,
                            env_kwargs=env_kwargs)
    sampling = {"temperature": temperature, "max_tokens": max_new_tokens}

    async def _all():
        agent_loop = make_agent_loop(policy.tokenizer, client, cfg)
        jobs = [agent_loop.run(sampling, extra_info=t.to_verl_row()["extra_info"]) for t in tasks for _ in range(n)]
        return await asyncio.gather(*jobs)

    outputs = asyncio.run(_all())
    trajs = []
    for idx, out in enumerate(outputs):
        task = tasks[idx // n]
        info = dict(out.extra_fields["info"])
        info["response_mask"] = list(out.response_mask)
        trajs.append(Trajectory(task, idx % n, [], "\n".join(out.extra_fields["texts"]), float(out.reward_score),
                                bool(out.extra_fields["success"]), info, list(out.prompt_ids),
                                list(out.response_ids)))
    return trajs
