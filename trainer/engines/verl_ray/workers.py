"""veRL's own worker and manager classes, subclassed only where the ``verl_ray`` engine needs it: two policies
(agent, environment policy), each a hybrid FSDP + vLLM worker group, in one Ray cluster.

Ray ships an actor class to its worker processes by reference (module + name), so the process that hosts one of
these classes imports this module, and with it `genenv.trainer.engines.verl_ray.agent_loop`, which registers the
``genenv_gym`` agent loop in veRL's registry (``verl.experimental.agent_loop.agent_loop._agent_loop_registry``).
That is how the agent-loop workers on every node know ``genenv_gym`` without a file path in the config.

Replica ranks. veRL 0.9.1 names a vLLM server actor ``vllm_server_<replica_rank>_<node_rank>`` and its weight-sync
socket ``/tmp/rl-colocate-zmq-<job>-replica-<replica_rank>-rank-<r>.sock``; in a hybrid worker group the replica
rank is the worker's rank in its own group divided by the GPUs per replica (``ServerAdapter.__init__`` in
``verl/workers/rollout/vllm_rollout/vllm_rollout.py``), and ``RolloutReplica.init_hybrid`` takes a replica's
workers by the same rank. Two worker groups would both number their replicas from 0 and collide. So the
environment policy's replicas are numbered after the agent's (``offset`` = the agent's replica count), on both
sides:

- server side: `GenEnvLLMServerManager` (veRL's ``LLMServerManager`` with ``start_rank=offset``) builds its
  replicas from `offset_replica_class`, whose ``init_hybrid`` hands veRL's own ``init_hybrid`` a view of
  the worker group in which the role's first worker sits at index ``offset × GPUs per replica``;
- worker side: `GenEnvActorRolloutRefWorker` rebuilds its rollout adapter with
  ``replica_rank`` = `worker_replica_rank` (the adapter's own constructor argument).

Classes here:

- `GenEnvActorRolloutRefWorker`: veRL's hybrid actor/rollout/reference worker
  (``verl/workers/engine_workers.py: ActorRolloutRefWorker``) plus the replica offset and ``param_sq_sum``, the
  weight fingerprint the loop logs;
- `GenEnvLLMServerManager`, `offset_replica_class`: see above;
- `GymAgentLoopWorker` / `GenEnvAgentLoopManager`: veRL's ``AgentLoopWorker`` and
  ``AgentLoopManager`` (``verl/experimental/agent_loop/agent_loop.py``), unchanged but defined here (see above).

The workers and servers run on GPUs only; the agent-loop classes, the replica numbering and the worker-group view
are exercised on CPU by ``tests/test_verl_ray.py``.
"""
from __future__ import annotations

import os

import ray
import torch
from verl.experimental.agent_loop.agent_loop import AgentLoopManager, AgentLoopWorker
from verl.single_controller.base.decorator import Dispatch, register
from verl.workers.engine_workers import ActorRolloutRefWorker
from verl.workers.rollout.llm_server import LLMServerManager
from verl.workers.rollout.replica import get_rollout_replica_class

import genenv.trainer.engines.verl_ray.agent_loop  # noqa: F401  (registers "genenv_gym" in every process that loads this module)

__all__ = [
    "GenEnvActorRolloutRefWorker", "GenEnvAgentLoopManager", "GenEnvLLMServerManager", "GymAgentLoopWorker",
    "rollout_world_size", "worker_replica_rank",
]

SQ_SUM_CHUNK = 1 << 24  # elements per float64 chunk in param_sq_sum (128 MB of temporaries)


def rollout_world_size(rollout_config) -> int:
    """GPUs per rollout replica: ``tensor × data × pipeline`` parallel sizes of veRL's rollout config (a
    ``DictConfig`` or veRL's ``RolloutConfig``; the
    formula of ``LLMServerManager._initialize_llm_servers`` and ``ServerAdapter.__init__`` in veRL 0.9.1, without
    prefill/decode disaggregation, which this engine does not support).

    Raises:
        ValueError: ``rollout.disaggregation.enabled`` is set.
    """
    disagg = getattr(rollout_config, "disaggregation", None)
    if disagg is not None and getattr(disagg, "enabled", False):
        raise ValueError("engine=verl_ray does not support rollout.disaggregation (prefill/decode replicas)")
    return (int(rollout_config.tensor_model_parallel_size) * int(rollout_config.data_parallel_size)
            * int(rollout_config.pipeline_model_parallel_size))


def worker_replica_rank(rank: int, offset: int, rollout_config) -> int:
    """The rollout replica a hybrid worker of rank ``rank`` (in its own group) serves, when its role's replicas
    are numbered from ``offset``: ``offset + rank // rollout_world_size`` (veRL's formula plus the offset)."""
    return int(offset) + int(rank) // rollout_world_size(rollout_config)


class _GroupFromOffset:
    """A worker group as seen by replicas numbered from ``offset``: ``workers`` starts with ``pad`` placeholders,
    so veRL's slice ``workers[world_size * replica_rank : ...]`` lands on the group's own workers; every other
    attribute is the group's."""

    def __init__(self, group, pad: int):
        self._group = group
        self.workers = [None] * pad + list(group.workers)

    def __getattr__(self, name: str):
        return getattr(self._group, name)


def offset_replica_class(base: type, offset: int) -> type:
    """A subclass of the rollout replica class ``base`` (e.g. veRL's ``vLLMReplica``) whose hybrid replicas,
    numbered from ``offset``, take their workers from the start of the role's worker group (veRL's own
    ``init_hybrid`` over `_GroupFromOffset`)."""

    class OffsetReplica(base):
        async def init_hybrid(self, worker_group):
            """veRL's ``init_hybrid`` for a replica numbered from ``offset``."""
            return await super().init_hybrid(_GroupFromOffset(worker_group, int(offset) * self.world_size))

    OffsetReplica.__name__ = OffsetReplica.__qualname__ = f"{base.__name__}From{int(offset)}"
    return OffsetReplica


class GenEnvLLMServerManager(LLMServerManager):
    """veRL's ``LLMServerManager``; with ``start_rank > 0`` its hybrid replicas are numbered from ``start_rank``
    yet served by the workers of this group (see the module docstring). Arguments as veRL's."""

    def __init__(self, config, worker_group=None, rollout_resource_pool=None, start_rank: int = 0,
                 load_balancer_cls=None):
        rollout = config.actor_rollout_ref.rollout
        disagg = rollout.get("disaggregation") or {}
        base = get_rollout_replica_class(rollout.name, disaggregation_enabled=bool(disagg.get("enabled", False)))
        self.rollout_replica_class = offset_replica_class(base, start_rank) if start_rank else base
        super().__init__(config, worker_group=worker_group, rollout_resource_pool=rollout_resource_pool,
                         start_rank=start_rank, load_balancer_cls=load_balancer_cls)


class GenEnvActorRolloutRefWorker(ActorRolloutRefWorker):
    """veRL's ``ActorRolloutRefWorker`` whose rollout replica ranks start at ``replica_rank_offset``.

    Args:
        config / role / distillation_config: as veRL's worker (``config`` is ``actor_rollout_ref``).
        replica_rank_offset: the number of rollout replicas of the roles created before this one (0 for the
            agent, the agent's replica count for the environment policy); the same offset is the
            ``start_rank`` of the role's `GenEnvLLMServerManager`, so server and worker agree on actor
            names and on the weight-sync socket.
    """

    def __init__(self, config, role: str, distillation_config=None, replica_rank_offset: int = 0, **kwargs):
        super().__init__(config, role, distillation_config=distillation_config, **kwargs)
        self.replica_rank_offset = int(replica_rank_offset)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self):
        """veRL's ``init_model``; then, with an offset, the rollout adapter is rebuilt with the shifted replica
        rank through its own constructor argument (``ServerAdapter(..., replica_rank=...)``)."""
        super().init_model()
        if self.rollout is not None and self.replica_rank_offset:
            replica_rank = worker_replica_rank(int(os.environ["RANK"]), self.replica_rank_offset, self.rollout.config)
            self.rollout = type(self.rollout)(config=self.rollout.config, model_config=self.rollout.model_config,
                                              device_mesh=self.rollout.device_mesh, replica_rank=replica_rank)

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def param_sq_sum(self) -> float:
        """Sum of squares (float64) of the trainable weights as the training engine exports them for weight
        sync (``engine.get_per_tensor_param``: full tensors, or the LoRA adapter's); every rank returns it.

        A collective: the group calls it on every rank (``ONE_TO_ALL``)."""
        per_tensor, _ = self.actor.engine.get_per_tensor_param(layered_summon=False, base_sync_done=True)
        total = 0.0
        with torch.no_grad():
            for _, tensor in per_tensor:
                for chunk in tensor.detach().reshape(-1).split(SQ_SUM_CHUNK):
                    total += float(chunk.double().pow(2).sum().item())
        return total


class GymAgentLoopWorker(AgentLoopWorker):
    """veRL's ``AgentLoopWorker``, defined in this module so that its Ray process registers ``genenv_gym``."""


class GenEnvAgentLoopManager(AgentLoopManager):
    """veRL's ``AgentLoopManager`` with `GymAgentLoopWorker` as its Ray worker class (the hook veRL
    provides: ``agent_loop_workers_class``)."""

    agent_loop_workers_class = ray.remote(GymAgentLoopWorker)
