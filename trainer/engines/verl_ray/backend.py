"""The ``verl_ray`` engine's backend: both policies on veRL's Ray workers (see
`genenv.trainer.engines.verl_ray`)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from genenv.envs.task import Task
from genenv.trainer.engines.base import ROLES
from genenv.trainer.engines.verl_ray.batches import (batch_meta, pad_for_workers, response_log_probs, tasks_to_batch,
                                                     trajectories_from_output, update_meta, worker_tensordict)
from genenv.trainer.engines.verl_ray.config import (agent_loop_worker_config, ref_in_actor, role_config,
                                                    validate_role_config)
from genenv.trainer.engines.verl_ray.policy import VerlPolicy
from genenv.trainer.engines.verl_ray.pools import check_cluster, cluster_nodes, resource_pool_manager, resource_pool_spec
from genenv.runtime.episodes import Rollout, RolloutSpec, RolloutTimings
from genenv.trainer.settings import checked_run_settings
from genenv.trainer.updates import Sample, prepare_update

__all__ = ["VerlRayBackend", "build_verl_ray_backend"]


class _Role:
    """One role's live objects on the cluster (built by `VerlRayBackend._build_role`) and the state of its
    vLLM replicas.

    Memory order (veRL 0.9.1's ``RayPPOTrainer.fit``, ``verl/trainer/ppo/ray_trainer.py``: ``update_actor``, then
    ``_save_checkpoint``, then ``checkpoint_manager.update_weights``): the replicas sleep (vLLM's weights and KV
    cache freed) whenever the training engine works on the GPUs (log-probs, update, the ``param_sq_sum``
    fingerprint, checkpoint save and load), and are woken with the actor's weights (``update_weights``) only when
    the role generates next (`wake`, called by the role's policy and by agent rollouts).
    """

    def __init__(self, name: str, config: DictConfig):
        self.name, self.config = name, config
        self.wg = self.llm = self.client = self.ckpt = self.tokenizer = self.policy = None
        self.ref_in_actor = self.use_ref = False
        self.step = 0
        self.n_replicas = 0
        self.awake = False  # the replicas hold the actor's latest weights and their KV cache
        self.fingerprint = float("nan")  # param_sq_sum of the actor's weights, taken while the replicas sleep

    def sleep(self) -> None:
        """Put the replicas to sleep (veRL's ``CheckpointEngineManager.sleep_replicas``) unless they sleep."""
        if self.awake:
            self.ckpt.sleep_replicas()
            self.awake = False

    def wake(self) -> None:
        """Sync the actor's weights into the sleeping replicas and wake them (``update_weights``); nothing when
        they are awake (they already hold the latest weights)."""
        if not self.awake:
            self.ckpt.update_weights(self.step)
            self.awake = True

    def measure(self) -> None:
        """Take the weight fingerprint (the workers' ``param_sq_sum``, which gathers full tensors) with the
        replicas asleep."""
        self.sleep()
        self.fingerprint = float(self.wg.param_sq_sum()[0])

    def started(self, wg, client, ckpt, tokenizer) -> None:
        """Take the live objects built on the cluster: the worker group (model loaded), the client of its vLLM
        servers (launched awake), the weight sync and the tokenizer. The servers are put to sleep, as
        ``RayPPOTrainer.init_workers`` ends, the fingerprint is taken, and the role's policy
        (`VerlPolicy.for_rollout`) wakes them with the actor's weights at its first generation."""
        self.wg, self.client, self.ckpt, self.tokenizer = wg, client, ckpt, tokenizer
        model = self.config.actor_rollout_ref.model
        self.policy = VerlPolicy.for_rollout(f"{model.path}:{self.name}", client, tokenizer,
                                             self.config.actor_rollout_ref.rollout, prepare=self.wake)
        self.awake = True
        self.measure()


class VerlRayBackend:
    """Both policies on a Ray cluster of GPU nodes, each in its own resource pool and worker group (see module
    docstring). Implements `Backend`; `rollout` sends every agent episode
    to veRL's ``AgentLoopManager``.

    Args:
        settings: the run's `RunSettings` with ``engine: verl_ray`` (its block of
            ``configs/engine/verl_ray.yaml`` is ``settings.engine.options``).
    Raises:
        TypeError: ``settings`` is not a `RunSettings`.
        RuntimeError: the Ray cluster cannot hold the placement groups of the two pools, GPUs or CPUs (raised
            before any worker or placement group is created; see `check_cluster`).
        ValueError: a role's veRL config fails veRL's validation (`validate_role_config`).
    """

    def __init__(self, settings):
        import ray
        from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

        self.settings = st = checked_run_settings(settings, "the verl_ray engine")
        self.work_dir = Path(st.run_dir).resolve() / "verl"
        self.role_cfgs = {role: role_config(st, role) for role in ROLES}
        for rcfg in self.role_cfgs.values():
            validate_role_config(rcfg)
        if not ray.is_initialized():  # as verl.trainer.main_ppo.run_ppo: veRL's runtime env + ray_kwargs.ray_init
            first = self.role_cfgs["agent"]
            init = OmegaConf.to_container(first.ray_kwargs.get("ray_init", {}), resolve=True) or {}
            init["runtime_env"] = OmegaConf.to_container(OmegaConf.merge(get_ppo_ray_runtime_env(first),
                                                                         init.get("runtime_env") or {}))
            ray.init(**{k: v for k, v in init.items() if v is not None})
        self.pools = resource_pool_manager(st)
        check_cluster(resource_pool_spec(st), cluster_nodes(), self.pools.max_colocate_count)
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
        (veRL 0.9.1) builds them for its actor, in the role's own pool; then `_Role.started` (replicas
        asleep, fingerprint, woken by the first generation: ``RayPPOTrainer.fit`` starts with that
        ``update_weights``)."""
        import ray
        from verl.checkpoint_engine import CheckpointEngineManager
        from verl.single_controller.ray import RayClassWithInitArgs, RayWorkerGroup
        from verl.single_controller.ray.base import create_colocated_worker_cls
        from verl.trainer.ppo.utils import Role, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass

        from genenv.runtime.models import prepare_tokenizer
        from genenv.trainer.engines.verl_ray.workers import (GenEnvActorRolloutRefWorker, GenEnvLLMServerManager,
                                                             rollout_world_size)

        rcfg = self.role_cfgs[role]
        rt = _Role(role, rcfg)
        model = rcfg.actor_rollout_ref.model
        rt.ref_in_actor = ref_in_actor(model)
        rt.use_ref = bool(need_reference_policy(rcfg))
        actor_role = str(Role.ActorRolloutRef if rt.use_ref and not rt.ref_in_actor else Role.ActorRollout)
        pool = self.pools.get_resource_pool(role)
        worker = RayClassWithInitArgs(cls=ray.remote(GenEnvActorRolloutRefWorker), config=rcfg.actor_rollout_ref,
                                      distillation_config=rcfg.get("distillation"), role=actor_role,
                                      replica_rank_offset=replica_offset)
        group = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=create_colocated_worker_cls({actor_role: worker}),
                               device_name=rcfg.trainer.device)
        wg = group.spawn(prefix_set=[actor_role])[actor_role]
        wg.init_model()
        rt.n_replicas = wg.world_size // rollout_world_size(rcfg.actor_rollout_ref.rollout)
        rt.llm = GenEnvLLMServerManager.create(config=rcfg, worker_group=wg, rollout_resource_pool=pool,
                                               start_rank=replica_offset)
        sync = omega_conf_to_dataclass(rcfg.actor_rollout_ref.rollout.checkpoint_engine)
        tokenizer = omega_conf_to_dataclass(rcfg.actor_rollout_ref.model).tokenizer
        prepare_tokenizer(tokenizer)
        rt.started(wg, rt.llm.get_client(), CheckpointEngineManager(config=sync, actor_wg=wg,
                                                                    replicas=rt.llm.get_replicas()), tokenizer)
        return rt

    # ----- Backend interface
    def policy(self, role: str) -> VerlPolicy:
        """The role's policy, generating on its vLLM replicas; each generation first wakes them with the latest
        weights when an update, a save or a load left them asleep (`_Role.wake`)."""
        return self.roles[role].policy

    def update(self, role: str, samples: Sequence[Sample], estimator: str) -> dict[str, Any]:
        """One ``grpo``/``rwr`` update of ``role`` on its workers (see module docstring), with the vLLM replicas
        asleep; the fingerprint of the new weights is taken before they wake, and they stay asleep until the role
        generates next (see `_Role`). Returns our metrics (``loss``, ``pg_loss``, ``kl``, ``grad_norm``,
        ``samples``, ``groups_kept``, ``groups_dropped``, ``tokens``, ``skipped``) plus veRL's as ``verl/<key>``
        (means over micro-batches, ``verl.utils.metric.reduce_metrics``)."""
        from verl.utils import tensordict_utils as tu
        from verl.utils.config import omega_conf_to_dataclass
        from verl.utils.metric import reduce_metrics

        rt = self.roles[role]
        rollout_cfg, actor_cfg = rt.config.actor_rollout_ref.rollout, rt.config.actor_rollout_ref.actor
        batch, metrics = prepare_update(samples, rt.tokenizer.pad_token_id, estimator)
        if batch is None:
            return metrics
        batch, n_real = pad_for_workers(batch, rt.wg.world_size)
        batch_meta(batch, rollout_cfg.temperature, multi_turn=bool(rollout_cfg.multi_turn.enable))
        rt.sleep()  # free the GPUs for the training engine
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
        rt.measure()  # the replicas wake at the role's next generation (rt.wake)
        tokens = int(batch.batch["response_mask"][:n_real].sum())
        metrics.update(skipped=False, samples=n_real, tokens=tokens, loss=_num(verl_metrics.get("loss")),
                       pg_loss=_num(verl_metrics.get("actor/pg_loss")), kl=_num(verl_metrics.get("kl_loss", 0.0)),
                       grad_norm=_num(verl_metrics.get("grad_norm")))
        metrics.update({f"verl/{k}": _num(v) for k, v in verl_metrics.items() if _is_number(v)})
        return metrics

    def rollout(self, tasks: Sequence[Task], spec: RolloutSpec) -> Rollout:
        """``spec.n`` episodes per task (or ``spec.group_sizes``, in one batch) through veRL's
        ``AgentLoopManager`` and `GymAgentLoop` on the cluster
        (the one episode loop); the agent-loop workers are (re)started when ``spec.max_new_tokens`` or
        ``spec.env_kwargs`` change. The timings hold everything as ``generate_seconds`` (generation and env steps
        interleave on the workers).

        Raises:
            ValueError: ``spec.temperature`` is not the agent's configured rollout temperature (the update computes
                log-probs of that tempered policy), or ``spec.max_response_tokens`` is not its ``response_length``.
        """
        import time

        import ray
        from verl.protocol import pad_dataproto_to_divisor, unpad_dataproto

        from genenv.trainer.engines.verl_ray.workers import GenEnvAgentLoopManager

        start = time.perf_counter()
        rt = self.roles["agent"]
        rollout_cfg = rt.config.actor_rollout_ref.rollout
        n = spec.n if spec.group_sizes is None else spec.sizes(len(tasks))  # every group in one batch
        budget = spec.max_response_tokens
        if not math.isclose(float(spec.temperature), float(rollout_cfg.temperature)):
            raise ValueError(f"agent rollouts run at actor_rollout_ref.rollout.temperature={rollout_cfg.temperature}, "
                             f"asked for {spec.temperature}")
        if budget is not None and int(budget) != int(rollout_cfg.response_length):
            raise ValueError(f"the episode budget {budget} is not actor_rollout_ref.rollout."
                             f"response_length {rollout_cfg.response_length}")
        config = agent_loop_worker_config(rt.config, spec.max_new_tokens, spec.env_kwargs,
                                          spec.env_server or self.settings.engine.env_server)
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
        rt.wake()
        output = unpad_dataproto(self._agent_loop.generate_sequences(padded), pad_size=pad)
        path.unlink(missing_ok=True)
        return Rollout(trajectories_from_output(tasks, n, output),
                       RolloutTimings(generate_seconds=time.perf_counter() - start))

    def save(self, path: Path, previous: Path | None = None) -> None:
        """Each role's training state (weights, optimizer, scheduler, RNG: veRL's checkpoint contents) through
        the workers' ``save_checkpoint`` into ``path/<role>/`` (every node writes its shards: ``run_dir`` must
        be on a filesystem all nodes share), and ``path/backend.json`` (steps and the resolved veRL configs).
        The replicas sleep while the workers save (a generation since the last update, e.g. the held-out
        evaluation, may have woken them) and wake at the next generation. ``previous`` is not used: veRL's
        checkpoint holds each rank's RNG state, which moves with every generation, so an unchanged step is not an
        unchanged checkpoint."""
        path = Path(path).resolve()
        path.mkdir(parents=True, exist_ok=True)
        state = {}
        for role, rt in self.roles.items():
            rt.sleep()
            rt.wg.save_checkpoint(str(path / role), None, rt.step, None)
            state[role] = {"step": rt.step, "config": OmegaConf.to_container(rt.config, resolve=True)}
        (path / "backend.json").write_text(json.dumps(state, indent=1, default=str))

    def load(self, path: Path) -> None:
        """Restore what `save` wrote (``load_checkpoint`` on the workers, replicas asleep) and take the
        restored weights' fingerprint; the next generation syncs them into the vLLM replicas."""
        path = Path(path).resolve()
        state = json.loads((path / "backend.json").read_text())
        for role, rt in self.roles.items():
            rt.sleep()
            rt.wg.load_checkpoint(str(path / role))
            rt.step = int(state[role]["step"])
            rt.measure()

    def fingerprint(self, role: str) -> float:
        """Sum of squares of the role's trainable weights
        (`param_sq_sum` on its
        workers), as taken after the last build, update or load with the replicas asleep (the weights change
        only there, so the value is that of the current weights)."""
        return self.roles[role].fingerprint


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


def build_verl_ray_backend(settings) -> VerlRayBackend:
    """The ``verl_ray`` back-end for ``settings`` (a `RunSettings` or a composed
    config; its builder in `genenv.trainer.engines.ENGINES`)."""
    return VerlRayBackend(settings)
