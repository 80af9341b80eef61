"""GRPO update built from veRL's own algorithm functions, run on CPU (or one GPU) by our local back-end.

Per batch of trajectories (``n`` per task, the group key ``uid`` = task id):

1. outcome rewards → ``token_level_rewards`` (the reward on the last response token);
2. advantages: ``core_algos.get_adv_estimator_fn("grpo")`` (group-normalised, Shao et al. 2024, as in veRL);
   groups whose rewards are all equal carry no signal (advantage 0) and are **dropped and counted**;
3. ``old_log_prob`` under the policy before the update, ``ref_log_prob`` under the frozen reference;
4. loss = ``core_algos.get_policy_loss_fn("vanilla")`` (PPO-clip) + ``kl_coef`` ×
   ``agg_loss(kl_penalty(log_prob, ref_log_prob, "low_var_kl"))``, aggregated ``token-mean`` over the batch;
5. one AdamW step per PPO epoch, gradient accumulation over micro-batches, gradient clipping.

The same function serves the environment policy's GRPO option (rewards = R_env, groups = prompts). Steps 1-2
(:func:`prepare_update`) are shared with the distributed ``verl_ray`` engine (:mod:`genenv.trainer.verl_ray`),
whose veRL actor workers run steps 3-5 with the same veRL loss functions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
from omegaconf import OmegaConf

from genenv.trainer.tokens import build_batch, response_logprobs


@dataclass
class Sample:
    """One scored sequence for an update: token ids, scalar ``reward`` and its group key ``uid``.

    ``weight`` is used by RWR (``exp(λ·R)``); ``response_mask`` (multi-turn episodes) marks the policy's own
    tokens with 1 and environment tokens with 0 (``None``: every response token is the policy's).
    """

    prompt_ids: list[int]
    response_ids: list[int]
    reward: float
    uid: str
    weight: float = 1.0
    response_mask: list[int] | None = None


def grpo_advantages(rewards: Sequence[float], uids: Sequence[str], response_mask: torch.Tensor,
                    norm_by_std: bool = True) -> torch.Tensor:
    """veRL's GRPO outcome advantage for scalar ``rewards`` grouped by ``uids``; ``[B, R]`` like the mask."""
    from verl.trainer.ppo import core_algos

    token_rewards = torch.zeros(response_mask.shape, dtype=torch.float32)
    last = response_mask.sum(-1).long() - 1
    token_rewards[torch.arange(len(rewards)), last] = torch.tensor(list(rewards), dtype=torch.float32)
    fn = core_algos.get_adv_estimator_fn("grpo")
    adv, _ = fn(token_level_rewards=token_rewards, response_mask=response_mask.float(),
                index=np.array(list(uids), dtype=object), norm_adv_by_std_in_grpo=norm_by_std)
    return adv


def informative_groups(rewards: Sequence[float], uids: Sequence[str]) -> tuple[list[int], int, int]:
    """Indices of samples in groups whose rewards are not all equal, the number of such groups, and the number
    of dropped (all-equal) groups. A group of one sample counts as all-equal."""
    groups: dict[str, list[int]] = {}
    for i, u in enumerate(uids):
        groups.setdefault(u, []).append(i)
    keep, kept, dropped = [], 0, 0
    for idx in groups.values():
        vals = [rewards[i] for i in idx]
        if len(idx) > 1 and max(vals) - min(vals) > 1e-9:
            keep += idx
            kept += 1
        else:
            dropped += 1
    return sorted(keep), kept, dropped


def prepare_update(samples: Sequence[Sample], pad_id: int, mode: str = "grpo"):
    """Steps 1-2 of an update, shared by every engine: the samples that carry signal, as one veRL batch with
    advantages.

    ``mode="grpo"``: groups (``uid``) whose rewards are all equal are dropped and counted; advantages from
    :func:`grpo_advantages`. ``mode="rwr"``: every sample is kept; advantage = its ``weight`` normalised to mean 1
    over the batch, on every response token (see :mod:`genenv.trainer.rwr`).

    Returns:
        ``(batch, metrics)``: ``batch`` is the :func:`~genenv.trainer.tokens.build_batch` ``DataProto`` plus
        ``advantages`` (``[B, R]``, float32) and the non-tensor ``uid``, or ``None`` when no sample carries
        signal; ``metrics`` holds ``samples``, ``groups_kept``, ``groups_dropped`` and ``skipped`` (True).
    Raises:
        ValueError: unknown ``mode``.
    """
    if mode not in ("grpo", "rwr"):
        raise ValueError(f"unknown update mode {mode!r}")
    metrics: dict[str, Any] = {"samples": len(samples), "groups_kept": 0, "groups_dropped": 0, "skipped": True}
    if not samples:
        return None, metrics
    if mode == "grpo":
        keep, kept, dropped = informative_groups([s.reward for s in samples], [s.uid for s in samples])
        metrics.update(groups_kept=kept, groups_dropped=dropped)
        samples = [samples[i] for i in keep]
        if not samples:
            return None, metrics
    batch = build_batch([s.prompt_ids for s in samples], [s.response_ids for s in samples], pad_id,
                        non_tensors={"uid": [s.uid for s in samples]},
                        response_masks=[s.response_mask for s in samples])
    mask = batch.batch["response_mask"].float()
    if mode == "grpo":
        adv = grpo_advantages([s.reward for s in samples], [s.uid for s in samples], batch.batch["response_mask"])
    else:
        w = torch.tensor([s.weight for s in samples], dtype=torch.float32)
        adv = (w / w.mean()).unsqueeze(-1) * mask  # normalised weights, mean 1 over the batch
    batch.batch["advantages"] = adv
    return batch, metrics


def policy_update(model, ref_model, optimizer, samples: Sequence[Sample], pad_id: int, *, mode: str = "grpo",
                  kl_coef: float = 0.001, clip_ratio: float = 0.2, ppo_epochs: int = 1, micro_batch_size: int = 4,
                  max_grad_norm: float = 1.0, autocast_dtype: torch.dtype | None = torch.bfloat16,
                  ref_context=None) -> dict[str, Any]:
    """One policy update on ``samples`` with veRL's loss functions, in this process (the local engine).

    Steps 1-2 are :func:`prepare_update` (shared with the ``verl_ray`` engine); steps 3-5 run here.

    Args:
        model: the trainable causal LM; ``ref_model`` the frozen reference (or ``None`` with ``ref_context``, a
            context manager under which ``model`` acts as the reference, e.g. a LoRA model's
            ``disable_adapter``).
        mode: ``"grpo"`` (advantages from grouped rewards, groups with equal rewards dropped) or ``"rwr"``
            (reward-weighted regression: advantage = the sample's normalised ``weight``, no clipping needed as
            the ratio is 1 at the only step; see :mod:`genenv.trainer.rwr`).
        kl_coef: weight of the ``low_var_kl`` penalty to the reference (the paper's KL leash).
    Returns:
        metrics: ``loss``, ``pg_loss``, ``kl``, ``samples``, ``groups_kept``, ``groups_dropped``, ``skipped``
        (True when no sample carried signal), ``grad_norm``.
    """
    from verl.trainer.ppo import core_algos

    batch, metrics = prepare_update(samples, pad_id, mode)
    if batch is None:
        return metrics
    mask = batch.batch["response_mask"].float()
    model.eval()
    batch.batch["old_log_probs"] = response_logprobs(model, batch, micro_batch_size, autocast_dtype=autocast_dtype)
    if ref_model is not None:
        batch.batch["ref_log_prob"] = response_logprobs(ref_model, batch, micro_batch_size,
                                                        autocast_dtype=autocast_dtype)
    else:
        with ref_context():
            batch.batch["ref_log_prob"] = response_logprobs(model, batch, micro_batch_size,
                                                            autocast_dtype=autocast_dtype)
    total_tokens = int(mask.sum().item())
    cfg = OmegaConf.create({"clip_ratio": clip_ratio, "clip_ratio_low": clip_ratio, "clip_ratio_high": clip_ratio,
                            "clip_ratio_c": 3.0, "global_batch_info": {"dp_size": 1, "batch_num_tokens": total_tokens,
                                                                       "global_batch_size": len(batch)}})
    policy_loss_fn = core_algos.get_policy_loss_fn("vanilla")
    model.train()
    sums = {"loss": 0.0, "pg_loss": 0.0, "kl": 0.0}
    for _ in range(ppo_epochs):
        optimizer.zero_grad(set_to_none=True)
        for start in range(0, len(batch), micro_batch_size):
            mb = batch.slice(start, start + micro_batch_size)
            log_prob = response_logprobs(model, mb, micro_batch_size, grad=True, autocast_dtype=autocast_dtype)
            rmask = mb.batch["response_mask"].float()
            pg_loss, _ = policy_loss_fn(old_log_prob=mb.batch["old_log_probs"], log_prob=log_prob,
                                        advantages=mb.batch["advantages"], response_mask=rmask,
                                        loss_agg_mode="token-mean", config=cfg)
            kl_mat = core_algos.kl_penalty(log_prob, mb.batch["ref_log_prob"], "low_var_kl")
            kl = core_algos.agg_loss(kl_mat, rmask, "token-mean", batch_num_tokens=total_tokens)
            loss = pg_loss + kl_coef * kl
            loss.backward()
            sums["loss"] += loss.item()
            sums["pg_loss"] += pg_loss.item()
            sums["kl"] += kl.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(
            [p for p in model.parameters() if p.requires_grad], max_grad_norm)
        optimizer.step()
    model.eval()
    metrics.update({k: v / ppo_epochs for k, v in sums.items()}, grad_norm=float(grad_norm), skipped=False,
                   tokens=total_tokens, samples=len(batch))
    return metrics
