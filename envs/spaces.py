"""Gymnasium spaces for text observations, free-text actions and structured tool-call actions.

Gymnasium's `Text` only contains strings over a fixed character set (alphanumerics by
default), which rejects every real prompt (spaces, punctuation, unicode). `UnicodeText` keeps ``Text``'s
sampling and length bounds but contains any ``str`` whose length is within bounds. `ToolCallSpace`
contains lists of `ToolCall` (or ``{"name", "arguments"}`` dicts).
"""
from __future__ import annotations

import functools
import string
from typing import Any, Sequence

import numpy as np
from gymnasium import spaces

from genenv.envs.parsing import ToolCall

__all__ = ["ToolCallSpace", "UnicodeText", "as_tool_calls"]

_SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " "


@functools.cache
def _sample_charset_tables() -> dict[str, Any]:
    """The charset attributes (``_char_set``, ``_char_list``, ``_char_index``, ``_char_str``) gymnasium's ``Text``
    computes for `_SAMPLE_CHARSET`, computed once."""
    prototype = spaces.Text(max_length=1, min_length=0, charset=_SAMPLE_CHARSET)
    return {k: v for k, v in vars(prototype).items() if k.startswith("_char")}


class UnicodeText(spaces.Text):
    """Any Python string of ``min_length``..``max_length`` characters (samples printable ASCII)."""

    def __init__(self, max_length: int = 100_000, min_length: int = 0, seed: int | None = None):
        """Raises ValueError unless ``0 <= min_length <= max_length``. The sampling charset's lookup tables are
        built once and shared (gymnasium's ``Text`` builds them per instance, one numpy scalar per character;
        three spaces per env made, so most of ``make_text_env``'s time; figures: ``lab/notes/cpu-measurements.md``,
        "envs/spaces.py"), read-only like the rest."""
        if not 0 <= int(min_length) <= int(max_length):
            raise ValueError(f"UnicodeText needs 0 <= min_length <= max_length, got {min_length}, {max_length}")
        self.min_length, self.max_length = int(min_length), int(max_length)
        self.__dict__.update(_sample_charset_tables())
        spaces.Space.__init__(self, dtype=str, seed=seed)

    def contains(self, x: Any) -> bool:
        """True for a ``str`` within the length bounds, whatever its characters."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"


class ToolCallSpace(spaces.Space):
    """Lists of 0..``max_calls`` tool calls, each a function name plus keyword arguments.

    ``sample()`` draws calls to the given ``function_names`` (or random identifiers) with empty arguments, so
    random agents and ``check_env`` exercise the scoring path.
    """

    def __init__(self, function_names: Sequence[str] = (), max_calls: int = 8, seed: int | None = None):
        super().__init__(shape=None, dtype=None, seed=seed)
        self.function_names = list(function_names)
        self.max_calls = max_calls

    @property
    def is_np_flattenable(self) -> bool:
        """Tool calls have no fixed-size array form."""
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> list[ToolCall]:
        """A random list of 1..``max_calls`` calls with empty arguments."""
        n = int(self.np_random.integers(1, self.max_calls + 1))
        calls = []
        for _ in range(n):
            if self.function_names:
                name = self.function_names[int(self.np_random.integers(len(self.function_names)))]
            else:
                name = "f" + "".join(self.np_random.choice(list(string.ascii_lowercase), size=6))
            calls.append(ToolCall(name, {}))
        return calls

    def contains(self, x: Any) -> bool:
        """True for a list (or tuple) of ``ToolCall`` / ``{"name": str, "arguments": dict}`` items."""
        if not isinstance(x, (list, tuple)) or len(x) > self.max_calls:
            return False
        for call in x:
            if isinstance(call, ToolCall):
                continue
            if not (isinstance(call, dict) and isinstance(call.get("name"), str)
                    and isinstance(call.get("arguments", {}), dict)):
                return False
        return True

    def __repr__(self) -> str:
        return f"ToolCallSpace(max_calls={self.max_calls})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ToolCallSpace) and other.max_calls == self.max_calls


def as_tool_calls(action: Any) -> list[ToolCall]:
    """Normalise a structured action (list of ``ToolCall`` or dicts) to ``list[ToolCall]``.

    Raises:
        TypeError: the action is not a list of calls.
    """
    if isinstance(action, np.ndarray):
        action = action.tolist()
    if not isinstance(action, (list, tuple)):
        raise TypeError(f"a structured action is a list of calls, got {type(action).__name__}")
    calls = []
    for call in action:
        if isinstance(call, ToolCall):
            calls.append(call)
        elif isinstance(call, dict) and isinstance(call.get("name"), str):
            args = call.get("arguments", {})
            if not isinstance(args, dict):
                raise TypeError(f"arguments of {call['name']!r} must be a dict")
            calls.append(ToolCall(call["name"], dict(args)))
        else:
            raise TypeError(f"not a tool call: {call!r:.100}")
    return calls
