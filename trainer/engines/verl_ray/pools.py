"""The Ray resource pools of the ``verl_ray`` engine: one per role, sized from ``verl_ray.pools``, and the check that
refuses a cluster that cannot hold them before any placement group exists."""
from __future__ import annotations

from typing import Sequence

from genenv.trainer.engines.base import ROLES

POOLS = {"agent": "genenv_agent_pool", "env_policy": "genenv_env_policy_pool"}


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
