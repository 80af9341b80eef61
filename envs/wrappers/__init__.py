"""Gymnasium wrappers over the benchmark envs, one per module: model text to actions
(`TextActionWrapper`) and the prompt of each turn (`PromptWindow`); `make_text_env` stacks
both, the way every episode loop opens an env."""
from __future__ import annotations

from typing import Any

import gymnasium as gym

from genenv.envs.task import Task
from genenv.envs.wrappers.prompt_window import PromptWindow
from genenv.envs.wrappers.text_action import TextActionWrapper


def make_text_env(tasks: list[Task], env_kwargs: dict[str, Any] | None = None) -> PromptWindow:
    """The env of ``tasks``' benchmark (all tasks of one benchmark) over ``tasks``, made through the registry
    (``gymnasium.make`` of the benchmark's env id, the passive env checker off: the conformance suite runs
    ``check_env``), taking model text (`TextActionWrapper`) and showing each turn's prompt in
    ``info["messages"]`` (`PromptWindow`).

    Raises:
        KeyError: unknown benchmark. ValueError: ``tasks`` is empty or mixes benchmarks.
    """
    from genenv.envs.registry import env_entry

    benchmarks = {t.benchmark for t in tasks}
    if len(benchmarks) != 1:
        raise ValueError(f"make_text_env needs the tasks of one benchmark, got {sorted(benchmarks) or 'none'}")
    env = gym.make(env_entry(benchmarks.pop()).env_id, tasks=list(tasks), disable_env_checker=True,
                   **(env_kwargs or {}))
    return PromptWindow(TextActionWrapper(env))


__all__ = ["PromptWindow", "TextActionWrapper", "make_text_env", "prompt_window", "text_action"]
