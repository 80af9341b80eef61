"""The two strategies an arm of the co-evolution loop is made of, registered by name (``configs/train.yaml``'s
``task_source`` and ``agent_batch``; an arm file ``configs/arm/<arm>.yaml`` names one of each):

- a **task source** (`TaskSource`): what the environment policy
  writes, when, and whether it learns from R_env — ``genenv``, ``random_env``, ``envgen``, ``static``,
  ``static_aug`` (`task_sources`), ``genenv_released`` (`released`), ``grounded`` (`grounded`), ``oracle``
  (`oracle`: no writer, the benchmark's generator steered to the level nearest α, an upper bound);
- an **agent batch** (`AgentBatch`): which tasks the agent is rolled
  out on and trained on each iteration — ``uniform``, ``replay`` (curated replay), ``envgen`` (generated tasks
  mixed with original ones), ``frozen`` (no agent update); every drawing batch refills to informative groups with
  ``agent.filter_groups.enable`` (`agent_batches`).

A learning task source updates the environment policy by ``env_policy.update_mode``, one of
`ENV_POLICY_UPDATES` (`env_policy_updates`: ``rwr``, ``grpo``, ``drgrpo``).

Names map to ``"module:attribute"`` strings (`load_object`, imported on first use, as the
engines are). `genenv.trainer.settings` reads the names and imports nothing of this package; the loop builds
its strategies (`build_task_source`, `build_agent_batch`) right after its settings, before any model
loads, so an unknown name fails at once, its error listing the registered ones. A new arm or
curriculum lever is one strategy class registered here (or from its own module with `register_task_source`
/ `register_agent_batch`) and one arm file.
"""
from __future__ import annotations

from genenv.envs.tables import Registry, load_object

TASK_SOURCES = Registry("task_source")  # name → "module:Class" of a TaskSource
AGENT_BATCHES = Registry("agent_batch")  # name → "module:Class" of an AgentBatch
ENV_POLICY_UPDATES = Registry("env_policy.update_mode")  # name → "module:function" f(scored, λ) -> (samples, estimator)


def _check(entry_point: str) -> str:
    if ":" not in entry_point:
        raise ValueError(f"entry point {entry_point!r} is not 'package.module:attribute'")
    return entry_point


def register_task_source(name: str, entry_point: str) -> None:
    """Register a `TaskSource` subclass as ``task_source=<name>``.

    Raises:
        ValueError: a malformed entry point, or the name taken by another class.
    """
    TASK_SOURCES.add(name, _check(entry_point))


def register_agent_batch(name: str, entry_point: str) -> None:
    """Register an `AgentBatch` subclass as ``agent_batch=<name>``.

    Raises:
        ValueError: a malformed entry point, or the name taken by another class.
    """
    AGENT_BATCHES.add(name, _check(entry_point))


def register_env_policy_update(name: str, entry_point: str) -> None:
    """Register an environment-policy update mode: ``f(scored, lam) -> (samples, estimator)`` (see
    `env_policy_updates`), named by ``"module:function"``.

    Raises:
        ValueError: a malformed entry point, or the name taken by another function.
    """
    ENV_POLICY_UPDATES.add(name, _check(entry_point))


def build_task_source(settings):
    """The run's task source: the class registered as ``settings.task_source``, built with the run's
    `RunSettings`.

    Raises:
        ConfigError: an unknown name (the message names the key and lists the registered ones); see the source's
            own checks (`TaskSource`).
    """
    return load_object(_lookup(TASK_SOURCES, "task_source", settings.task_source))(settings)


def build_agent_batch(settings):
    """The run's agent batch: the class registered as ``settings.agent_batch``, built with the run's
    `RunSettings`.

    Raises:
        ConfigError: an unknown name (the message names the key and lists the registered ones).
    """
    return load_object(_lookup(AGENT_BATCHES, "agent_batch", settings.agent_batch))(settings)


def _lookup(table: Registry, key: str, name: str) -> str:
    """``table``'s entry point for ``name``, or a `ConfigError` naming ``key``."""
    from genenv.trainer.settings import ConfigError

    if name not in table:
        raise ConfigError(f"config key {key!r} is {name!r}; choose one of {sorted(table)}")
    return table[name]


_SOURCES = "genenv.trainer.strategies.task_sources"
_BATCHES = "genenv.trainer.strategies.agent_batches"
for _name, _cls in (("genenv", "GenEnvSource"), ("random_env", "RandomEnvSource"), ("envgen", "EnvGenSource"),
                    ("static", "StaticSource"), ("static_aug", "StaticAugSource")):
    register_task_source(_name, f"{_SOURCES}:{_cls}")
register_task_source("genenv_released", "genenv.trainer.strategies.released:ReleasedGenEnvSource")
register_task_source("grounded", "genenv.trainer.strategies.grounded:GroundedSource")
register_task_source("oracle", "genenv.trainer.strategies.oracle:OracleSource")
for _name, _cls in (("uniform", "UniformBatch"), ("replay", "ReplayBatch"), ("envgen", "EnvGenBatch"),
                    ("frozen", "FrozenBatch")):
    register_agent_batch(_name, f"{_BATCHES}:{_cls}")
for _name in ("rwr", "grpo", "drgrpo"):
    register_env_policy_update(_name, f"genenv.trainer.strategies.env_policy_updates:{_name}")

__all__ = [  # what a user may import: the names above and the public modules
    "TASK_SOURCES", "AGENT_BATCHES", "ENV_POLICY_UPDATES", "register_task_source", "register_agent_batch",
    "register_env_policy_update", "build_task_source", "build_agent_batch", "agent_batches", "env_policy_updates",
    "grounded", "oracle", "released", "state", "task_sources",
]
