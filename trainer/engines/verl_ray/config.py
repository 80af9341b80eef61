"""The veRL config of each role of the ``verl_ray`` engine: veRL's own ``ppo_trainer`` tree composed by Hydra, the
values our config decides, the user's veRL keys, checked by veRL's ``validate_config``."""
from __future__ import annotations

import copy
import functools
import json
from typing import Any, Sequence

from omegaconf import DictConfig, OmegaConf, open_dict

from genenv.trainer.engines.base import ROLES
from genenv.trainer.engines.verl_ray.agent_loop import AGENT_LOOP_NAME
from genenv.trainer.generation import run_generation_budget
from genenv.trainer.settings import RunSettings, checked_run_settings

__all__ = [
    "agent_loop_worker_config", "derived_settings", "lora_rank", "ref_in_actor", "role_config", "validate_role_config",
]


def compose_verl_config(overrides: Sequence[str] = ()) -> DictConfig:
    """veRL's own trainer config: ``verl/trainer/config/ppo_trainer.yaml`` composed by Hydra with ``overrides``
    (Hydra override strings, the syntax of ``python -m verl.trainer.main_ppo``, e.g. ``model_engine=megatron``
    or ``+actor_rollout_ref.rollout.engine_kwargs.vllm.foo=1``).

    Composes in its own Hydra context and restores an already running one (``genenv-train`` is itself a Hydra
    app). Returns a fresh struct-mode ``DictConfig`` (unknown keys raise on merge), unresolved; compositions are
    cached per ``overrides``.
    """
    return copy.deepcopy(_compose_verl_config(tuple(overrides)))


@functools.lru_cache(maxsize=16)
def _compose_verl_config(overrides: tuple[str, ...]) -> DictConfig:
    """`compose_verl_config` without the copy (cached)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    gh = GlobalHydra.instance()
    outer = gh.hydra if gh.is_initialized() else None
    gh.clear()
    try:
        with initialize_config_module(config_module="verl.trainer.config", version_base=None):
            return compose(config_name="ppo_trainer", overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()
        if outer is not None:
            GlobalHydra.instance().initialize(outer)


def model_source(name: str, role: str) -> dict[str, str]:
    """veRL's ``actor_rollout_ref.model`` keys that load ``name`` as ``role``'s weights: ``path`` and, for a LoRA
    checkpoint, ``lora_adapter_path`` (veRL's FSDP engine loads that adapter onto ``path`` to train on).

    ``name`` may be a SmolLM2 alias (the converted local folder,
    `genenv.runtime.models.resolve_model_path`); a training checkpoint of the ``local`` engine (a run dir,
    its ``checkpoints`` folder or one ``iter-N``: `genenv.runtime.models.checkpoint_folder`), whose
    ``role`` folder holds full weights (``path``) or an adapter (``path`` its base model, named in the
    checkpoint's ``backend.json``); anything else (a folder on every node, or a hub id) is passed unchanged.

    Raises:
        ValueError: ``name`` is a checkpoint whose ``role`` folder holds neither (a ``verl_ray`` checkpoint's
            FSDP shards: veRL's ``python -m verl.model_merger merge`` makes a Hugging Face folder of them), or an
            adapter whose base model is itself an adapter.
    """
    from genenv.runtime.models import SMOLLM2_ALIASES, adapter_base, checkpoint_folder, resolve_model_path

    trained = checkpoint_folder(name, role)
    if trained is None:
        return {"path": str(resolve_model_path(name)) if name in SMOLLM2_ALIASES else str(name)}
    if (trained / "config.json").is_file():
        return {"path": str(trained.resolve())}
    base_name = adapter_base(trained)
    if base_name is not None:
        base = model_source(base_name, role)
        if "lora_adapter_path" in base:
            raise ValueError(f"{trained} is an adapter on another adapter ({base['lora_adapter_path']}); veRL loads "
                             f"one: merge the base adapter into a Hugging Face folder first")
        return {"path": base["path"], "lora_adapter_path": str(trained.resolve())}
    raise ValueError(
        f"{trained} holds no Hugging Face weights (config.json) and no LoRA adapter (adapter_config.json); a "
        f"verl_ray checkpoint's shards load as a model after `python -m verl.model_merger merge`")


def derived_settings(settings: RunSettings, role: str) -> dict[str, Any]:
    """The veRL keys whose values our config decides, for ``role`` (nested dict, merged onto veRL's tree).

    From the run's `RunSettings` (this engine's own block is
    ``settings.engine.options``) and
    the role's `RoleConfig`: model (`model_source`),
    LoRA rank/alpha, ``lr``, ``max_grad_norm`` (``optim.clip_grad``), ``clip_ratio`` (low = high), ``ppo_epochs``,
    ``kl_coef`` (``use_kl_loss`` with ``low_var_kl``: the KL leash; 0 disables the reference), ``micro_batch_size``
    (per GPU, for updates and log-prob passes). From the loop: GRPO group size ``n``, sampling temperature, batch
    size (``data.train_batch_size`` = ``ppo_mini_batch_size``: one optimizer step per PPO epoch, as the local
    engine), response length, ``iterations`` (scheduler steps). Always: ``token-mean`` vanilla PPO-clip,
    advantages computed by us (``algorithm.adv_estimator=grpo``, no critic, no in-reward KL), the role's pool
    size as ``trainer.nnodes``/``n_gpus_per_node``; for the agent, the ``genenv_gym`` agent loop.

    Raises:
        TypeError: ``settings`` is not a `RunSettings`.
    """
    st = checked_run_settings(settings, "derived_settings")
    rc = st.roles[role]
    pool = st.engine.options["pools"][role]
    if role == "agent":
        n, temperature = st.agent.n, st.agent.temperature
        batch, response_length = st.agent.batch_tasks, st.agent.response_budget
    else:
        g = st.generation
        n, temperature = g.generations_per_prompt, g.temperature
        batch, response_length = g.prompts_per_iteration, run_generation_budget(st) or g.max_new_tokens
    mbs = int(rc.micro_batch_size)
    rollout: dict[str, Any] = {"n": n, "temperature": temperature, "response_length": response_length,
                               "log_prob_micro_batch_size_per_gpu": mbs, "seed": st.seed}
    if role == "agent":
        rollout["agent"] = {"default_agent_loop": AGENT_LOOP_NAME}
    return {
        "actor_rollout_ref": {
            "model": {**model_source(rc.model, role), "lora_rank": int(rc.lora_r),
                      "lora_alpha": int(rc.lora_alpha)},
            "actor": {
                "optim": {"lr": float(rc.lr), "clip_grad": float(rc.max_grad_norm),
                          "total_training_steps": st.iterations},
                "clip_ratio": float(rc.clip_ratio), "clip_ratio_low": float(rc.clip_ratio),
                "clip_ratio_high": float(rc.clip_ratio), "ppo_epochs": int(rc.ppo_epochs),
                "use_kl_loss": rc.kl_coef > 0, "kl_loss_coef": float(rc.kl_coef), "kl_loss_type": "low_var_kl",
                "loss_agg_mode": "token-mean", "policy_loss": {"loss_mode": "vanilla"},
                "ppo_mini_batch_size": batch, "ppo_micro_batch_size_per_gpu": mbs,
            },
            "ref": {"log_prob_micro_batch_size_per_gpu": mbs},
            "rollout": rollout,
        },
        "algorithm": {"adv_estimator": "grpo", "use_kl_in_reward": False},
        "critic": {"enable": False},
        "data": {"train_batch_size": batch, "max_response_length": response_length},
        "trainer": {"nnodes": int(pool["nnodes"]), "n_gpus_per_node": int(pool["n_gpus_per_node"]),
                    "project_name": "genenv", "experiment_name": f"{st.benchmark}-{role}"},
    }


def role_config(settings: RunSettings, role: str, resolve: bool = True) -> DictConfig:
    """The complete veRL config of ``role``: `compose_verl_config` with ``verl_ray.compose_overrides``,
    then `derived_settings`, then ``verl_ray.common``, then ``verl_ray.<role>`` (later wins; all merged in
    struct mode, so a key veRL does not have raises ``omegaconf.errors.ConfigKeyError``); interpolations resolved.
    ``settings``: the run's `RunSettings` (the ``verl_ray`` block is read from
    ``settings.engine.options``).

    Raises:
        TypeError: ``settings`` is not a `RunSettings`.
        ValueError: ``role`` is not one of `ROLES`.
    """
    st = checked_run_settings(settings, "role_config")
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    vr = st.engine.options
    rcfg = compose_verl_config(list(vr.get("compose_overrides") or []))
    for layer in (derived_settings(st, role), vr.get("common") or {}, vr.get(role) or {}):
        rcfg = OmegaConf.merge(rcfg, OmegaConf.create(layer))
    if resolve:
        OmegaConf.resolve(rcfg)
    return rcfg


def validate_role_config(rcfg: DictConfig) -> None:
    """veRL's own check of a trainer config (``verl.utils.config.validate_config``, as ``main_ppo`` runs it:
    batch divisibility by GPUs, micro-batch settings, ``ActorConfig`` dataclass checks), plus what this engine
    needs: vLLM or SGLang rollout, hybrid engine, no critic, a sampling temperature above 0, a LoRA rank above 0
    where a pre-trained adapter is given (veRL 0.9.1's FSDP engine, ``workers/engine/fsdp/transformer_impl.py``,
    builds LoRA, and loads ``lora_adapter_path``, only when ``lora_rank`` > 0: without it the adapter is ignored).

    Raises:
        ValueError / AssertionError: from veRL's checks, or the engine's own conditions.
    """
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    model = rcfg.actor_rollout_ref.model
    if model.get("lora_adapter_path") is not None and lora_rank(model) <= 0:
        raise ValueError(f"the model loads the LoRA adapter {model.lora_adapter_path}, which veRL ignores without a "
                         "LoRA rank: set the role's policy.lora_r (e.g. agent.policy.lora_r=8) above 0")
    validate_config(config=rcfg, use_reference_policy=need_reference_policy(rcfg), use_critic=need_critic(rcfg))
    if need_critic(rcfg):
        raise ValueError("engine=verl_ray computes GRPO/RWR advantages itself: set critic.enable=false")
    if not rcfg.actor_rollout_ref.hybrid_engine:
        raise ValueError("engine=verl_ray needs actor_rollout_ref.hybrid_engine=true (rollout on the training GPUs)")
    if float(rcfg.actor_rollout_ref.rollout.temperature) <= 0:
        raise ValueError("engine=verl_ray trains on sampled rollouts: rollout.temperature (agent.temperature / "
                         "generation.temperature) must be > 0, as the workers scale logits by it")
    if rcfg.actor_rollout_ref.rollout.name not in ("vllm", "sglang"):
        raise ValueError("engine=verl_ray supports vllm and sglang rollout, got "
                         f"{rcfg.actor_rollout_ref.rollout.name!r}")


def lora_rank(model_cfg) -> int:
    """The LoRA rank of a veRL model config (``actor_rollout_ref.model``), read as veRL 0.9.1's trainer reads it
    (``verl/trainer/ppo/ray_trainer.py``, ``RayPPOTrainer.__init__``): the nested ``lora.rank`` (the Megatron
    engine's block) when positive, else ``lora_rank`` (the FSDP engine's key); 0 without LoRA."""
    rank = int((model_cfg.get("lora") or {}).get("rank", 0) or 0)
    return rank if rank > 0 else int(model_cfg.get("lora_rank", 0) or 0)


def ref_in_actor(model_cfg) -> bool:
    """Whether the reference policy is the actor without its LoRA adapter (veRL's ``ref_in_actor``, same source
    as `lora_rank`): a LoRA rank > 0, or a pre-trained adapter in ``lora_adapter_path``. Then no separate
    reference model is built and reference log-probs come from the actor with ``no_lora_adapter``."""
    return lora_rank(model_cfg) > 0 or model_cfg.get("lora_adapter_path") is not None


def agent_loop_worker_config(rcfg: DictConfig, max_new_tokens: int, env_kwargs: dict[str, Any] | None = None,
                             env_server: str | None = None) -> DictConfig:
    """The config veRL's agent-loop workers get: the agent's resolved veRL config plus the ``genenv`` block
    `GymAgentLoop` reads (``max_new_tokens`` per turn, per-benchmark
    ``env_kwargs``, ``env_server``: a ``genenv-serve`` URL to play the episodes on); the episode's response budget
    is veRL's own ``rollout.response_length``."""
    config = OmegaConf.create(OmegaConf.to_container(rcfg, resolve=True))
    with open_dict(config):
        config.genenv = {"max_new_tokens": int(max_new_tokens), "env_kwargs": json.loads(json.dumps(env_kwargs or {})),
                         "env_server": env_server or None}
    return config
