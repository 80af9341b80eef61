"""The Ray resource pools of the ``verl_ray`` engine: one per role, sized from ``verl_ray.pools``, and the check that
refuses a cluster that cannot hold them (GPUs and CPUs) before any placement group exists."""
from __future__ import annotations

from typing import Sequence

from genenv.trainer.engines.base import ROLES
from genenv.trainer.settings import RunSettings, checked_run_settings

__all__ = ["check_cluster", "cluster_nodes", "resource_pool_manager", "resource_pool_spec"]

POOLS = {"agent": "genenv_agent_pool", "env_policy": "genenv_env_policy_pool"}


def resource_pool_spec(settings: RunSettings) -> dict[str, list[int]]:
    """``{pool name: [GPUs on node 1, GPUs on node 2, ...]}`` for veRL's ``ResourcePoolManager``: one pool per
    role from ``verl_ray.pools.<role>.{nnodes, n_gpus_per_node}`` (``settings``: the run's
    `RunSettings`; the block from ``settings.engine.options``).

    Raises:
        TypeError: ``settings`` is not a `RunSettings`.
        ValueError: a pool with no node or no GPU.
    """
    pools = checked_run_settings(settings, "resource_pool_spec").engine.options["pools"]
    spec = {}
    for role in ROLES:
        p = pools[role]
        if int(p["nnodes"]) < 1 or int(p["n_gpus_per_node"]) < 1:
            raise ValueError(f"verl_ray.pools.{role} needs nnodes >= 1 and n_gpus_per_node >= 1, got {dict(p)}")
        spec[POOLS[role]] = [int(p["n_gpus_per_node"])] * int(p["nnodes"])
    return spec


def resource_pool_manager(settings: RunSettings):
    """veRL's ``ResourcePoolManager`` over `resource_pool_spec` of ``settings``, mapping each role to its
    pool."""
    from verl.single_controller.ray import ResourcePoolManager

    return ResourcePoolManager(resource_pool_spec=resource_pool_spec(settings), mapping=dict(POOLS))


def check_cluster(spec: dict[str, list[int]], nodes: Sequence[tuple[float, float]], cpus_per_gpu: int) -> None:
    """Refuse, before any placement group exists, a cluster that cannot hold the pools: Ray waits forever in
    ``pg.ready()`` for a placement group that does not fit instead of failing.

    What veRL 0.9.1 asks Ray for (``verl/single_controller/ray/base.py``, ``RayResourcePool.get_placement_groups``):
    per pool and node, one ``STRICT_PACK`` placement group (all its bundles on one node) of one bundle per GPU,
    each bundle ``{"GPU": 1, "CPU": max_colocate_count}`` (``ResourcePoolManager.max_colocate_count``, 3 by
    default). The check packs those placement groups onto the nodes (GPUs and CPUs both; exact search, identical
    node states tried once), so it also refuses clusters whose totals suffice but whose nodes cannot hold the
    groups together. Other actors (vLLM servers, agent-loop workers) reserve no CPU once placed.

    Args:
        spec: `resource_pool_spec` (``{pool: [GPUs on each of its nodes]}``).
        nodes: ``(GPUs, CPUs)`` of each alive Ray node (`cluster_nodes`).
        cpus_per_gpu: CPUs per bundle (veRL's ``max_colocate_count``).
    Raises:
        RuntimeError: the placement groups do not fit; the message says what the pools need, what the nodes
            have, which resource is short, and how to fix it.
    """
    groups = [(float(g), float(g * cpus_per_gpu)) for v in spec.values() for g in v]
    need_gpu, need_cpu = sum(g for g, _ in groups), sum(c for _, c in groups)
    have_gpu, have_cpu = sum(float(n[0]) for n in nodes), sum(float(n[1]) for n in nodes)
    if _packs(groups, [(float(g), float(c)) for g, c in nodes]):
        return
    if have_gpu < need_gpu:
        problem = f"the Ray cluster has {have_gpu:g} GPU(s) in total"
    elif have_cpu < need_cpu:
        problem = f"the Ray cluster has {have_cpu:g} CPU(s) in total"
    elif any(not any(ng >= g for ng, _ in nodes) for g, _ in groups):
        problem = f"no Ray node has more than {max((n[0] for n in nodes), default=0):g} GPU(s)"
    elif any(not any(ng >= g and nc >= c for ng, nc in nodes) for g, c in groups):
        problem = "no Ray node has both the GPUs and the CPUs of one pool's share"
    else:
        problem = "the pools' per-node shares do not fit on the nodes together"
    detail = ", ".join(f"{name}: {len(v)} node(s) x ({v[0]} GPU(s) + {v[0] * cpus_per_gpu} CPU(s))"
                       for name, v in spec.items())
    have = ", ".join(f"({g:g} GPU, {c:g} CPU)" for g, c in nodes) or "none"
    raise RuntimeError(
        f"engine=verl_ray needs {need_gpu:g} GPU(s) and {need_cpu:g} CPU(s) for its two resource pools ({detail}; "
        f"veRL reserves {cpus_per_gpu} CPU(s) per GPU, ResourcePoolManager.max_colocate_count), but {problem}; "
        f"nodes: {have}. Ray would wait forever for the placement groups. Run it on a Ray cluster of GPU nodes "
        "(`ray start --head` / `ray start --address=...` with enough --num-gpus and --num-cpus, then "
        "`ray job submit`, see docs/distributed.md), size verl_ray.pools.{agent,env_policy} to the cluster, "
        "or use engine=local on one machine.")


def _packs(groups: Sequence[tuple[float, float]], nodes: list[tuple[float, float]]) -> bool:
    """Whether every ``(GPUs, CPUs)`` group fits whole on one node, all at once (depth-first search, largest
    group first; nodes with the same remaining capacity are tried once per group; failed states remembered)."""
    order = sorted(groups, reverse=True)
    failed: set[tuple[int, tuple[tuple[float, float], ...]]] = set()

    def place(i: int, caps: list[tuple[float, float]]) -> bool:
        if i == len(order):
            return True
        state = (i, tuple(sorted(caps)))
        if state in failed:
            return False
        g, c = order[i]
        tried = set()
        for k, (ng, nc) in enumerate(caps):
            if ng >= g and nc >= c and (ng, nc) not in tried:
                tried.add((ng, nc))
                caps[k] = (ng - g, nc - c)
                if place(i + 1, caps):
                    return True
                caps[k] = (ng, nc)
        failed.add(state)
        return False

    return place(0, list(nodes))


def cluster_nodes() -> list[tuple[float, float]]:
    """``(GPUs, CPUs)`` of each alive node of the connected Ray cluster (``ray.nodes()``, the nodes' totals)."""
    import ray

    return [(float(n["Resources"].get("GPU", 0)), float(n["Resources"].get("CPU", 0)))
            for n in ray.nodes() if n.get("Alive")]
