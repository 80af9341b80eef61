"""veRL's reward-function interface over our environments: ``compute_score`` for ``reward.custom_reward_function``.

veRL 0.9.1 loads a custom reward function by path and name (``verl/trainer/ppo/reward.py: get_custom_reward_fn``,
``load_extern_object``) and its reward manager calls it once per response
(``verl/experimental/reward_loop/reward_manager/naive.py: NaiveRewardManager.run_single``):

    reward:
      custom_reward_function:
        path: pkg://genenv.trainer.engines.verl_ray.reward
        name: compute_score
        reward_kwargs: {env_kwargs: {bamboogle: {metric: f1}}}   # optional, per benchmark

The score is the environment's own reward for the response taken as one action: the task is rebuilt from the
row's ``extra_info.task_json`` (`genenv.envs.verl_rows.to_verl_row`), its Gymnasium env is reset on it
and stepped once with the decoded response, so the reward is paper Eq. 1 computed by ``rewards/`` exactly as in
every other path of the project (the leaderboard, the local trainer, the ``genenv_gym`` agent loop).

Multi-step environments cannot be scored from one response string: their episodes are played, and scored,
inside the ``genenv_gym`` agent loop (which sets ``reward_score``, so veRL does not call this function for
them); here they raise ``ValueError``.
"""
from __future__ import annotations

import json
from typing import Any

from genenv.envs.registry import env_entry
from genenv.envs.task import Task
from genenv.envs.wrappers import make_text_env

__all__ = ["compute_score"]


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None,
                  env_kwargs: dict[str, dict[str, Any]] | None = None, **_: Any) -> dict[str, Any]:
    """Score one response with the task's environment (single-step envs).

    Args:
        data_source: the row's ``data_source``, ``"genenv/<benchmark>"``.
        solution_str: the decoded response (veRL decodes with ``skip_special_tokens=True``).
        ground_truth: the row's ``reward_model.ground_truth``: the task's gold answer as JSON text.
        extra_info: the row's ``extra_info``; ``task_json`` holds the task. veRL adds ``num_turns`` and
            ``rollout_reward_scores``, which are ignored.
        env_kwargs: per-benchmark env constructor options (``reward.custom_reward_function.reward_kwargs``),
            e.g. ``{"bamboogle": {"metric": "f1"}}``.
    Returns:
        ``{"score": reward in [0, 1], "success": bool, "error": str}`` (veRL keeps the extra keys as
        ``reward_extra_info``).
    Raises:
        ValueError: no ``extra_info.task_json``; ``data_source`` or ``ground_truth`` disagree with the task; the
            task's environment is multi-step; the environment does not end after one step.
    """
    info = extra_info or {}
    if "task_json" not in info:
        raise ValueError("compute_score needs extra_info.task_json (rows written by genenv.envs.verl_rows.to_verl_row)")
    task = Task.from_json(info["task_json"])
    if data_source != f"genenv/{task.benchmark}":
        raise ValueError(f"data_source {data_source!r} does not match task {task.id!r} of {task.benchmark!r}")
    if json.loads(ground_truth) != task.gold:
        raise ValueError(f"ground_truth of row {task.id!r} differs from the gold answer in its task_json")
    env_class = env_entry(task.benchmark).env_class
    if env_class.multi_step:
        raise ValueError(f"{task.benchmark} is multi-step: its episodes are scored inside the genenv_gym agent loop "
                         "(rows need agent_name genenv_gym), not from one response")
    env = make_text_env([task], (env_kwargs or {}).get(task.benchmark))
    try:
        env.reset(options={"task_id": task.id})
        _, reward, terminated, truncated, step_info = env.step(solution_str)
    finally:
        env.close()
    if not (terminated or truncated):
        raise ValueError(f"{task.benchmark} did not end after one step")
    return {"score": float(reward), "success": bool(step_info.get("success")),
            "error": str(step_info.get("error") or "")}
