"""Agent rollouts through the Gymnasium environments at the text level, for any :class:`Policy`.

Used by the leaderboard (n = 1, greedy) and by the trainer (n rollouts per task, sampled). Single-step
environments (BFCL single-turn, Bamboogle) get one batched generation per task and one env step. Multi-step
environments (``env.multi_step``) are played in lock step: every turn, the unfinished episodes' conversations
are generated as one batch and each env takes one step; the observation joins the conversation as a user
message. The trainer's token-level multi-turn path is the veRL agent loop (:mod:`genenv.trainer.agent_loop`),
which plays the same episodes with response masks.
"""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

from genenv.envs.registry import env_entry
from genenv.envs.task import Task
from genenv.envs.wrappers import TextActionWrapper
from genenv.trainer.policies import Policy, Prompt


@dataclass
class Trajectory:
    """One episode of the agent on one task.

    ``reward`` in [0, 1] (paper Eq. 1; a multi-step episode's return), ``success`` the benchmark's correctness
    bit, ``info`` the env's last step info (metric parts, ``error``), token ids when the policy is local and the
    env single-step (for training). ``messages`` is the prompt (single-step) or the whole conversation
    (multi-step); ``text`` the generation (multi-step: the generations joined by newlines).
    """

    task: Task
    sample_index: int
    messages: list[dict[str, str]]
    text: str
    reward: float
    success: bool
    info: dict[str, Any]
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)


def make_text_env(benchmark: str, tasks: list[Task], env_kwargs: dict[str, Any] | None = None) -> TextActionWrapper:
    """The benchmark's env over ``tasks``, wrapped to take model text."""
    return TextActionWrapper(env_entry(benchmark).env_class(tasks=tasks, **(env_kwargs or {})))


def rollout_tasks(tasks: Sequence[Task], policy: Policy, n: int = 1, temperature: float = 0.0,
                  max_new_tokens: int = 256, env_kwargs: dict[str, dict[str, Any]] | None = None,
                  chunk_size: int = 16, progress: str | None = None,
                  stats: dict[str, float] | None = None, env_workers: int | None = None) -> list[Trajectory]:
    """Play ``n`` single-step episodes per task (any multi-step env among them: :func:`rollout_episodes`).

    Args:
        tasks: tasks of one or more benchmarks.
        policy: generates the agent's text.
        n: rollouts per task (the GRPO group size).
        temperature / max_new_tokens: sampling settings.
        env_kwargs: per-benchmark constructor options (e.g. ``{"bamboogle": {"metric": "f1"}}``).
        chunk_size: prompts per policy call (progress granularity).
        progress: description for a tqdm progress bar, or ``None`` for none.
        stats: if given, ``generate_seconds`` and ``reward_seconds`` (env steps, i.e. parsing + scoring) are
            added to it.
        env_workers: multi-step episodes only: worker processes for the envs (see :func:`rollout_episodes`).
    Returns:
        ``len(tasks) * n`` trajectories, grouped by task in input order.
    Raises:
        RuntimeError: a single-step environment did not terminate after its step.
    """
    if any(env_entry(t.benchmark).env_class.multi_step for t in tasks):
        return rollout_episodes(tasks, policy, n=n, temperature=temperature, max_new_tokens=max_new_tokens,
                                env_kwargs=env_kwargs, chunk_size=chunk_size, progress=progress, stats=stats,
                                env_workers=env_workers)
    by_bench: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        by_bench[t.benchmark].append(t)
    envs = {b: make_text_env(b, ts, (env_kwargs or {}).get(b)) for b, ts in by_bench.items()}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(tasks), desc=progress, unit="task")
    out: list[Trajectory] = []
    for start in range(0, len(tasks), chunk_size):
        chunk = list(tasks[start:start + chunk_size])
        prompts = []
        for t in chunk:
            _, info = envs[t.benchmark].reset(options={"task_id": t.id})
            prompts.append(Prompt(info["messages"], t))
        t0 = time.perf_counter()
        generations = policy.generate(prompts, n=n, temperature=temperature, max_new_tokens=max_new_tokens)
        t1 = time.perf_counter()
        for t, prompt, gens in zip(chunk, prompts, generations):
            env = envs[t.benchmark]
            for k, gen in enumerate(gens):
                env.reset(options={"task_id": t.id})
                _, reward, terminated, truncated, info = env.step(gen.text)
                if not (terminated or truncated):
                    raise RuntimeError(f"{t.benchmark} is multi-step; roll it out with the agent loop")
                out.append(Trajectory(t, k, prompt.messages, gen.text, float(reward), bool(info.get("success")),
                                      info, gen.prompt_ids, gen.response_ids))
        if stats is not None:
            stats["generate_seconds"] = stats.get("generate_seconds", 0.0) + t1 - t0
            stats["reward_seconds"] = stats.get("reward_seconds", 0.0) + time.perf_counter() - t1
        if bar:
            bar.update(len(chunk))
    if bar:
        bar.close()
    return out


def rollout_episodes(tasks: Sequence[Task], policy: Policy, n: int = 1, temperature: float = 0.0,
                     max_new_tokens: int = 256, env_kwargs: dict[str, dict[str, Any]] | None = None,
                     chunk_size: int = 16, progress: str | None = None,
                     stats: dict[str, float] | None = None, env_workers: int | None = None) -> list[Trajectory]:
    """Play ``n`` episodes per task in lock step (any mix of single- and multi-step envs).

    Each episode has its own env instance (state), in this process or, with ``env_workers`` ≥ 1, spread over
    that many worker processes (:class:`~genenv.envs.pool.ProcessEpisodes`: resets and steps run in parallel).
    Every round, the conversations of the unfinished episodes are generated ``chunk_size`` at a time (``n = 1``
    each; the policy's :class:`Prompt` carries the turn for the oracle), then every env takes one step; an
    episode ends when its env terminates or truncates. An env class with ``context_turns`` set keeps only that
    many earlier exchanges in the prompt, and shows older observations through its ``past_observation`` (the
    trajectory keeps the whole conversation). Arguments and return value as for :func:`rollout_tasks`; ``info``
    of each trajectory is the last step's, plus ``turns``.
    """
    from genenv.envs.pool import episode_runner

    runner = episode_runner(env_workers)
    episodes = [{"id": i, "task": t, "k": k, "texts": [], "reward": 0.0, "info": {}, "done": False}
                for i, (t, k) in enumerate((t, k) for t in tasks for k in range(n))]
    bar = None
    try:
        opened = runner.open([(e["id"], e["task"], (env_kwargs or {}).get(e["task"].benchmark)) for e in episodes])
        for e, (_, info) in zip(episodes, opened):
            e["messages"] = list(info["messages"])
            e["head"] = len(e["messages"])  # the rendered prompt; later messages are the episode's exchanges
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(episodes), desc=progress, unit="episode")
        turn = 0
        while True:
            active = [e for e in episodes if not e["done"]]
            if not active:
                break
            turn += 1
            if bar:
                bar.set_postfix(turn=turn, active=len(active))
            for start in range(0, len(active), chunk_size):
                chunk = active[start:start + chunk_size]
                prompts = [Prompt(prompt_window(e["messages"], e["head"], env_entry(e["task"].benchmark).env_class),
                                  e["task"], len(e["texts"])) for e in chunk]
                t0 = time.perf_counter()
                generations = policy.generate(prompts, n=1, temperature=temperature, max_new_tokens=max_new_tokens)
                t1 = time.perf_counter()
                texts = [gens[0].text for gens in generations]
                results = runner.step([(e["id"], text) for e, text in zip(chunk, texts)])
                for e, text, (obs, reward, terminated, truncated, info) in zip(chunk, texts, results):
                    e["texts"].append(text)
                    e["reward"] += float(reward)
                    e["info"] = info
                    e["messages"] = e["messages"] + [{"role": "assistant", "content": text}]
                    if terminated or truncated:
                        e["done"] = True
                        runner.close(e["id"])
                        if bar:
                            bar.update(1)
                    else:
                        e["messages"].append({"role": "user", "content": obs})
                if stats is not None:
                    stats["generate_seconds"] = stats.get("generate_seconds", 0.0) + t1 - t0
                    stats["reward_seconds"] = stats.get("reward_seconds", 0.0) + time.perf_counter() - t1
    finally:
        runner.shutdown()
        if bar:
            bar.close()
    return [Trajectory(e["task"], e["k"], e["messages"], "\n".join(e["texts"]), e["reward"],
                       bool(e["info"].get("success")), {**e["info"], "turns": len(e["texts"])}) for e in episodes]


def prompt_window(messages: list[dict[str, str]], head: int, env_class: type) -> list[dict[str, str]]:
    """The prompt of an episode's next turn: the whole conversation, or, when ``env_class.context_turns`` is set,
    the rendered prompt (its first observation included) and the last ``context_turns`` (action, observation)
    exchanges, every observation but the latest shown through ``env_class.past_observation``.

    ``messages``: the whole conversation, ``head`` = the length of the rendered prompt, whose last message is the
    first observation; returns a new list.
    """
    keep = env_class.context_turns
    if keep is None or len(messages) <= head:
        return messages
    recent = messages[max(head, len(messages) - 2 * keep):]
    def shown(m: dict[str, str]) -> dict[str, str]:
        return m if m is messages[-1] or m["role"] != "user" else {**m, "content": env_class.past_observation(m["content"])}

    return messages[:head - 1] + [shown(messages[head - 1])] + [shown(m) for m in recent]
