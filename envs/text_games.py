"""What the text-game envs (ALFWorld, TextWorldExpress) share: how an observation lists the admissible commands,
how a command is matched to them, and how the command list is read back (for a random-admissible policy).

An observation is the game's text, then ``"\\n\\nValid actions: "`` and the admissible commands joined by
``", "``. Matching is exact after lower-casing and whitespace normalisation (the envs' structured action space:
one admissible command).
"""
from __future__ import annotations

__all__ = ["ACTIONS_HEADER", "admissible_commands", "match_command", "observation_text", "past_observation"]

ACTIONS_HEADER = "\n\nValid actions: "


def observation_text(feedback: str, admissible: list[str]) -> str:
    """What the agent sees after a step: the game's text, then the admissible commands."""
    return f"{feedback.strip()}{ACTIONS_HEADER}{', '.join(admissible)}"


def past_observation(text: str) -> str:
    """An observation once it is no longer the latest: its game text without the command list (the latest
    observation carries the current list; older lists only lengthen the prompt)."""
    return text.split(ACTIONS_HEADER, 1)[0]


def admissible_commands(text: str) -> list[str]:
    """The admissible commands listed in an observation (``[]`` when it lists none)."""
    _, sep, listed = text.rpartition(ACTIONS_HEADER)
    return [c.strip() for c in listed.split(", ") if c.strip()] if sep else []


def match_command(command: str, admissible: list[str]) -> str | None:
    """The admissible command equal to ``command`` after lower-casing and whitespace normalisation, else ``None``."""
    wanted = " ".join(command.lower().split())
    return next((c for c in admissible if " ".join(c.lower().split()) == wanted), None)
