"""The prompt window: what a chat model is shown at each turn of an episode.

A multi-step episode is a conversation: the env's rendered prompt (system instructions, demonstrations, the first
observation), then one (action, observation) exchange per step. `PromptWindow` keeps that conversation and
puts the chat messages of the agent's *next* turn in ``info["messages"]`` after every reset and non-final step, so
every loop that plays episodes (evaluation, local training, the veRL agent loop) shows the agent the same prompt
by reading it from here. Like GEM's history wrappers, it is the one place that decides the history a turn sees.

With ``keep_turns`` (default: the env class's ``prompt_window``; ``None`` keeps the whole conversation), the prompt
is the rendered prompt, its last message (the first observation) shown through the env's ``past_observation``
once it is no longer the latest, and the last ``keep_turns`` exchanges, every observation but the latest shown
through ``past_observation`` (ALFWorld: the game text without its command list). The window never changes the
env's state, rewards or termination.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym

__all__ = ["PromptWindow"]


class PromptWindow(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Keep the episode's conversation and put the next turn's chat messages in ``info["messages"]``.

    Wraps a text-level env (`TextActionWrapper`: actions are model text).

    Args:
        env: the wrapped env.
        keep_turns: earlier (action, observation) exchanges kept in the prompt; ``None``: all. Default: the
            unwrapped env's ``prompt_window`` class attribute.
    Raises:
        ValueError: ``keep_turns`` below 0.
    """

    def __init__(self, env: gym.Env, keep_turns: int | None | str = "env"):
        gym.utils.RecordConstructorArgs.__init__(self, keep_turns=keep_turns)
        gym.Wrapper.__init__(self, env)
        if keep_turns == "env":
            keep_turns = getattr(env.unwrapped, "prompt_window", None)
        if keep_turns is not None and int(keep_turns) < 0:
            raise ValueError(f"keep_turns must be >= 0 or None, got {keep_turns}")
        self.keep_turns = None if keep_turns is None else int(keep_turns)
        self.conversation: list[dict[str, str]] = []
        self.head = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Reset the env; ``info["messages"]`` is its rendered prompt."""
        obs, info = self.env.reset(seed=seed, options=options)
        self.conversation = [dict(m) for m in info["messages"]]
        self.head = len(self.conversation)
        info["messages"] = self.prompt()
        return obs, info

    def step(self, action: Any):
        """Step the env with ``action`` (model text); unless the episode ended, ``info["messages"]`` is the next
        turn's prompt."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.conversation.append({"role": "assistant", "content": info.get("raw_action", repr(action))
                                  if not isinstance(action, str) else action})
        if not (terminated or truncated):
            self.conversation.append({"role": "user", "content": obs})
            info["messages"] = self.prompt()
        return obs, reward, terminated, truncated, info

    def prompt(self) -> list[dict[str, str]]:
        """The chat messages of the next turn (a new list; see the module docstring)."""
        messages = self.conversation
        if self.keep_turns is None or len(messages) <= self.head:
            return [dict(m) for m in messages]
        past = self.env.unwrapped.past_observation
        recent = messages[max(self.head, len(messages) - 2 * self.keep_turns):]
        latest = len(messages) - 1

        def shown(i: int, m: dict[str, str]) -> dict[str, str]:
            """Message ``i`` as shown: an observation that is not the latest goes through ``past_observation``."""
            return dict(m) if i == latest or m["role"] != "user" else {**m, "content": past(m["content"])}

        start = len(messages) - len(recent)
        return ([dict(m) for m in messages[:self.head - 1]] + [shown(self.head - 1, messages[self.head - 1])]
                + [shown(start + k, m) for k, m in enumerate(recent)])
