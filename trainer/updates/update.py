"""A policy update built from veRL's own algorithm functions, run on CPU (or one GPU) by the local engine.

Per batch of scored samples (`Sample`):

1. the samples that carry signal and their advantages, by the named advantage estimator
   (`genenv.trainer.updates.advantages`: ``grpo`` drops groups whose rewards are all equal and counts them;
   ``rwr`` keeps every sample with its normalised weight);
2. the veRL batch (`build_batch`) with ``advantages`` = the sample's scalar on
   every response token of its own (``response_mask``);
3. ``ref_log_prob`` under the frozen reference and ``old_log_prob`` under the policy before the update (with one
   PPO epoch the policy of the only step is that policy, so its own log-probs, detached, serve: the ratio is 1 and
   one forward pass of the batch is saved);
4. loss = ``core_algos.get_policy_loss_fn("vanilla")`` (PPO-clip) + ``kl_coef`` ×
   ``agg_loss(kl_penalty(log_prob, ref_log_prob, "low_var_kl"))``, aggregated ``token-mean`` over the batch;
5. one AdamW step per PPO epoch, gradient accumulation over micro-batches (samples sorted by length, so each
   micro-batch pads little: `response_logprobs` runs on its own width; the
   token-mean over the whole batch makes the gradient independent of the order), gradient clipping.

The same function serves the environment policy (RWR, or GRPO on R_env with groups = prompts). Steps 1-2
(`prepare_update`) are shared with the distributed ``verl_ray`` engine
(`genenv.trainer.engines.verl_ray.backend`),
whose veRL actor workers run steps 3-5 with the same veRL loss functions.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch
from omegaconf import OmegaConf

from genenv.trainer.updates.advantages import get_advantage
from genenv.trainer.updates.batch import build_batch, place_batch, prompt_groups, response_logprobs
from genenv.trainer.updates.sample import Sample

__all__ = ["group_length_order", "policy_update", "prepare_update", "sampler_gap"]


def prepare_update(samples: Sequence[Sample], pad_id: int, estimator: str = "grpo", sampler_log_probs: bool = False):
    """Steps 1-2 of an update, shared by every engine: the samples that carry signal, as one veRL batch with
    advantages.

    Returns:
        ``(batch, metrics)``: ``batch`` is the `build_batch` ``DataProto`` plus
        ``advantages`` (``[B, R]``, float32), the non-tensor ``uid`` and, with ``sampler_log_probs`` when some
        kept sample carries the sampler's log-probs (one per response token), ``rollout_log_probs`` (``[B, R]``,
        float32, 0 past each response and on samples without them) and ``rollout_log_probs_reported`` (``[B]``,
        bool: which samples carry them; the local engine's gap report, `sampler_gap`), or ``None`` when no sample
        carries signal;
        ``metrics`` holds ``samples``, ``groups_kept``, ``groups_dropped`` and ``skipped`` (True).
    Raises:
        ValueError: unknown ``estimator`` (see `ADVANTAGES`).
    """
    advantage = get_advantage(estimator)
    metrics: dict[str, Any] = {"samples": len(samples), "groups_kept": 0, "groups_dropped": 0, "skipped": True}
    if not samples:
        return None, metrics
    kept, advantages, extra = advantage(samples)
    metrics.update(extra)
    if not kept:
        return None, metrics
    batch = build_batch([s.prompt_ids for s in kept], [s.response_ids for s in kept], pad_id,
                        non_tensors={"uid": [s.uid for s in kept]},
                        response_masks=[s.response_mask for s in kept])
    mask = batch.batch["response_mask"].float()
    batch.batch["advantages"] = torch.tensor(advantages, dtype=torch.float32).unsqueeze(-1) * mask
    reported = [s.rollout_logprobs is not None and len(s.rollout_logprobs) == len(s.response_ids) for s in kept]
    if sampler_log_probs and any(reported):
        rollout = torch.zeros_like(mask)
        for i, s in enumerate(kept):
            if reported[i]:
                rollout[i, :len(s.rollout_logprobs)] = torch.tensor(s.rollout_logprobs, dtype=torch.float32)
        batch.batch["rollout_log_probs"] = rollout
        batch.batch["rollout_log_probs_reported"] = torch.tensor(reported, dtype=torch.bool)
    return batch, metrics


def policy_update(model, ref_model, optimizer, samples: Sequence[Sample], pad_id: int, *, estimator: str = "grpo",
                  kl_coef: float = 0.001, clip_ratio: float = 0.2, ppo_epochs: int = 1, micro_batch_size: int = 4,
                  max_grad_norm: float = 1.0, autocast_dtype: torch.dtype | None = torch.bfloat16,
                  ref_context=None) -> dict[str, Any]:
    """One policy update on ``samples`` with veRL's loss functions, in this process (the local engine).

    Steps 1-2 are `prepare_update` (shared with the ``verl_ray`` engine); steps 3-5 run here.

    Args:
        model: the trainable causal LM; ``ref_model`` the frozen reference (or ``None`` with ``ref_context``, a
            context manager under which ``model`` acts as the reference, e.g. a LoRA model's
            ``disable_adapter``).
        estimator: the advantage estimator (`genenv.trainer.updates.advantages`): ``"grpo"`` (grouped rewards,
            groups with equal rewards dropped) or ``"rwr"`` (advantage = the sample's normalised ``weight``; the
            ratio is 1 at the only step, so clipping never acts).
        kl_coef: weight of the ``low_var_kl`` penalty to the reference (the paper's KL leash).
    Returns:
        metrics: ``loss``, ``pg_loss``, ``kl``, ``samples``, ``groups_kept``, ``groups_dropped``, ``skipped``
        (True when no sample carried signal), ``grad_norm``; with the sampler's log-probs on every sample, the
        sampler-vs-trainer gap (`sampler_gap`).
    """
    from verl.trainer.ppo import core_algos

    batch, metrics = prepare_update(samples, pad_id, estimator, sampler_log_probs=True)
    if batch is None:
        return metrics
    place_batch(batch, model)  # advantages, masks and log-probs on the model's device
    batch.reorder(group_length_order(batch))
    mask = batch.batch["response_mask"].float()
    model.eval()
    on_policy = ppo_epochs == 1  # the only step's policy is the old policy: old log-probs = its own, detached
    if not on_policy:
        batch.batch["old_log_probs"] = response_logprobs(model, batch, micro_batch_size,
                                                         autocast_dtype=autocast_dtype)
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
    first_log_probs = []  # the trainer's log-probs before any step (first epoch), for the sampler gap
    for epoch in range(ppo_epochs):
        optimizer.zero_grad(set_to_none=True)
        for start in range(0, len(batch), micro_batch_size):
            mb = batch.slice(start, start + micro_batch_size)
            log_prob = response_logprobs(model, mb, micro_batch_size, grad=True, autocast_dtype=autocast_dtype)
            rmask = mb.batch["response_mask"].float()
            old_log_prob = log_prob.detach() if on_policy else mb.batch["old_log_probs"]
            if epoch == 0:
                first_log_probs.append(old_log_prob)
            pg_loss, _ = policy_loss_fn(old_log_prob=old_log_prob, log_prob=log_prob,
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
    if "rollout_log_probs" in batch.batch.keys():
        metrics.update(sampler_gap(batch, torch.cat(first_log_probs)))
    return metrics


def sampler_gap(batch, trainer_log_probs: torch.Tensor) -> dict[str, float]:
    """How far the sampler's log-probs (``batch.batch["rollout_log_probs"]``, ``[B, R]``) lie from the trainer's
    (``trainer_log_probs``, ``[B, R]``: the trained policy's before the step, as the update computes them) on the
    trained tokens (``response_mask``) of the samples whose sampler reported them
    (``rollout_log_probs_reported``; llama.cpp leaves out a sample's last tokens when they end inside a UTF-8
    character).

    veRL's own report (``verl.utils.debug.metrics.calculate_debug_metrics``, which veRL's trainer logs when its
    rollout returns log-probs): ``rollout_probs_diff_{max,mean,std}``, the absolute difference of the two
    *probabilities* per token, and ``rollout_actor_probs_pearson_corr``; plus ``rollout_log_probs_diff_mean``
    (mean absolute difference of the log-probs, nats) and ``rollout_ratio_mean`` (mean of
    ``exp(trainer - sampler)``, the importance ratio a sampler-corrected update would apply). ``{}`` when no
    token is trained.
    """
    from verl import DataProto
    from verl.utils.debug.metrics import calculate_debug_metrics

    reported = batch.batch["rollout_log_probs_reported"].to(batch.batch["response_mask"].device)
    response_mask = batch.batch["response_mask"] * reported.unsqueeze(-1).to(batch.batch["response_mask"].dtype)
    mask = response_mask.bool()
    if not bool(mask.any()):
        return {}
    rollout = batch.batch["rollout_log_probs"].to(trainer_log_probs.device)
    trainer = trainer_log_probs.detach().float()
    view = DataProto.from_single_dict({"rollout_log_probs": rollout, "old_log_probs": trainer,
                                       "response_mask": response_mask,
                                       "responses": batch.batch["responses"]})
    out = {k.split("/", 1)[-1]: float(v) for k, v in calculate_debug_metrics(view).items()}
    delta = (trainer - rollout)[mask]
    out.update(rollout_log_probs_diff_mean=float(delta.abs().mean()), rollout_ratio_mean=float(delta.exp().mean()))
    return out


def group_length_order(batch) -> torch.Tensor:
    """The order in which `policy_update` cuts micro-batches (``LongTensor [B]``): samples that share a
    prompt stay together (so `response_logprobs` runs their prompt once),
    groups by their longest sample and samples within a group by length, longest first (similar lengths share
    a micro-batch, so little padding is computed); ties keep the batch order. The index is on the CPU wherever
    the batch is: veRL's ``DataProto.reorder`` reads it with ``.numpy()``."""
    P = batch.batch["prompts"].shape[1]
    lengths = batch.batch["attention_mask"].sum(dim=1).tolist()
    group_of = [0] * len(lengths)
    for g, rows in enumerate(prompt_groups(batch.batch["prompts"], batch.batch["attention_mask"][:, :P])):
        for i in rows.tolist():
            group_of[i] = g
    longest = {g: max(n for n, h in zip(lengths, group_of) if h == g) for g in set(group_of)}
    order = sorted(range(len(lengths)), key=lambda i: (-longest[group_of[i]], group_of[i], -lengths[i], i))
    return torch.tensor(order, dtype=torch.long)
