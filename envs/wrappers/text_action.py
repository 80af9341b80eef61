"""The one Gymnasium wrapper from raw model text to a benchmark env's action."""
from __future__ import annotations

import json
from typing import Any

import gymnasium as gym

from genenv.envs.base import InvalidAction
from genenv.envs.parsing import ActionParseError, ToolCall
from genenv.envs.spaces import UnicodeText

__all__ = ["TextActionWrapper"]


class TextActionWrapper(gym.ActionWrapper, gym.utils.RecordConstructorArgs):
    """Accept model text as the action and hand the env its structured / free-text action.

    Parsing is the env's own `read_action` (under the env's ``parsing``
    setting: the official harness's reading or our lenient one); anything it cannot parse becomes
    an `InvalidAction` that the env scores 0 with ``info["error"]``, so no model
    output can raise. The raw text is kept in ``info["raw_action"]``.

    A list of `ToolCall` (structured calls from a client that has them already, e.g. a
    tool-calling API or MCP) is handed over through the env's
    `action_from_calls`, unparsed; an env that takes text only makes it an
    `InvalidAction` with the reason. Its ``raw_action`` is the calls as JSON.
    """

    def __init__(self, env: gym.Env):
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.ActionWrapper.__init__(self, env)
        self.action_space = UnicodeText()
        self._raw = ""

    def action(self, action: Any) -> Any:
        """Parse ``action`` (model text) into the wrapped env's action; a list of tool calls goes through the
        env's ``action_from_calls``."""
        if isinstance(action, list) and action and all(isinstance(c, ToolCall) for c in action):
            self._raw = calls_text(action)
            try:
                return self.env.unwrapped.action_from_calls(list(action))
            except ValueError as exc:
                return InvalidAction(str(exc), self._raw)
        self._raw = action if isinstance(action, str) else repr(action)[:1000]
        if not isinstance(action, str):
            return InvalidAction(f"expected model text (str), got {type(action).__name__}")
        try:
            return self.env.unwrapped.read_action(action)
        except ActionParseError as exc:
            return InvalidAction(str(exc), action)

    def step(self, action: Any):
        """Parse, step the env, and add ``raw_action`` / ``parsed_action`` to ``info``."""
        parsed = self.action(action)
        obs, reward, terminated, truncated, info = self.env.step(parsed)
        info["raw_action"] = self._raw
        info["parsed_action"] = _describe(parsed)
        return obs, reward, terminated, truncated, info


def _describe(action: Any) -> Any:
    if isinstance(action, InvalidAction):
        return None
    if isinstance(action, list):
        return [c.to_json() if hasattr(c, "to_json") else c for c in action]
    return action


def calls_text(calls: list[ToolCall]) -> str:
    """Structured calls as the text kept for them in ``info["raw_action"]`` and the conversation: their JSON list
    of ``{"name", "arguments"}``."""
    return json.dumps([c.to_json() for c in calls], ensure_ascii=False)
