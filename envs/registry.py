"""Registry of the benchmark environments: Gymnasium ids, env classes, and per-task prompt rendering.

Each entry maps a benchmark name to its :class:`~genenv.envs.base.TaskEnv` subclass and Gymnasium id
(``genenv/<Name>-v0``). :func:`register_all` calls :func:`gymnasium.register` for each (done on
``import genenv.envs``), so ``gymnasium.make("genenv/BFCL-v0", category="simple_python")`` works.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from genenv.envs.task import Task


@dataclass(frozen=True)
class EnvEntry:
    """One registered environment: ``benchmark`` name, Gymnasium ``env_id``, ``entry_point`` (``module:Class``),
    and ``split_options``: the keyword sets whose sizes ``genenv-envs`` lists."""

    benchmark: str
    env_id: str
    entry_point: str
    split_options: tuple[dict[str, Any], ...]

    @property
    def env_class(self) -> type:
        """The env class (imported on first use)."""
        import importlib

        module, name = self.entry_point.split(":")
        return getattr(importlib.import_module(module), name)


def _bfcl_options() -> tuple[dict[str, Any], ...]:
    from genenv.envs.bfcl import SINGLE_TURN_CATEGORIES

    return tuple({"category": c, "split": s} for c in SINGLE_TURN_CATEGORIES for s in ("test", "train", "heldout"))


ENVS: dict[str, EnvEntry] = {
    "bfcl": EnvEntry("bfcl", "genenv/BFCL-v0", "genenv.envs.bfcl:BFCLEnv", _bfcl_options()),
    "bamboogle": EnvEntry("bamboogle", "genenv/Bamboogle-v0", "genenv.envs.bamboogle:BamboogleEnv",
                          tuple({"split": s} for s in ("test", "train", "heldout"))),
}


def register_all() -> None:
    """Register every env with Gymnasium (idempotent)."""
    for entry in ENVS.values():
        if entry.env_id not in gym.registry:
            gym.register(id=entry.env_id, entry_point=entry.entry_point, disable_env_checker=False)


def env_entry(benchmark: str) -> EnvEntry:
    """The registry entry of ``benchmark``; raises ``KeyError`` listing the known names."""
    try:
        return ENVS[benchmark]
    except KeyError:
        raise KeyError(f"unknown benchmark {benchmark!r}; registered: {sorted(ENVS)}") from None


def render_messages(task: Task) -> list[dict[str, str]]:
    """The chat messages that present ``task`` to a chat model (its env class's ``render_messages``)."""
    return env_entry(task.benchmark).env_class.render_messages(task)
