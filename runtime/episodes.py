"""The one episode loop: how the agent plays a task, turn by turn, for evaluation, local training and the veRL
agent loop alike.

An `Episode` is the bookkeeping of one episode of one task. Its env is opened with
`make_text_env` (in this process or in a worker process,
`genenv.envs.workers`), whose `PromptWindow` puts the chat messages of the next
turn in ``info["messages"]``. Each turn the episode builds the `Prompt`
from those messages (token ids with the policy's chat template when it has one,
`chat_prompt_ids`), the policy generates, the env steps on the generated
text, and the episode records a `Turn`: exactly the tokens the policy conditioned on and the tokens it
produced. So training samples are on-policy by construction, and every loop shows the agent the same prompts
(``tests/test_episodes.py`` asserts it for every multi-step env).

Drivers: `play_episodes` plays many episodes through the policy's continuous batch where it has one
(``policy.continuous``, `continuous`: every unfinished episode decodes in one batch, a turn's
end steps its env at once and the next prompt goes back into the episode's row), else in lock step (every round,
the unfinished episodes' prompts are generated as batches, identical prompts sampled ``k`` times at once, then every
env steps); the veRL agent loop (`genenv.trainer.engines.verl_ray.agent_loop`) plays one episode per ``run``
against veRL's server manager. Single-step envs are episodes of one turn.

A response budget (``max_response_tokens``, veRL's ``response_length``) bounds an episode's tokens after its first
prompt, policy and environment tokens together: each turn may generate at most what is left, and an episode with
nothing left ends (truncated) before it overflows, so its reward always belongs to tokens that are trained on.

For training, `Trajectory.segments` turns the turns into update sequences: one packed sequence for each run
of turns whose prompts extend the previous prompt and response (the conversation grew append-only), with a mask of
0 on the environment's tokens. A prompt that does not extend it (a windowed prompt dropped history; a sampled
response that the chat template re-encodes to other tokens) starts the next sequence, so the update feeds a
conversation's history again only where it broke. Of 16 powered TWX episodes
(``lab/benches/bench_update.py --tasks 4``), 3 broke once; the update fed 13,179 tokens in 19 sequences, where one
sequence per turn of a broken episode had fed 22,954 in 37, for the same 1,154 trained tokens.
"""
from __future__ import annotations

import numbers
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from genenv.envs.task import Task
from genenv.envs.workers import EpisodeRunner, LocalEpisodes, ProcessEpisodes
from genenv.runtime.policies import Generation, Policy, Prompt

__all__ = [
    "BUDGET_EXHAUSTED", "Episode", "Rollout", "RolloutSpec", "RolloutTimings", "Segment", "Trajectory", "Turn",
    "episode_runner", "per_task", "play_episodes",
]

BUDGET_EXHAUSTED = "response budget exhausted"


@dataclass
class Turn:
    """One turn: the ``messages`` shown, the generated ``text``, the env's ``reward`` for it, the tokens the
    policy conditioned on (``prompt_ids``) and produced (``response_ids``; both empty for text-only policies), and
    the sampler's log-probs of ``response_ids`` (``response_logprobs``; empty when the sampler reports none) and
    the policy's token ``usage`` (`Generation`)."""

    messages: list[dict[str, str]]
    text: str
    reward: float
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)


@dataclass
class Segment:
    """One update sequence of an episode: ``prompt_ids``, ``response_ids`` and ``response_mask`` (1 on the
    policy's own tokens, 0 on environment tokens; same length as ``response_ids``); ``response_logprobs``: the
    sampler's log-probs, 0.0 on environment tokens (veRL's convention for ``rollout_log_probs``,
    ``verl/experimental/agent_loop/agent_loop.py: _agent_loop_postprocess``), same length as ``response_ids``, or
    empty when a turn of the sequence has none."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] = field(default_factory=list)


@dataclass
class Trajectory:
    """One episode of the agent on one task.

    ``reward`` in [0, 1] (paper Eq. 1; a multi-step episode's return), ``success`` the benchmark's correctness
    bit, ``info`` the env's last step info (metric parts, ``error``) plus ``turns``, ``messages`` the whole
    conversation (the rendered prompt and every exchange), ``text`` the generations joined by newlines, ``turns``
    the `Turn` records.
    """

    task: Task
    sample_index: int
    messages: list[dict[str, str]]
    text: str
    reward: float
    success: bool
    info: dict[str, Any]
    turns: list[Turn] = field(default_factory=list)

    def segments(self) -> list[Segment]:
        """The update sequences of the episode (see the module docstring): one per run of turns whose prompts each
        extend the previous prompt and response, in order; ``[]`` without token ids."""
        turns = [t for t in self.turns if t.response_ids]
        if not turns:
            return []
        logprobs = all(len(t.response_logprobs) == len(t.response_ids) for t in turns)
        runs = [[turns[0]]]
        for cur, nxt in zip(turns, turns[1:]):
            if nxt.prompt_ids[:len(cur.prompt_ids) + len(cur.response_ids)] == cur.prompt_ids + cur.response_ids:
                runs[-1].append(nxt)
            else:  # the history was dropped or re-encoded differently: a new sequence from this prompt
                runs.append([nxt])
        return [_packed(run, logprobs) for run in runs]


def _packed(turns: list[Turn], logprobs: bool) -> Segment:
    """One update sequence of ``turns`` (each prompt extends the previous prompt and response): the first prompt,
    then every turn's new prompt tokens (mask 0) and response (mask 1); with ``logprobs``, the sampler's log-probs
    where the mask is 1 and 0.0 on the environment's tokens."""
    first = turns[0].prompt_ids
    response: list[int] = []
    mask: list[int] = []
    for t in turns:
        context = t.prompt_ids[len(first) + len(response):]
        response += context + t.response_ids
        mask += [0] * len(context) + [1] * len(t.response_ids)
    lp: list[float] = []
    if logprobs:
        own = iter(lp_ for t in turns for lp_ in t.response_logprobs)
        lp = [next(own) if m else 0.0 for m in mask]
    return Segment(list(first), response, mask, lp)


class Episode:
    """The bookkeeping of one episode (see the module docstring).

    Args:
        task / sample_index: the task and which of its ``n`` rollouts this is.
        encode: the policy's chat template (messages → token ids), or ``None`` for text-only policies.
        max_new_tokens: generation cap per turn.
        max_response_tokens: the episode's response budget (``None``: none; needs ``encode``).
    """

    def __init__(self, task: Task, sample_index: int = 0, encode: Callable[[list[dict[str, str]]], list[int]] | None
                 = None, max_new_tokens: int = 256, max_response_tokens: int | None = None):
        self.task, self.sample_index = task, sample_index
        self.encode, self.max_new_tokens, self.budget = encode, int(max_new_tokens), max_response_tokens
        self.turns: list[Turn] = []
        self.conversation: list[dict[str, str]] = []
        self.next_messages: list[dict[str, str]] = []
        self.first_prompt_len: int | None = None
        self.reward, self.info, self.done = 0.0, {}, False

    def opened(self, observation: str, info: dict[str, Any]) -> None:
        """Take the env's ``reset`` output (``info["messages"]``: the rendered prompt)."""
        self.conversation = [dict(m) for m in info["messages"]]
        self.next_messages = list(info["messages"])

    def prompt(self) -> Prompt | None:
        """The next turn's prompt, or ``None`` when the response budget is spent (the episode then ends,
        truncated, with ``info["error"]`` = `BUDGET_EXHAUSTED` if it had none)."""
        ids = self.encode(self.next_messages) if self.encode is not None else []
        cap = None
        if self.first_prompt_len is None:
            self.first_prompt_len = len(ids)
        if self.budget is not None and ids:
            left = int(self.budget) - (len(ids) - self.first_prompt_len)
            if left <= 0:
                self.done = True
                self.info = {**self.info, "truncated_by_budget": True}
                if not self.info.get("error"):
                    self.info["error"] = BUDGET_EXHAUSTED
                return None
            cap = left if left < self.max_new_tokens else None
        return Prompt(self.next_messages, self.task, len(self.turns), token_ids=ids, max_new_tokens=cap)

    def record(self, prompt: Prompt, generation: Generation, step: tuple[str, float, bool, bool, dict[str, Any]]
               ) -> None:
        """Record a turn: the ``generation`` for ``prompt`` and the env's ``step`` result on its text."""
        obs, reward, terminated, truncated, info = step
        self.turns.append(Turn(prompt.messages, generation.text, float(reward),
                               list(generation.prompt_ids or prompt.token_ids), list(generation.response_ids),
                               list(generation.response_logprobs), dict(generation.usage)))
        self.reward += float(reward)
        self.info = info
        self.conversation.append({"role": "assistant", "content": generation.text})
        if terminated or truncated:
            self.done = True
        else:
            self.conversation.append({"role": "user", "content": obs})
            self.next_messages = info["messages"]

    def trajectory(self) -> Trajectory:
        """The finished (or cut) episode as a `Trajectory`."""
        info = {k: v for k, v in self.info.items() if k != "messages"}
        info["turns"] = len(self.turns)
        return Trajectory(self.task, self.sample_index, self.conversation, "\n".join(t.text for t in self.turns),
                          self.reward, bool(info.get("success")), info, list(self.turns))


def encoder_of(policy: Policy) -> Callable[[list[dict[str, str]]], list[int]] | None:
    """The policy's chat template as a function (``encode_prompt``), or ``None`` for text-only policies."""
    return getattr(policy, "encode_prompt", None)


def episode_runner(env_server: str | None = None, workers: int | None = None) -> EpisodeRunner:
    """The one place an `EpisodeRunner` is chosen: episodes on the ``genenv-serve``
    server(s) at ``env_server`` (one URL or several, comma-separated;
    `RemoteEpisodes`, imported on use: it needs
    ``openenv``; ``workers`` is then unused), else in ``workers`` worker processes when ``workers`` ≥ 1
    (`ProcessEpisodes`), else in this process
    (`LocalEpisodes`)."""
    if env_server:
        from genenv.runtime.serve.client import RemoteEpisodes

        return RemoteEpisodes(env_server)
    return ProcessEpisodes(workers) if workers and workers >= 1 else LocalEpisodes()


@dataclass(frozen=True)
class RolloutSpec:
    """How a batch of agent episodes is played: what `play_episodes`, an engine's ``rollout`` and the
    leaderboard's evaluation pass down together.

    Attributes:
        n: episodes per task (the GRPO group size).
        group_sizes: episodes of each task in task order, where tasks differ in group size (e.g. newly admitted
            tasks with ``generation.rollouts_per_task`` episodes beside pool tasks with ``agent.n``): all of them
            decode in one batch instead of one rollout per size; ``None``: ``n`` for every task
            (`sizes`).
        temperature: sampling temperature (0: greedy).
        max_new_tokens: tokens the policy may generate per turn.
        max_response_tokens: each episode's response budget after its first prompt, policy and environment tokens
            together (veRL's ``response_length``; ``None``: none; see the module docstring).
        env_kwargs: per-benchmark env constructor options (e.g. ``{"bamboogle": {"metric": "f1"}}``).
        env_server: the URL of a ``genenv-serve`` server to play the episodes on, or several comma-separated (the
            sessions spread over them; ``None``: this machine).
        env_workers: worker processes for the envs (``None`` / 0: this process; unused with ``env_server``).
    """

    n: int = 1
    group_sizes: tuple[int, ...] | None = None
    temperature: float = 0.0
    max_new_tokens: int = 256
    max_response_tokens: int | None = None
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    env_server: str | None = None
    env_workers: int | None = None

    def sizes(self, tasks: int) -> list[int]:
        """The episodes of each of ``tasks`` tasks, in task order: ``group_sizes``, or ``n`` for each
        (`per_task`).

        Raises:
            ValueError: ``group_sizes`` does not have one size per task, or a size is below 1.
        """
        return per_task(self.n if self.group_sizes is None else self.group_sizes, tasks)


def per_task(n: int | Sequence[int], tasks: int) -> list[int]:
    """Episodes of each of ``tasks`` tasks: ``n`` for each (any integer, numpy's too), or ``n`` itself where it
    gives one count per task.

    Raises:
        ValueError: ``n`` has not one count per task, or a count is below 1.
    """
    sizes = [int(n)] * tasks if isinstance(n, numbers.Integral) else [int(k) for k in n]
    if len(sizes) != tasks:
        raise ValueError(f"{len(sizes)} group sizes for {tasks} tasks")
    if any(k < 1 for k in sizes):
        raise ValueError(f"every task needs at least one episode, got group sizes {sizes}")
    return sizes


@dataclass(frozen=True)
class RolloutTimings:
    """Seconds a rollout spent: ``generate_seconds`` (the policy's generation) and ``env_seconds`` (env resets and
    steps: parsing, execution, scoring). Timings add up (``a + b``)."""

    generate_seconds: float = 0.0
    env_seconds: float = 0.0

    def __add__(self, other: "RolloutTimings") -> "RolloutTimings":
        """Both figures summed (seconds), e.g. the timings of a batch and of its refill rounds."""
        return RolloutTimings(self.generate_seconds + other.generate_seconds, self.env_seconds + other.env_seconds)


@dataclass(frozen=True)
class Rollout:
    """What a rollout returns: the ``trajectories`` (each task's group size of them, grouped by task in input
    order) and the `RolloutTimings` it took."""

    trajectories: list[Trajectory]
    timings: RolloutTimings = RolloutTimings()


def play_episodes(tasks: Sequence[Task], policy: Policy, spec: RolloutSpec = RolloutSpec(), chunk_size: int = 16,
                  progress: Any = None) -> Rollout:
    """Play ``spec.n`` episodes per task (or ``spec.group_sizes``: `RolloutSpec.sizes`; any mix of
    benchmarks, single- and multi-step envs) through the policy's continuous batch, or in lock step where it has
    none (see the module docstring), on the runner `episode_runner` chooses for ``spec``.

    Args:
        tasks: the tasks.
        policy: generates the agent's text (and token ids, when local).
        spec: the sampling and env settings (`RolloutSpec`; default: one greedy episode per task here).
        chunk_size: prompts per policy call (progress granularity; an endpoint policy's requests in flight); rows
            of the continuous batch.
        progress: description for a tqdm progress bar, an open bar to advance by one per finished episode (the
            caller closes it), or ``None`` for none.
    Returns:
        the `Rollout`: ``len(tasks) * spec.n`` trajectories (the sum of the group sizes), grouped by task
        in input order, and timings.
    Raises:
        ValueError: ``spec.group_sizes`` does not fit ``tasks`` (`RolloutSpec.sizes`).
    """
    runner = episode_runner(spec.env_server, spec.env_workers)
    encode = encoder_of(policy)
    episodes = [Episode(t, k, encode, spec.max_new_tokens, spec.max_response_tokens)
                for t, size in zip(tasks, spec.sizes(len(tasks))) for k in range(size)]
    bar = None if isinstance(progress, str) else progress
    timings = RolloutTimings()
    try:
        t0 = time.perf_counter()
        kwargs = spec.env_kwargs or {}
        opened = runner.open([(i, e.task, kwargs.get(e.task.benchmark)) for i, e in enumerate(episodes)])
        for e, (obs, info) in zip(episodes, opened):
            e.opened(obs, info)
        timings += RolloutTimings(env_seconds=time.perf_counter() - t0)
        if isinstance(progress, str) and progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(episodes), desc=progress, unit="episode")
        batch = _continuous_batch(policy, spec, chunk_size)
        if batch is not None:
            timings += _play_continuous(episodes, policy, batch, runner, bar)
        turn = 0
        while batch is None:
            active = [i for i, e in enumerate(episodes) if not e.done]
            if not active:
                break
            turn += 1
            if bar and turn > 1:
                bar.set_postfix(turn=turn, active=len(active))
            for start in range(0, len(active), chunk_size):
                timings += _play_round(episodes, active[start:start + chunk_size], policy, runner, spec.temperature,
                                       spec.max_new_tokens, bar)
    finally:
        runner.shutdown()
        release = getattr(policy, "clear_prefix_cache", None)
        if release is not None:  # the KV states kept between turns are of no use after the rollout
            release()
        if bar and isinstance(progress, str):
            bar.close()
    return Rollout([e.trajectory() for e in episodes], timings)


def _continuous_batch(policy: Policy, spec: RolloutSpec, capacity: int):
    """The policy's continuous batch for this rollout (``policy.continuous``,
    `ContinuousBatch`), or ``None`` to play in lock step: the policy has none
    or declines."""
    continuous = getattr(policy, "continuous", None)
    if continuous is None:
        return None
    return continuous(temperature=spec.temperature, max_new_tokens=spec.max_new_tokens, capacity=capacity)


def _play_continuous(episodes: list[Episode], policy: Policy, batch, runner: EpisodeRunner, bar) -> RolloutTimings:
    """Play every episode through one continuous batch: up to its capacity at once, a waiting episode taking
    the row a finished one frees; each decoding step's ended turns step their envs at once, and an unfinished
    episode's next prompt goes straight back into its row. Returns the seconds of generation and env steps."""
    from collections import deque

    waiting = deque(range(len(episodes)))
    prompts: dict[int, Prompt] = {}
    generate_s = env_s = 0.0

    def finish(i: int) -> None:
        runner.close(i)
        batch.release(i)
        if bar:
            bar.update(1)

    def start(i: int) -> None:
        p = episodes[i].prompt()
        if p is None:  # budget spent: the episode ends without a step
            finish(i)
        else:
            prompts[i] = p
            batch.add(i, p.token_ids, p.max_new_tokens)

    while True:
        while waiting and batch.free() > 0:
            start(waiting.popleft())
        if not batch.busy():
            if waiting:
                raise RuntimeError("continuous batch: episodes wait but no row is free or decoding")
            break
        t0 = time.perf_counter()
        ended = batch.step()
        t1 = time.perf_counter()
        generate_s += t1 - t0
        policy.generate_seconds += t1 - t0
        if not ended:
            continue
        generated = {out.key: policy.continuous_generation(out.prompt_ids, out.response_ids, out.shared,
                                                          out.response_logprobs)
                     for out in ended}
        order = list(generated)
        t1 = time.perf_counter()
        results = runner.step([(i, generated[i].text) for i in order])
        env_s += time.perf_counter() - t1
        for i, result in zip(order, results):
            episode = episodes[i]
            episode.record(prompts[i], generated[i], result)
            if episode.done:
                finish(i)
            else:
                start(i)
    return RolloutTimings(generate_s, env_s)


def _play_round(episodes: list[Episode], ids: list[int], policy: Policy, runner: EpisodeRunner, temperature: float,
                max_new_tokens: int, bar) -> RolloutTimings:
    """One turn of the episodes ``ids``: prompts (identical ones sampled together), generation, env steps; returns
    the seconds of the generation and of the steps."""
    prompts: dict[int, Prompt] = {}
    for i in ids:
        p = episodes[i].prompt()
        if p is None:  # budget spent: the episode ended without a step
            runner.close(i)
            if bar:
                bar.update(1)
        else:
            prompts[i] = p
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, p in prompts.items():
        groups[(tuple(p.token_ids) or repr(p.messages), p.turn, p.max_new_tokens, id(p.task))].append(i)
    by_size: dict[int, list[list[int]]] = defaultdict(list)
    for members in groups.values():
        by_size[len(members)].append(members)
    t0 = time.perf_counter()
    generated: dict[int, Generation] = {}
    for size, member_lists in by_size.items():
        outs = policy.generate([prompts[m[0]] for m in member_lists], n=size, temperature=temperature,
                               max_new_tokens=max_new_tokens)
        for members, gens in zip(member_lists, outs):
            for i, gen in zip(members, gens):
                generated[i] = gen
    t1 = time.perf_counter()
    order = list(generated)
    results = runner.step([(i, generated[i].text) for i in order])
    for i, result in zip(order, results):
        episode = episodes[i]
        episode.record(prompts[i], generated[i], result)
        if episode.done:
            runner.close(i)
            if bar:
                bar.update(1)
    return RolloutTimings(t1 - t0, time.perf_counter() - t1)
