"""Settings the trainer derives from the composed config (``configs/train.yaml``), in one place for the loop and
every engine: `RunSettings`, built once per run by `run_settings` and validated there (an error names
the key), and `RoleConfig`, each policy's settings. Defaults live in ``configs/train.yaml`` only: a key
missing from the config is an error, not a silent default written again here."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from genenv.envs.parsing import PARSING_MODES
from genenv.envs.registry import env_entry
from genenv.rewards.env_policy_reward import ENV_POLICY_REWARDS

__all__ = [
    "ConfigError", "CurriculumSettings", "EngineSettings", "GenerationSettings", "RoleConfig", "RunSettings",
    "checked_run_settings", "curriculum_settings", "default_config", "env_kwargs", "read_key", "response_budget",
    "run_settings",
]


class ConfigError(ValueError):
    """A config key is missing or holds a value the run cannot use; the message names the key."""


def default_config():
    """``configs/train.yaml`` as written (OmegaConf), without composing a profile or benchmark: the defaults for
    code that has no run config (a backend built in a test, a run folder without ``config.yaml``)."""
    return OmegaConf.load(Path(__file__).resolve().parents[1] / "configs" / "train.yaml")


def read_key(cfg, key: str) -> Any:
    """The value at dotted ``key`` of ``cfg``.

    Raises:
        ConfigError: the key is missing (the YAML holds every default, so a missing key is a broken config).
    """
    node = cfg
    for part in key.split("."):
        if node is None or part not in node:
            raise ConfigError(f"config key {key!r} is missing (configs/train.yaml defines every key)")
        node = node[part]
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


def _choice(cfg, key: str, choices) -> str:
    value = read_key(cfg, key)
    if value not in choices:
        raise ConfigError(f"config key {key!r} is {value!r}; choose one of {sorted(choices)}")
    return value


@dataclass(frozen=True)
class RoleConfig:
    """Settings of one policy role (``agent.policy`` / ``env_policy.policy`` in ``configs/train.yaml``, where the
    defaults live): ``model`` (SmolLM2 alias or HF folder), ``lr``, ``kl_coef``, ``clip_ratio``, ``ppo_epochs``,
    ``micro_batch_size``, ``max_grad_norm``, ``lora_r`` (0 = full fine-tune), ``lora_alpha``, ``gen_batch_size``
    (prompts per ``generate`` call), ``prefix_cache_tokens`` (KV states kept between turns,
    `prefix_cache`; 0: none), ``continuous_batching`` (episodes decode in one continuous
    batch, `continuous`; false: one ``generate`` call per turn), ``static_cache``
    (``generate`` with a static KV cache, compiled decoding on a GPU;
    `TransformersPolicy`), ``sampler`` (what the role samples through: ``builtin``, ``transformers``,
    ``llama-server`` or ``vllm``, `genenv.runtime.samplers.sampler`)."""

    model: str
    lr: float
    kl_coef: float
    clip_ratio: float
    ppo_epochs: int
    micro_batch_size: int
    max_grad_norm: float
    lora_r: int
    lora_alpha: int
    gen_batch_size: int
    prefix_cache_tokens: int
    continuous_batching: bool
    static_cache: bool
    sampler: str

    @classmethod
    def of(cls, cfg, role: str) -> "RoleConfig":
        """``role``'s settings from the composed config (``<role>.policy``).

        Raises:
            ConfigError: a field missing from the config, a key the role does not have, or a ``sampler`` that
                serves full weights (``llama-server``, ``vllm``) for a LoRA role (an unknown ``sampler`` is the
                engine's to refuse, `build_local_backend`).
        """
        block = read_key(cfg, f"{role}.policy")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(block) - names)
        if unknown:
            raise ConfigError(f"config keys {[f'{role}.policy.{k}' for k in unknown]} are not role settings; "
                              f"known: {sorted(names)}")
        rc = cls(**{name: read_key(cfg, f"{role}.policy.{name}") for name in sorted(names)})
        if rc.sampler in ("llama-server", "vllm") and rc.lora_r > 0:
            raise ConfigError(f"{role}.policy.sampler={rc.sampler} serves full weights; a LoRA role "
                              f"({role}.policy.lora_r={rc.lora_r}) samples with builtin or transformers")
        return rc

    @classmethod
    def defaults(cls, role: str, **changes: Any) -> "RoleConfig":
        """``role``'s settings as ``configs/train.yaml`` defines them, with ``changes`` (for code and tests that
        build a backend without composing a whole config)."""
        return dataclasses.replace(cls.of(default_config(), role), **changes)


@dataclass(frozen=True)
class CurriculumSettings:
    """The ``curriculum`` block: the environment-policy reward (paper Eq. 3 by default) and the difficulty filter.

    Attributes:
        env_reward: a registered environment-policy reward (`ENV_POLICY_REWARDS`).
        alpha, beta: the target success rate α and the sharpness β of Eq. 3.
        k_min: the half-width of the α band (``|p̂ - α| ≤ k_min`` passes the filter).
        lam: RWR's temperature λ (weights ``exp(λ R_env)``).
    """

    env_reward: str
    alpha: float
    beta: float
    k_min: float
    lam: float


@dataclass(frozen=True)
class GenerationSettings:
    """The ``generation`` block: how the environment policy writes tasks (``configs/train.yaml`` documents every key).

    ``rollouts_per_task`` is resolved (``agent.n`` when the config says null) and so is ``upfront_max_rounds``
    (2 x ``iterations`` when null). Whether and when the environment policy writes is the task source's
    (``task_source``, `genenv.trainer.strategies.task_sources`)."""

    every: int
    constrained: bool
    grounded: bool
    prompts_per_iteration: int
    generations_per_prompt: int
    seed_examples: int
    temperature: float
    max_new_tokens: int | None
    rollouts_per_task: int
    upfront_tasks: int
    upfront_max_rounds: int


@dataclass(frozen=True)
class ProbeSettings:
    """The ``probe`` block: the probe set of the ``grounded`` task source (SOAR's grounded writer reward,
    `GroundedSource`): ``tasks`` seed tasks held out of the pool,
    each played ``n`` times, sampled at the agent's temperature, to measure the agent before and after a trial
    update on one written task."""

    tasks: int
    n: int


@dataclass(frozen=True)
class AgentSettings:
    """The ``agent`` block less its policy (`RoleConfig`): the batch, the sampling and informative batches
    (which tasks the batch holds is the agent batch's, ``agent_batch``, `genenv.trainer.strategies.agent_batches`).

    Attributes:
        batch_tasks, n: tasks per iteration and rollouts per task (the GRPO group size).
        temperature, max_new_tokens: sampling per turn.
        response_budget: tokens per episode after its first prompt (`response_budget`).
        filter_groups, max_rollouts, generated_share, prior_share: ``agent.filter_groups`` (informative batches:
            refill until ``batch_tasks`` groups have unequal rewards, at most ``max_rollouts`` rollouts an
            iteration, generated tasks at most this share of the trained groups; the informative share the first
            round assumes before any group is seen).
    """

    batch_tasks: int
    n: int
    temperature: float
    max_new_tokens: int
    response_budget: int
    filter_groups: bool
    max_rollouts: int
    generated_share: float
    prior_share: float


@dataclass(frozen=True)
class PoolSettings:
    """The ``pool`` block: the ``replay`` agent batch's rank temperature β and staleness weight ρ (Prioritized
    Level Replay, `sample_replay`)."""

    temperature: float
    staleness: float


@dataclass(frozen=True)
class EngineSettings:
    """Where the policies run: ``name`` (the ``engine``, a registered engine name), ``device`` (``auto``, ``cpu``, ``cuda``),
    ``autocast_dtype`` (``auto``, ``bfloat16``, ``float32`` or ``None``), ``threads`` (a number, ``auto`` or
    ``None``), ``env_server`` (a ``genenv-serve`` URL or several comma-separated, ``None``: episodes in this
    process) and ``options``: the
    engine's own block of the config (the top-level key named ``name``, e.g. ``verl_ray``'s pools and veRL keys) as
    a plain dict with interpolations resolved, empty when the config has none; only that engine reads it."""

    name: str
    device: str
    autocast_dtype: str | None
    threads: int | str | None
    env_server: str | None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSettings:
    """What a training run decides once from its config (built by `run_settings`, the one reader of the
    composed config for the loop), passed down instead of read again with a default wherever it is used.

    Attributes:
        benchmark, seed, run_dir, iterations, save_every: the run.
        task_source, agent_batch: the arm's two strategies (registered names, `genenv.trainer.strategies`).
        data_dir: the benchmark data directory (``None``: ``$GENENV_DATA_DIR``, else the packaged samples).
        seed_options: the run's changes to the benchmark's seed-pool loader options (``benchmark.seed_options``).
        seed_limit: at most this many seed tasks in the pool (``None``: all).
        env_kwargs: the envs' constructor options (`env_kwargs`).
        curriculum, generation, agent, pool, probe: the blocks of those names.
        env_update_mode: ``env_policy.update_mode`` (a registered environment-policy update mode,
            `genenv.trainer.strategies.ENV_POLICY_UPDATES`).
        eval_every, eval_limit: held-out evaluation every N iterations (0: off), tasks per held-out unit.
        tensorboard, resume, keep_checkpoints: outputs and checkpoints.
        roles: each policy's `RoleConfig`.
        engine: the `EngineSettings`.
    """

    benchmark: str
    task_source: str
    agent_batch: str
    seed: int
    run_dir: str
    iterations: int
    save_every: int
    data_dir: str | None
    seed_options: dict[str, Any]
    seed_limit: int | None
    env_kwargs: dict[str, dict[str, Any]]
    curriculum: CurriculumSettings
    generation: GenerationSettings
    agent: AgentSettings
    pool: PoolSettings
    probe: ProbeSettings
    env_update_mode: str
    eval_every: int
    eval_limit: int | None
    tensorboard: bool
    resume: bool
    keep_checkpoints: int
    roles: dict[str, RoleConfig]
    engine: EngineSettings


def _block(cls, cfg, prefix: str, **resolved: Any):
    """``cls`` with each field read from ``<prefix>.<field>`` of ``cfg`` and converted to the field's type, except
    the ``resolved`` ones."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in resolved:
            out[f.name] = resolved[f.name]
            continue
        value = read_key(cfg, f"{prefix}.{f.name}")
        out[f.name] = {"bool": bool, "int": int, "float": float, "str": str}.get(str(f.type), lambda v: v)(value)
    return cls(**out)


def curriculum_settings(cfg) -> CurriculumSettings:
    """The `CurriculumSettings` of ``cfg`` (a composed config, or a run's stored ``config.yaml``).

    Raises:
        ConfigError: a curriculum key is missing.
    """
    return _block(CurriculumSettings, cfg, "curriculum")


def run_settings(cfg) -> RunSettings:
    """The run's `RunSettings` from the composed config, validated.

    Raises:
        ConfigError: a missing key; an unknown ``parsing`` or ``curriculum.env_reward`` (the strategy names
            ``task_source``, ``agent_batch`` and ``env_policy.update_mode`` are checked when the loop builds its
            strategies, `genenv.trainer.strategies`, before any model loads); ``generation.every``, ``keep_checkpoints``,
            ``iterations``, ``save_every``, ``probe.tasks``, ``probe.n``, ``agent.batch_tasks``, ``agent.n`` or
            ``agent.filter_groups.max_rollouts`` below 1; ``pool.temperature`` ≤ 0; ``pool.staleness`` or
            ``agent.filter_groups.generated_share`` outside [0, 1]; ``agent.filter_groups.prior_share`` outside
            (0, 1]. The message names the key.
    """
    data_dir = read_key(cfg, "data_dir")
    iterations = int(read_key(cfg, "iterations"))
    n = int(read_key(cfg, "agent.n"))
    _choice(cfg, "curriculum.env_reward", ENV_POLICY_REWARDS)
    per_task, rounds = read_key(cfg, "generation.rollouts_per_task"), read_key(cfg, "generation.upfront_max_rounds")
    fg = "agent.filter_groups"
    limit, eval_limit = read_key(cfg, "benchmark.seed_limit"), read_key(cfg, "eval.limit")
    gen_tokens = read_key(cfg, "generation.max_new_tokens")
    settings = RunSettings(
        benchmark=str(read_key(cfg, "benchmark.name")),
        task_source=str(read_key(cfg, "task_source")),
        agent_batch=str(read_key(cfg, "agent_batch")),
        seed=int(read_key(cfg, "seed")),
        run_dir=str(read_key(cfg, "run_dir")),
        iterations=iterations,
        save_every=int(read_key(cfg, "save_every")),
        data_dir=None if data_dir is None else str(data_dir),
        seed_options=dict(read_key(cfg, "benchmark.seed_options") or {}),
        seed_limit=None if limit is None else int(limit),
        env_kwargs=env_kwargs(cfg),
        curriculum=curriculum_settings(cfg),
        generation=_block(GenerationSettings, cfg, "generation", rollouts_per_task=int(per_task or n),
                          max_new_tokens=None if gen_tokens is None else int(gen_tokens),
                          upfront_tasks=int(read_key(cfg, "generation.upfront_tasks") or 0),
                          upfront_max_rounds=int(rounds or 2 * iterations)),
        agent=AgentSettings(batch_tasks=int(read_key(cfg, "agent.batch_tasks")),
                            n=n, temperature=float(read_key(cfg, "agent.temperature")),
                            max_new_tokens=int(read_key(cfg, "agent.max_new_tokens")), response_budget=response_budget(cfg),
                            filter_groups=bool(read_key(cfg, f"{fg}.enable")), max_rollouts=int(read_key(cfg, f"{fg}.max_rollouts")),
                            generated_share=float(read_key(cfg, f"{fg}.generated_share")),
                            prior_share=float(read_key(cfg, f"{fg}.prior_share"))),
        pool=_block(PoolSettings, cfg, "pool"),
        probe=_block(ProbeSettings, cfg, "probe"),
        env_update_mode=str(read_key(cfg, "env_policy.update_mode")),
        eval_every=int(read_key(cfg, "eval.every") or 0),
        eval_limit=None if eval_limit is None else int(eval_limit),
        tensorboard=bool(read_key(cfg, "tensorboard")),
        resume=bool(read_key(cfg, "resume")),
        keep_checkpoints=int(read_key(cfg, "keep_checkpoints")),
        roles={role: RoleConfig.of(cfg, role) for role in ("agent", "env_policy")},
        engine=_engine_settings(cfg),
    )
    for key, value in (("generation.every", settings.generation.every), ("keep_checkpoints", settings.keep_checkpoints),
                       ("iterations", settings.iterations), ("save_every", settings.save_every),
                       ("probe.tasks", settings.probe.tasks), ("probe.n", settings.probe.n),
                       ("agent.batch_tasks", settings.agent.batch_tasks), ("agent.n", settings.agent.n),
                       (f"{fg}.max_rollouts", settings.agent.max_rollouts)):
        if value < 1:
            raise ConfigError(f"config key {key!r} is {value}; it must be at least 1")
    if not 0 <= settings.agent.generated_share <= 1:
        raise ConfigError(f"config key '{fg}.generated_share' is {settings.agent.generated_share}; it must be in [0, 1]")
    if not 0 < settings.agent.prior_share <= 1:
        raise ConfigError(f"config key '{fg}.prior_share' is {settings.agent.prior_share}; it must be in (0, 1]")
    if settings.pool.temperature <= 0 or not 0 <= settings.pool.staleness <= 1:
        raise ConfigError(f"config keys 'pool.temperature' ({settings.pool.temperature}) and 'pool.staleness' "
                          f"({settings.pool.staleness}): the temperature must be > 0 and the staleness in [0, 1]")
    return settings


def _engine_settings(cfg) -> EngineSettings:
    """The `EngineSettings` of ``cfg``."""
    threads, dtype, server = read_key(cfg, "threads"), read_key(cfg, "autocast_dtype"), read_key(cfg, "env_server")
    name = str(read_key(cfg, "engine"))
    options = read_key(cfg, name) if name in cfg else {}
    return EngineSettings(name=name, device=str(read_key(cfg, "device")),
                          autocast_dtype=None if dtype is None else str(dtype),
                          threads=threads if threads is None or isinstance(threads, str) else int(threads),
                          env_server=str(server) if server else None, options=dict(options or {}))


def checked_run_settings(settings: Any, taker: str) -> RunSettings:
    """``settings`` itself when it is a `RunSettings`: what an engine builder takes (engines never read a
    config; the loop builds the settings once, `run_settings`).

    Raises:
        TypeError: anything else (a composed config: pass ``run_settings(cfg)``), naming ``taker``.
    """
    if not isinstance(settings, RunSettings):
        raise TypeError(f"{taker} takes the run's RunSettings, not {type(settings).__name__}: build them once with "
                        "genenv.trainer.settings.run_settings(cfg)")
    return settings


def env_kwargs(cfg) -> dict[str, dict[str, Any]]:
    """The env constructor options of the run's benchmark: ``benchmark.env_kwargs``, ``data_dir`` (so the envs'
    backends and databases read the tasks' data directory), ``parsing`` (the run's reading of model text, top-level
    ``parsing``; ``benchmark.env_kwargs.parsing`` wins) and ``metric`` = ``reward.free_text_metric`` for free-text
    envs."""
    name = cfg.benchmark.name
    configured = cfg.benchmark.get("env_kwargs") or {}
    kwargs = dict(OmegaConf.to_container(configured, resolve=True) if OmegaConf.is_config(configured) else configured)
    kwargs.setdefault("data_dir", None if cfg.get("data_dir") is None else str(cfg.data_dir))
    kwargs.setdefault("parsing", _choice(cfg, "parsing", PARSING_MODES))
    metric = cfg.reward.get("free_text_metric")
    if metric and env_entry(name).env_class.action_kind == "free_text":
        kwargs.setdefault("metric", metric)
    return {name: kwargs}


def response_budget(cfg) -> int:
    """Response tokens per agent episode after its first prompt (veRL's ``rollout.response_length``):
    ``agent.response_length``, else ``agent.max_new_tokens`` times the env's step limit (``benchmark.env_kwargs
    .max_steps``, else the env class's default) for multi-step benchmarks and once for single-step ones."""
    if cfg.agent.get("response_length"):
        return int(cfg.agent.response_length)
    env_class = env_entry(cfg.benchmark.name).env_class
    if not env_class.multi_step:
        return int(cfg.agent.max_new_tokens)
    steps = (cfg.benchmark.get("env_kwargs") or {}).get("max_steps") or env_class.default_max_steps
    return int(cfg.agent.max_new_tokens) * int(steps)
