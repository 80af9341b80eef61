"""TRL's ``GRPOTrainer(environment_factory=...)`` over a ``genenv-serve`` server.

TRL (``trl/trainer/grpo_trainer.py``) makes one environment instance per rollout, calls ``reset(**row)`` with the
dataset row's columns (the returned text is appended to the row's last user message), offers the instance's public
methods as tools, and passes the instances to the reward functions as ``environments``. `ServerEnvironment`
is such an instance for every benchmark of the server:

* ``reset(**row)`` starts the row's episode (columns named as the server's reset arguments: ``benchmark`` and
  ``task_id`` or ``seed``, optional ``split``, ``options``, ``reading``, ...; other columns such as ``prompt`` are
  ignored) and returns the task's prompt, with its tools listed when it has any;
* two tools: ``submit(answer)`` (model text, read by the server under the session's reading) and
  ``call_tool(name, arguments)``, one generic method for the task's own tools, which differ per task while TRL's
  tool set is fixed per class;
* `server_reward`, the reward function: a rollout whose episode is still open submits its final completion
  text as the answer, then each rollout's reward is its episode's total reward from the server.

Usage:

    from trl import GRPOConfig, GRPOTrainer
    from genenv.runtime.serve.trl import environment_factory, server_reward
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": ""}], "benchmark": "bamboogle", "seed": i}
                                 for i in range(64)])
    GRPOTrainer(model, reward_funcs=[server_reward], train_dataset=dataset, args=GRPOConfig(...),
                environment_factory=environment_factory("http://127.0.0.1:8011")).train()

Several servers (``"http://a:8011,http://b:8011"``): each new instance goes to the next one in turn.
"""
from __future__ import annotations

import itertools
import json
from typing import Any, Callable

from genenv.runtime.serve.protocol import RESET_KEYS
from genenv.runtime.serve.client import SessionClient, server_urls

__all__ = ["ServerEnvironment", "environment_factory", "server_reward"]


class ServerEnvironment:
    """One rollout's episode on the server at ``url`` (see the module docstring).

    Attributes:
        reward: the episode's total reward so far (0.0 before any step). done: whether it ended.
        rewards_seen: every step reward the server returned to this instance, across its episodes.
    Raises (from ``reset``): ``ConnectionError`` (no server), ``RuntimeError`` (the server's error, e.g. an unknown
    benchmark or task id). The tools never raise: a problem is their return text.
    """

    def __init__(self, url: str, token: str | None = None, reading: str = "official"):
        self.url, self.token, self.reading = url, token, reading
        self.reward, self.done = 0.0, True
        self.rewards_seen: list[float] = []
        self._client = None

    def reset(self, **row: Any) -> str:
        """Start the episode of ``row`` (its server reset arguments); returns the task's prompt text."""
        if self._client is None:
            self._client = SessionClient(self.url, token=self.token).sync()
            self._client.connect()
        data = {k: v for k, v in row.items() if k in RESET_KEYS and v is not None}
        if isinstance(data.get("options"), dict):  # `datasets` fills a struct column's missing keys with None
            data["options"] = {k: v for k, v in data["options"].items() if v is not None}
        data.setdefault("reading", self.reading)
        obs = self._client.reset(**data).observation
        self.reward, self.done = 0.0, False
        text = obs["messages"][-1]["content"] if obs["messages"] else obs["prompt"]
        if obs["tools"]:
            listed = json.dumps([t.get("function", t) for t in obs["tools"]], ensure_ascii=False)
            text += f"\n\nTools (use call_tool with a name and JSON arguments): {listed}"
        return text

    def submit(self, answer: str) -> str:
        """Submit an answer or action as text; the environment reads it as the benchmark's harness does.

        Args:
            answer: The answer, command or plan, written as the task asks.

        Returns:
            The environment's reply: the next observation, or the episode's end with its reward.
        """
        return self._step({"text": answer})

    def call_tool(self, name: str, arguments: str) -> str:
        """Call one of the task's tools.

        Args:
            name: The tool's name, as listed with the task.
            arguments: The tool's arguments as a JSON object, e.g. {"city": "Paris"}.

        Returns:
            The tool's result, or the episode's end with its reward.
        """
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError as exc:
            return f"Error: arguments are not JSON ({exc})"
        if not isinstance(args, dict):
            return "Error: arguments must be a JSON object"
        return self._step({"tool_calls": [{"name": str(name), "arguments": args}]})

    def _step(self, action: dict[str, Any]) -> str:
        if self.done:
            return f"The episode is over (reward {self.reward:g})."
        try:
            result = self._client.step(action)
        except RuntimeError as exc:  # the server's answer to a malformed action
            return f"Error: {exc}"
        reward = float(result.reward or 0.0)
        self.rewards_seen.append(reward)
        self.reward += reward
        self.done = bool(result.done)
        obs = result.observation
        if self.done:
            return f"Episode over: reward {self.reward:g}. {obs['info'].get('error') or ''}".strip()
        return obs["prompt"]

    def _close(self) -> None:
        """Close the session (private: TRL offers every public method as a tool)."""
        if self._client is not None:
            self._client.close()
            self._client = None


def environment_factory(url: str, token: str | None = None, reading: str = "official") -> Callable[[], Any]:
    """TRL's ``environment_factory``: makes a `ServerEnvironment` per call, on ``url``, or on the servers of
    a comma-separated list in turn (replicas: TRL makes one instance per rollout slot, so the slots spread evenly).

    Raises:
        ValueError: no URL, or one that does not start with ``http://`` or ``https://``.
    """
    urls, turn = server_urls(url), itertools.count()
    return lambda: ServerEnvironment(urls[next(turn) % len(urls)], token=token, reading=reading)


def completion_text(completion: Any) -> str:
    """The final assistant text of a TRL completion (a string, or conversational messages)."""
    if isinstance(completion, str):
        return completion
    for message in reversed(completion or []):
        if message.get("role") == "assistant" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


def server_reward(completions: list[Any], environments: list[ServerEnvironment] | None = None,
                  **_: Any) -> list[float]:
    """TRL reward function: per rollout, the server's episode reward; an episode still open is first given the
    completion's final text as its answer (``submit``). Shapes: ``len(completions)`` rewards in [0, 1].

    Raises:
        ValueError: no ``environments`` (the trainer has no ``environment_factory``).
    """
    if environments is None:
        raise ValueError("server_reward needs GRPOTrainer(environment_factory=environment_factory(url))")
    for env, completion in zip(environments, completions, strict=True):
        if not env.done:
            env.submit(completion_text(completion))
    return [env.reward for env in environments]
