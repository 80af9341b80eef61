"""Batches between our loop and veRL's workers: tasks → veRL's agent-loop batch (through ``RLHFDataset``), agent-loop
outputs → trajectories, and update batches in the form veRL's training workers take."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from genenv.envs.task import Task
from genenv.envs.verl_rows import write_verl_parquet
from genenv.trainer.engines.verl_ray.agent_loop import trajectory_of
from genenv.runtime.episodes import Trajectory, per_task

__all__ = [
    "batch_meta", "pad_for_workers", "response_log_probs", "tasks_to_batch", "trajectories_from_output", "update_meta",
    "worker_tensordict",
]


def tasks_to_batch(tasks: Sequence[Task], n: int | Sequence[int], tokenizer, data_config, path: Path):
    """The agent's rollout batch through veRL's own data path: ``tasks`` written as veRL parquet rows
    (`write_verl_parquet`), read back by veRL's ``RLHFDataset`` with ``data_config``
    (veRL's ``data`` section) and the policy's tokenizer, collated with veRL's ``collate_fn``, ``uid`` = task id
    (the GRPO group), each row repeated ``n`` times in place (``[t0, t0, ..., t1, ...]``, as ``RayPPOTrainer.fit``'s
    interleaved repeat) or as often as its own count where ``n`` gives one per task (``DataProto.select_idxs``).

    Returns:
        a ``DataProto`` of ``len(tasks) * n`` rows (``sum(n)`` for counts per task; non-tensor: the parquet
        columns, ``raw_prompt``, ``uid``).
    Raises:
        ValueError: ``RLHFDataset`` dropped or reordered rows (e.g. ``data.filter_overlong_prompts``), or ``n`` has
            not one count per task (`per_task`).
    """
    from verl import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    path.parent.mkdir(parents=True, exist_ok=True)
    write_verl_parquet(list(tasks), path)
    ds = RLHFDataset(str(path), tokenizer, data_config)
    rows = [ds[i] for i in range(len(ds))]
    ids = [r["extra_info"]["task_id"] for r in rows]
    if ids != [t.id for t in tasks]:
        raise ValueError(f"RLHFDataset returned {len(ids)} of {len(tasks)} task rows (or another order); "
                         "check data.max_prompt_length / data.filter_overlong_prompts")
    batch = DataProto.from_single_dict(collate_fn(rows))
    batch.non_tensor_batch["uid"] = np.array([t.id for t in tasks], dtype=object)
    return batch.select_idxs(np.repeat(np.arange(len(tasks)), per_task(n, len(tasks))))


def trajectories_from_output(tasks: Sequence[Task], n: int | Sequence[int], output) -> list[Trajectory]:
    """Trajectories from the ``DataProto`` veRL's agent-loop workers return for `tasks_to_batch` rows played
    by `GymAgentLoop` (``rm_scores`` = the episode's return on the last
    response token; its extra fields ``success``, ``info``, ``turns``, ``segments`` as non-tensor columns), in the
    order of the input rows (``n``: episodes per task, or one count per task, as given to `tasks_to_batch`).

    Returns:
        ``len(tasks) * n`` (or ``sum(n)``) trajectories like `play_episodes`'.
    Raises:
        ValueError: the output rows do not match the tasks (count or task ids).
    """
    nt = output.non_tensor_batch
    rows = [(task, index) for task, size in zip(tasks, per_task(n, len(tasks))) for index in range(size)]
    if len(output) != len(rows):
        raise ValueError(f"{len(output)} agent-loop outputs for {len(rows)} episodes of {len(tasks)} tasks")
    trajs = []
    for i, (task, index) in enumerate(rows):
        if nt["extra_info"][i]["task_id"] != task.id:
            raise ValueError(f"output row {i} is task {nt['extra_info'][i]['task_id']!r}, expected {task.id!r}")
        fields = {k: nt[k][i] for k in ("success", "info", "turns")}
        fields["reward_score"] = float(output.batch["rm_scores"][i].sum())
        trajs.append(trajectory_of(task, index, fields))
    return trajs


def pad_for_workers(batch, divisor: int):
    """Pad an update batch to a multiple of the worker group's size (veRL splits it evenly over data-parallel
    ranks) with copies of its first rows (veRL's ``pad_dataproto_to_divisor``) whose ``response_mask`` and
    ``advantages`` are zeroed: they add no token to ``token-mean`` and are skipped as fully masked sequences by
    the ``seq-mean-*`` modes (``core_algos.agg_loss``), given the real sequence count as ``global_batch_size``.

    Returns:
        ``(padded batch, number of real rows)``.
    """
    from verl.protocol import pad_dataproto_to_divisor

    n_real = len(batch)
    padded, pad = pad_dataproto_to_divisor(batch, divisor)
    if pad:
        for key in ("response_mask", "advantages"):
            padded.batch[key][n_real:] = 0
    return padded, n_real


def worker_tensordict(batch, **meta):
    """A ``DataProto`` as veRL's training workers take it (``RayPPOTrainer._compute_old_log_prob`` /
    ``_update_actor``): a ``TensorDict``, left/right padding removed (``left_right_2_no_padding``: nested
    ``input_ids``/``position_ids``, ``loss_mask`` = ``response_mask``), ``meta_info`` and ``meta`` as non-tensor
    entries."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    td = left_right_2_no_padding(batch.to_tensordict())
    if meta:
        tu.assign_non_tensor(td, **meta)
    return td


def response_log_probs(output, td) -> torch.Tensor:
    """Per-response-token log-probs (``[B, R]``, float32) from a worker's ``compute_log_prob`` /
    ``compute_ref_log_prob`` output for ``td`` (``no_padding_2_padding``)."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import no_padding_2_padding

    return no_padding_2_padding(tu.get(output, "log_probs"), td).float()


def update_meta(batch, n_real: int, actor_config) -> dict[str, Any]:
    """The non-tensor entries ``RayPPOTrainer._update_actor`` gives ``update_actor`` (veRL 0.9.1), for one
    optimizer step per PPO epoch over the whole (padded) batch: ``mini_batch_size`` = rows, ``global_batch_size``
    = real rows, ``epochs`` = ``ppo_epochs``, plus entropy, shuffle and seed settings (``actor_config``: veRL's
    ``ActorConfig`` or the ``actor`` section)."""
    calculate_entropy = bool(actor_config.calculate_entropy) or float(actor_config.entropy_coeff) != 0.0
    return dict(calculate_entropy=calculate_entropy, distillation_use_topk=False, distillation_only=False,
                global_batch_size=n_real, mini_batch_size=len(batch), epochs=int(actor_config.ppo_epochs),
                seed=int(actor_config.data_loader_seed), dataloader_kwargs={"shuffle": bool(actor_config.shuffle)},
                compute_loss=True)


def batch_meta(batch, temperature: float, multi_turn: bool) -> None:
    """Set the ``meta_info`` ``RayPPOTrainer.fit`` / ``_update_actor`` give a training batch: the sampling
    ``temperature`` (log-probs are those of the tempered policy that sampled), ``global_token_num`` (per-row
    tokens, for MFU), ``images_seqlens`` and ``multi_turn`` (``rollout.multi_turn.enable``)."""
    batch.meta_info["temperature"] = float(temperature)
    batch.meta_info["global_token_num"] = batch.batch["attention_mask"].sum(-1).tolist()
    batch.meta_info["images_seqlens"] = []
    batch.meta_info["multi_turn"] = bool(multi_turn)
