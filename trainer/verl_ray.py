"""The ``verl_ray`` engine: the co-evolution loop's :class:`~genenv.trainer.backend.Backend` on veRL's Ray workers.

Each role (``agent``, ``env``) gets, for the whole run:

- its own veRL config: veRL's ``ppo_trainer`` tree composed by Hydra (:func:`compose_verl_config`), then the
  values our config decides (:func:`derived_settings`: model, lr, KL leash, clip ratio, epochs, micro-batches,
  temperature, lengths, GPUs), then the user's veRL keys (``verl_ray.common`` and ``verl_ray.<role>``), checked
  by veRL's own ``validate_config`` (:func:`role_config`);
- its own Ray resource pool (:func:`resource_pool_manager`: ``genenv_agent_pool``, ``genenv_env_pool``, by
  veRL's ``ResourcePoolManager``, which also refuses a cluster without the GPUs before anything is placed);
- one worker group of veRL's hybrid actor/rollout/reference worker (FSDP training and a vLLM server per replica
  on the same GPUs; :class:`~genenv.trainer.verl_workers.GenEnvActorRolloutRefWorker`), veRL's
  ``LLMServerManager`` for its vLLM replicas (numbered after the other role's, see
  :mod:`genenv.trainer.verl_workers`) and ``CheckpointEngineManager`` for the weight sync, built as
  ``RayPPOTrainer.init_workers`` builds them (``verl/trainer/ppo/ray_trainer.py``), kept alive across
  iterations;
- for the agent, veRL's ``AgentLoopManager`` running our ``genenv_gym`` agent loop over parquet rows of the
  tasks read back through veRL's ``RLHFDataset`` (:func:`tasks_to_batch`, :meth:`VerlRayBackend.rollout_agent_loop`).

The loop drives it step by step (no veRL trainer is rebuilt): ``policy(role).generate`` sends token ids to the
role's vLLM servers through veRL's ``LLMServerClient``; ``update(role, samples, mode)`` takes the batch and
advantages of :func:`genenv.trainer.grpo.prepare_update` (the same as the local engine), pads it to the worker
group (padding rows carry no loss), puts the vLLM replicas to sleep, has the workers compute old and reference
log-probs and run the actor update (veRL's ``ppo_loss``: vanilla PPO-clip + ``low_var_kl`` to the reference),
then syncs the new weights into vLLM (``update_weights``). ``save``/``load`` use the workers' checkpoint methods.

Needs GPUs: everything that starts workers (:class:`VerlRayBackend`). Runs on CPU and is tested there: config
composition and validation, resource-pool specs and the early refusal, parquet → ``RLHFDataset`` batches,
agent-loop outputs → trajectories, the worker-side update batch, and :class:`VerlPolicy` over any generate client.
"""
from __future__ import annotations

import asyncio
import copy
import functools
import json
import math
from pathlib import Path
from typing import Any, Sequence
from uuid import uuid4

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf, open_dict

from genenv.envs.task import Task, write_verl_parquet
from genenv.trainer.grpo import Sample, prepare_update
from genenv.trainer.policies import Generation, Prompt
from genenv.trainer.rollout import Trajectory

ROLES = ("agent", "env")
POOLS = {"agent": "genenv_agent_pool", "env": "genenv_env_pool"}
AGENT_LOOP = "genenv_gym"


# ----------------------------------------------------------------------------------------------------- config
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
    """:func:`compose_verl_config` without the copy (cached)."""
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


def resolve_model(name: str) -> str:
    """The model path veRL's workers load: the SmolLM2 aliases resolve to the converted local folder
    (:func:`genenv.trainer.models.resolve_model_path`), anything else (a folder on every node, or a hub id) is
    passed to veRL unchanged."""
    from genenv.trainer.models import SMOLLM2_ALIASES, resolve_model_path

    return str(resolve_model_path(name)) if name in SMOLLM2_ALIASES else str(name)


def agent_response_length(cfg) -> int:
    """Response tokens per agent episode: ``agent.response_length``, else ``agent.max_new_tokens`` times
    ``agent.max_turns`` for multi-step benchmarks and once for single-step ones (the vLLM servers and the
    agent-loop workers pad every episode to it)."""
    if cfg.agent.get("response_length"):
        return int(cfg.agent.response_length)
    from genenv.benchmarks.registry import get_benchmark

    multi = get_benchmark(cfg.benchmark.name).env_class.multi_step
    return int(cfg.agent.max_new_tokens) * (int(cfg.agent.get("max_turns", 8)) if multi else 1)


def derived_settings(cfg, role: str) -> dict[str, Any]:
    """The veRL keys whose values our config decides, for ``role`` (nested dict, merged onto veRL's tree).

    From ``<role>.policy`` (:class:`~genenv.trainer.backend.RoleConfig`, the local engine's settings): model,
    LoRA rank/alpha, ``lr``, ``max_grad_norm`` (``optim.clip_grad``), ``clip_ratio`` (low = high), ``ppo_epochs``,
    ``kl_coef`` (``use_kl_loss`` with ``low_var_kl``: the KL leash; 0 disables the reference), ``micro_batch_size``
    (per GPU, for updates and log-prob passes). From the loop: GRPO group size ``n``, sampling temperature, batch
    size (``data.train_batch_size`` = ``ppo_mini_batch_size``: one optimizer step per PPO epoch, as the local
    engine), response length, ``iterations`` (scheduler steps). Always: ``token-mean`` vanilla PPO-clip,
    advantages computed by us (``algorithm.adv_estimator=grpo``, no critic, no in-reward KL), the role's pool
    size as ``trainer.nnodes``/``n_gpus_per_node``; for the agent, the ``genenv_gym`` agent loop.
    """
    from genenv.trainer.backend import RoleConfig

    rc = RoleConfig(**dict(cfg[role].policy))
    pool = cfg.verl_ray.pools[role]
    if role == "agent":
        n, temperature = int(cfg.agent.n), float(cfg.agent.temperature)
        batch, response_length = int(cfg.agent.batch_tasks), agent_response_length(cfg)
    else:
        g = cfg.generation
        n, temperature = int(g.generations_per_prompt), float(g.temperature)
        batch, response_length = int(g.prompts_per_iteration), int(g.max_new_tokens)
    mbs = int(rc.micro_batch_size)
    rollout: dict[str, Any] = {"n": n, "temperature": temperature, "response_length": response_length,
                               "log_prob_micro_batch_size_per_gpu": mbs, "seed": int(cfg.seed)}
    if role == "agent":
        rollout["agent"] = {"default_agent_loop": AGENT_LOOP}
    return {
        "actor_rollout_ref": {
            "model": {"path": resolve_model(rc.model), "lora_rank": int(rc.lora_r), "lora_alpha": int(rc.lora_alpha)},
            "actor": {
                "optim": {"lr": float(rc.lr), "clip_grad": float(rc.max_grad_norm),
                          "total_training_steps": int(cfg.iterations)},
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
        "trainer": {"nnodes": int(pool.nnodes), "n_gpus_per_node": int(pool.n_gpus_per_node),
                    "project_name": "genenv", "experiment_name": f"{cfg.benchmark.name}-{role}"},
    }


def role_config(cfg, role: str, resolve: bool = True) -> DictConfig:
    """The complete veRL config of ``role``: :func:`compose_verl_config` with ``verl_ray.compose_overrides``,
    then :func:`derived_settings`, then ``verl_ray.common``, then ``verl_ray.<role>`` (later wins; all merged in
    struct mode, so a key veRL does not have raises ``omegaconf.errors.ConfigKeyError``); interpolations resolved.

    Raises:
        ValueError: ``role`` is not ``agent`` or ``env``.
    """
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, got {role!r}")
    vr = cfg.verl_ray
    rcfg = compose_verl_config(list(vr.get("compose_overrides") or []))
    for layer in (derived_settings(cfg, role), vr.get("common") or {}, vr.get(role) or {}):
        rcfg = OmegaConf.merge(rcfg, OmegaConf.create(OmegaConf.to_container(layer, resolve=True)
                                                      if OmegaConf.is_config(layer) else layer))
    if resolve:
        OmegaConf.resolve(rcfg)
    return rcfg


def validate_role_config(rcfg: DictConfig) -> None:
    """veRL's own check of a trainer config (``verl.utils.config.validate_config``, as ``main_ppo`` runs it:
    batch divisibility by GPUs, micro-batch settings, ``ActorConfig`` dataclass checks), plus what this engine
    needs: vLLM or SGLang rollout, hybrid engine, no critic, a sampling temperature above 0.

    Raises:
        ValueError / AssertionError: from veRL's checks, or the engine's own conditions.
    """
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

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


def agent_loop_worker_config(rcfg: DictConfig, max_turns: int, max_new_tokens: int,
                             env_kwargs: dict[str, Any] | None = None) -> DictConfig:
    """The config veRL's agent-loop workers get: the agent's resolved veRL config plus the ``genenv`` block
    ``genenv_gym`` reads (``max_turns``, ``max_new_tokens`` per turn, per-benchmark ``env_kwargs``)."""
    config = OmegaConf.create(OmegaConf.to_container(rcfg, resolve=True))
    with open_dict(config):
        config.genenv = {"max_turns": int(max_turns), "max_new_tokens": int(max_new_tokens),
                         "env_kwargs": json.loads(json.dumps(env_kwargs or {}))}
    return config


# ------------------------------------------------------------------------------------------- resource pools
def resource_pool_spec(cfg) -> dict[str, list[int]]:
    """``{pool name: [GPUs on node 1, GPUs on node 2, ...]}`` for veRL's ``ResourcePoolManager``: one pool per
    role from ``verl_ray.pools.<role>.{nnodes, n_gpus_per_node}``.

    Raises:
        ValueError: a pool with no node or no GPU.
    """
    spec = {}
    for role in ROLES:
        p = cfg.verl_ray.pools[role]
        if int(p.nnodes) < 1 or int(p.n_gpus_per_node) < 1:
            raise ValueError(f"verl_ray.pools.{role} needs nnodes >= 1 and n_gpus_per_node >= 1, got {dict(p)}")
        spec[POOLS[role]] = [int(p.n_gpus_per_node)] * int(p.nnodes)
    return spec


def resource_pool_manager(cfg):
    """veRL's ``ResourcePoolManager`` over :func:`resource_pool_spec`, mapping each role to its pool."""
    from verl.single_controller.ray import ResourcePoolManager

    return ResourcePoolManager(resource_pool_spec=resource_pool_spec(cfg), mapping=dict(POOLS))


def check_cluster_gpus(spec: dict[str, list[int]], gpus_per_node: Sequence[float]) -> None:
    """Refuse, before any placement group exists, a cluster that cannot hold the pools: Ray waits forever for a
    placement group that does not fit instead of failing.

    Args:
        spec: :func:`resource_pool_spec`.
        gpus_per_node: GPUs available on each alive Ray node.
    Raises:
        RuntimeError: fewer GPUs in total than the pools need, or a pool needs more GPUs on one node than any
            node has; the message says what the engine needs and how to get it.
    """
    need = sum(sum(v) for v in spec.values())
    have = float(sum(gpus_per_node))
    widest = max(gpus_per_node, default=0)
    detail = ", ".join(f"{name}: {len(v)} node(s) x {v[0]} GPU(s)" for name, v in spec.items())
    problem = None
    if have < need:
        problem = f"the Ray cluster has {have:g} GPU(s) in total"
    elif any(v[0] > widest for v in spec.values()):
        problem = f"no Ray node has more than {widest:g} GPU(s)"
    if problem:
        raise RuntimeError(
            f"engine=verl_ray needs {need} GPU(s) for its two resource pools ({detail}), but {problem}. "
            "Run it on a Ray cluster of GPU nodes (`ray start --head` / `ray start --address=...`, then "
            "`ray job submit`, see docs/distributed.md), size verl_ray.pools.{agent,env} to the cluster, "
            "or use engine=local on one machine.")


def cluster_gpus_per_node() -> list[float]:
    """GPUs available on each alive node of the connected Ray cluster (``ray.nodes()``)."""
    import ray

    return [float(n["Resources"].get("GPU", 0)) for n in ray.nodes() if n.get("Alive")]


# ------------------------------------------------------------------------------------------------------ data
def tasks_to_batch(tasks: Sequence[Task], n: int, tokenizer, data_config, path: Path):
    """The agent's rollout batch through veRL's own data path: ``tasks`` written as veRL parquet rows
    (:func:`~genenv.envs.task.write_verl_parquet`), read back by veRL's ``RLHFDataset`` with ``data_config``
    (veRL's ``data`` section) and the policy's tokenizer, collated with veRL's ``collate_fn``, ``uid`` = task id
    (the GRPO group), repeated ``n`` times interleaved (``[t0, t0, ..., t1, ...]``, as ``RayPPOTrainer.fit``).

    Returns:
        a ``DataProto`` of ``len(tasks) * n`` rows (non-tensor: the parquet columns, ``raw_prompt``, ``uid``).
    Raises:
        ValueError: ``RLHFDataset`` dropped or reordered rows (e.g. ``data.filter_overlong_prompts``).
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
    return batch.repeat(repeat_times=n, interleave=True)


def trajectories_from_output(tasks: Sequence[Task], n: int, output) -> list[Trajectory]:
    """Trajectories from the ``DataProto`` veRL's agent-loop workers return for :func:`tasks_to_batch` rows run
    by ``genenv_gym`` (prompts left-padded, responses right-padded, ``rm_scores`` = episode return on the last
    response token, extra fields ``success``, ``texts``, ``info``), in the order of the input rows.

    Returns:
        ``len(tasks) * n`` trajectories like :func:`genenv.trainer.agent_loop.rollout_agent_loop`'s, with
        ``info["response_mask"]`` (1 on policy tokens, 0 on environment tokens).
    Raises:
        ValueError: the output rows do not match the tasks (count or task ids).
    """
    b, nt = output.batch, output.non_tensor_batch
    if len(output) != len(tasks) * n:
        raise ValueError(f"{len(output)} agent-loop outputs for {len(tasks)} tasks x {n}")
    prompt_width = b["prompts"].shape[1]
    trajs = []
    for i in range(len(output)):
        task = tasks[i // n]
        if nt["extra_info"][i]["task_id"] != task.id:
            raise ValueError(f"output row {i} is task {nt['extra_info'][i]['task_id']!r}, expected {task.id!r}")
        pmask = b["attention_mask"][i, :prompt_width].bool()
        n_resp = int(b["attention_mask"][i, prompt_width:].sum())
        info = dict(nt["info"][i] or {})
        info["response_mask"] = b["response_mask"][i, :n_resp].tolist()
        trajs.append(Trajectory(task, i % n, [], "\n".join(nt["texts"][i]), float(b["rm_scores"][i].sum()),
                                bool(nt["success"][i]), info, b["prompts"][i][pmask].tolist(),
                                b["responses"][i, :n_resp].tolist()))
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


# ---------------------------------------------------------------------------------------------------- policy
class VerlPolicy:
    """A :class:`~genenv.trainer.policies.Policy` over veRL's generate client: token ids in, token ids out.

    ``client`` is anything with veRL's ``LLMServerClient.generate(request_id, *, prompt_ids, sampling_params)``
    coroutine returning a ``TokenOutput`` (on the cluster: the role's client to its vLLM replicas, load-balanced
    by veRL). Prompts are encoded with the tokenizer's chat template; all ``len(prompts) * n`` requests are sent
    concurrently.
    """

    def __init__(self, name: str, client, tokenizer):
        self.name, self.client, self.tokenizer = name, client, tokenizer

    def encode_prompt(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of ``messages`` under the chat template, ending with the assistant header."""
        from verl.utils.tokenizer import normalize_token_ids

        return list(normalize_token_ids(self.tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                                           tokenize=True)))

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """``n`` generations per prompt (``[len(prompts)][n]``), greedy at ``temperature == 0``."""
        return self.generate_from_ids([self.encode_prompt(p.messages) for p in prompts], n=n,
                                      temperature=temperature, max_new_tokens=max_new_tokens)

    def generate_from_ids(self, encoded: Sequence[list[int]], n: int = 1, temperature: float = 0.0,
                          max_new_tokens: int = 256) -> list[list[Generation]]:
        """As :meth:`generate`, from prompt token ids. Sampling parameters use vLLM's names (``temperature``,
        ``top_p`` 1, ``top_k`` -1, ``max_tokens``); the response keeps the stop token the server returns."""
        params = {"temperature": float(temperature), "top_p": 1.0, "top_k": -1, "max_tokens": int(max_new_tokens)}

        async def one(ids: list[int]) -> list[int]:
            out = await self.client.generate(uuid4().hex, prompt_ids=list(ids), sampling_params=dict(params))
            return list(out.token_ids)

        async def run_all():
            return await asyncio.gather(*[one(ids) for ids in encoded for _ in range(n)])

        flat = asyncio.run(run_all())
        return [[Generation(self.tokenizer.decode(r, skip_special_tokens=True), list(ids), r)
                 for r in flat[i * n:(i + 1) * n]] for i, ids in enumerate(encoded)]


# --------------------------------------------------------------------------------------------------- backend
class _Role:
    """One role's live objects on the cluster (built by :meth:`VerlRayBackend._build_role`)."""

    def __init__(self, name: str, config: DictConfig):
        self.name, self.config = name, config
        self.wg = self.llm = self.client = self.ckpt = self.tokenizer = self.policy = None
        self.ref_in_actor = self.use_ref = False
        self.step = 0
        self.n_replicas = 0


class VerlRayBackend:
    """Both policies on a Ray cluster of GPU nodes, each in its own resource pool and worker group (see module
    docstring). Implements :class:`~genenv.trainer.backend.Backend`, plus :meth:`rollout_agent_loop`, through
    which the loop sends every agent rollout to veRL's ``AgentLoopManager``.

    Args:
        cfg: the composed training config with ``engine: verl_ray`` (``configs/engine/verl_ray.yaml``).
    Raises:
        RuntimeError: the Ray cluster lacks the GPUs of the two pools (raised before any worker or placement
            group is created; see :func:`check_cluster_gpus`).
        ValueError: a role's veRL config fails veRL's validation (:func:`validate_role_config`).
    """

    def __init__(self, cfg):
        import ray
        from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

        self.cfg = cfg
        self.work_dir = Path(cfg.run_dir).resolve() / "verl"
        self.role_cfgs = {role: role_config(cfg, role) for role in ROLES}
        for rcfg in self.role_cfgs.values():
            validate_role_config(rcfg)
        if not ray.is_initialized():  # as verl.trainer.main_ppo.run_ppo: veRL's runtime env + ray_kwargs.ray_init
            first = self.role_cfgs["agent"]
            init = OmegaConf.to_container(first.ray_kwargs.get("ray_init", {}), resolve=True) or {}
            init["runtime_env"] = OmegaConf.to_container(OmegaConf.merge(get_ppo_ray_runtime_env(first),
                                                                         init.get("runtime_env") or {}))
            ray.init(**{k: v for k, v in init.items() if v is not None})
        check_cluster_gpus(resource_pool_spec(cfg), cluster_gpus_per_node())
        self.pools = resource_pool_manager(cfg)
        try:
            self.pools.create_resource_pool()  # veRL's own availability check runs here too
        except ValueError as exc:
            raise RuntimeError(f"engine=verl_ray: {exc}") from exc
        self.roles: dict[str, _Role] = {}
        self._agent_loop = None
        self._agent_loop_settings = None
        self._rollout_calls = 0
        offset = 0
        for role in ROLES:
            self.roles[role] = self._build_role(role, offset)
            offset += self.roles[role].n_replicas

    def _build_role(self, role: str, replica_offset: int) -> _Role:
        """Worker group, vLLM replicas, client and weight sync of one role, as ``RayPPOTrainer.init_workers``
        (veRL 0.9.1) builds them for its actor, in the role's own pool; replicas asleep, then woken with the
        actor's weights (``update_weights``), as ``RayPPOTrainer.fit`` starts."""
        import ray
        from verl.checkpoint_engine import CheckpointEngineManager
        from verl.single_controller.ray import RayClassWithInitArgs, RayWorkerGroup
        from verl.single_controller.ray.base import create_colocated_worker_cls
        from verl.trainer.ppo.utils import Role, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass

        from genenv.trainer.models import prepare_tokenizer
        from genenv.trainer.verl_workers import GenEnvActorRolloutRefWorker, GenEnvLLMServerManager, rollout_world_size

        rcfg = self.role_cfgs[role]
        rt = _Role(role, rcfg)
        model = rcfg.actor_rollout_ref.model
        rt.ref_in_actor = int(model.get("lora_rank", 0) or 0) > 0 or model.get("lora_adapter_path") is not None
        rt.use_ref = bool(need_reference_policy(rcfg))
        actor_role = str(Role.ActorRolloutRef if rt.use_ref and not rt.ref_in_actor else Role.ActorRollout)
        pool = self.pools.get_resource_pool(role)
        worker = RayClassWithInitArgs(cls=ray.remote(GenEnvActorRolloutRefWorker), config=rcfg.actor_rollout_ref,
                                      distillation_config=rcfg.get("distillation"), role=actor_role,
                                      replica_rank_offset=replica_offset)
        group = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=create_colocated_worker_cls({actor_role: worker}),
                               device_name=rcfg.trainer.device)
        rt.wg = group.spawn(prefix_set=[actor_role])[actor_role]
        rt.wg.init_model()
        rt.n_replicas = rt.wg.world_size // rollout_world_size(rcfg.actor_rollout_ref.rollout)
        rt.llm = GenEnvLLMServerManager.create(config=rcfg, worker_group=rt.wg, rollout_resource_pool=pool,
                                               start_rank=replica_offset)
        rt.client = rt.llm.get_client()
        sync = omega_conf_to_dataclass(rcfg.actor_rollout_ref.rollout.checkpoint_engine)
        rt.ckpt = CheckpointEngineManager(config=sync, actor_wg=rt.wg, replicas=rt.llm.get_replicas())
        rt.tokenizer = omega_conf_to_dataclass(rcfg.actor_rollout_ref.model).tokenizer
        prepare_tokenizer(rt.tokenizer)
        rt.policy = VerlPolicy(f"{model.path}:{role}", rt.client, rt.tokenizer)
        rt.ckpt.sleep_replicas()
        rt.ckpt.update_weights(rt.step)
        return rt

    # ----- Backend interface
    def policy(self, role: str) -> VerlPolicy:
        """The role's policy, generating on its vLLM replicas (always holding the latest weights)."""
        return self.roles[role].policy

    def update(self, role: str, samples: Sequence[Sample], mode: str) -> dict[str, Any]:
        """One ``grpo``/``rwr`` update of ``role`` on its workers (see module docstring); the vLLM replicas hold
        the new weights afterwards. Returns our metrics (``loss``, ``pg_loss``, ``kl``, ``grad_norm``,
        ``samples``, ``groups_kept``, ``groups_dropped``, ``tokens``, ``skipped``) plus veRL's as ``verl/<key>``
        (means over micro-batches, ``verl.utils.metric.reduce_metrics``)."""
        from verl.utils import tensordict_utils as tu
        from verl.utils.config import omega_conf_to_dataclass
        from verl.utils.metric import reduce_metrics

        rt = self.roles[role]
        rollout_cfg, actor_cfg = rt.config.actor_rollout_ref.rollout, rt.config.actor_rollout_ref.actor
        batch, metrics = prepare_update(samples, rt.tokenizer.pad_token_id, mode)
        if batch is None:
            return metrics
        batch, n_real = pad_for_workers(batch, rt.wg.world_size)
        batch_meta(batch, rollout_cfg.temperature, multi_turn=bool(rollout_cfg.multi_turn.enable))
        rt.ckpt.sleep_replicas()  # free the GPUs for the training engine
        td = worker_tensordict(batch, calculate_entropy=False, compute_loss=False)
        batch.batch["old_log_probs"] = response_log_probs(rt.wg.compute_log_prob(td), td)
        if rt.use_ref:
            td = worker_tensordict(batch, calculate_entropy=False, compute_loss=False,
                                   **({"no_lora_adapter": True} if rt.ref_in_actor else {}))
            out = rt.wg.compute_log_prob(td) if rt.ref_in_actor else rt.wg.compute_ref_log_prob(td)
            batch.batch["ref_log_prob"] = response_log_probs(out, td)
        actor = omega_conf_to_dataclass(actor_cfg)
        td = worker_tensordict(batch, **update_meta(batch, n_real, actor))
        verl_metrics = reduce_metrics(tu.get(rt.wg.update_actor(td), "metrics"))
        rt.step += 1
        rt.ckpt.update_weights(rt.step)  # wake the replicas with the new weights
        tokens = int(batch.batch["response_mask"][:n_real].sum())
        metrics.update(skipped=False, samples=n_real, tokens=tokens, loss=_num(verl_metrics.get("loss")),
                       pg_loss=_num(verl_metrics.get("actor/pg_loss")), kl=_num(verl_metrics.get("kl_loss", 0.0)),
                       grad_norm=_num(verl_metrics.get("grad_norm")))
        metrics.update({f"verl/{k}": _num(v) for k, v in verl_metrics.items() if _is_number(v)})
        return metrics

    def rollout_agent_loop(self, tasks: Sequence[Task], n: int = 1, temperature: float = 0.0,
                           max_new_tokens: int = 256, env_kwargs: dict[str, Any] | None = None, max_turns: int = 8,
                           response_length: int | None = None) -> list[Trajectory]:
        """``n`` episodes per task through veRL's ``AgentLoopManager`` and ``genenv_gym`` on the cluster; the
        same arguments and result as :func:`genenv.trainer.agent_loop.rollout_agent_loop`.

        The agent-loop workers are (re)started when ``max_new_tokens``, ``env_kwargs`` or ``max_turns`` change.

        Raises:
            ValueError: ``temperature`` is not the agent's configured rollout temperature (the update computes
                log-probs of that tempered policy), or ``response_length`` exceeds the configured one.
        """
        import ray
        from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto

        from genenv.trainer.verl_workers import GenEnvAgentLoopManager

        rt = self.roles["agent"]
        rollout_cfg = rt.config.actor_rollout_ref.rollout
        if not math.isclose(float(temperature), float(rollout_cfg.temperature)):
            raise ValueError(f"agent rollouts run at actor_rollout_ref.rollout.temperature={rollout_cfg.temperature}, "
                             f"asked for {temperature}")
        if response_length is not None and int(response_length) > int(rollout_cfg.response_length):
            raise ValueError(f"response_length {response_length} > actor_rollout_ref.rollout.response_length "
                             f"{rollout_cfg.response_length}")
        config = agent_loop_worker_config(rt.config, max_turns, max_new_tokens, env_kwargs)
        settings = OmegaConf.to_container(config.genenv)
        if self._agent_loop is None or settings != self._agent_loop_settings:
            if self._agent_loop is not None:
                for w in self._agent_loop.agent_loop_workers:
                    ray.kill(w)
            self._agent_loop = GenEnvAgentLoopManager.create(config=config, llm_client=rt.client)
            self._agent_loop_settings = settings
        self._rollout_calls += 1
        path = self.work_dir / f"rollout-{self._rollout_calls:06d}.parquet"
        batch = tasks_to_batch(tasks, n, rt.tokenizer, rt.config.data, path)
        batch.meta_info["global_steps"] = rt.step
        padded, pad = pad_dataproto_to_divisor(batch, len(self._agent_loop.agent_loop_workers))
        output = unpad_dataproto(self._agent_loop.generate_sequences(padded), pad_size=pad)
        path.unlink(missing_ok=True)
        return trajectories_from_output(tasks, n, output)

    def save(self, path: Path) -> None:
        """Each role's training state (weights, optimizer, scheduler, RNG: veRL's checkpoint contents) through
        the workers' ``save_checkpoint`` into ``path/<role>/`` (every node writes its shards: ``run_dir`` must
        be on a filesystem all nodes share), and ``path/backend.json`` (steps and the resolved veRL configs)."""
        path = Path(path).resolve()
        path.mkdir(parents=True, exist_ok=True)
        state = {}
        for role, rt in self.roles.items():
            rt.wg.save_checkpoint(str(path / role), None, rt.step, None)
            state[role] = {"step": rt.step, "config": OmegaConf.to_container(rt.config, resolve=True)}
        (path / "backend.json").write_text(json.dumps(state, indent=1, default=str))

    def load(self, path: Path) -> None:
        """Restore what :meth:`save` wrote (``load_checkpoint`` on the workers), then sync the restored weights
        into the vLLM replicas."""
        path = Path(path).resolve()
        state = json.loads((path / "backend.json").read_text())
        for role, rt in self.roles.items():
            rt.wg.load_checkpoint(str(path / role))
            rt.step = int(state[role]["step"])
            rt.ckpt.sleep_replicas()
            rt.ckpt.update_weights(rt.step)

    def fingerprint(self, role: str) -> float:
        """Sum of squares of the role's trainable weights, computed on its workers
        (:meth:`~genenv.trainer.verl_workers.GenEnvActorRolloutRefWorker.param_sq_sum`)."""
        return float(self.roles[role].wg.param_sq_sum()[0])


def _is_number(value) -> bool:
    """Whether a reduced veRL metric is numeric (scalars, tensors, arrays)."""
    return isinstance(value, (int, float, np.number, np.ndarray, torch.Tensor))


def _num(value) -> float:
    """A metric as a float (``nan`` when missing)."""
    if value is None:
        return float("nan")
    if isinstance(value, torch.Tensor):
        return float(value.float().mean())
    if isinstance(value, (list, tuple)):
        return float(np.mean([_num(v) for v in value])) if value else float("nan")
    return float(value)


def build_verl_ray_backend(cfg) -> VerlRayBackend:
    """The ``verl_ray`` back-end for ``cfg`` (called by :func:`genenv.trainer.loop.build_backend`)."""
    return VerlRayBackend(cfg)
