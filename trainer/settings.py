"""Settings the trainer derives from the composed config (``configs/train.yaml``), in one place for the loop and
every engine: :class:`RunSettings`, built once per run by :func:`run_settings` and validated there (an error names
the key), and :class:`RoleConfig`, each policy's settings. Defaults live in ``configs/train.yaml`` only: a key
missing from the config is an error, not a silent default written again here."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from genenv.envs.parsing import PARSING_MODES
from genenv.envs.registry import env_entry

GENERATION_MODES = ("genenv", "envgen")  # generation.mode: trained on R_env | EnvGen's frozen writer
POOL_SAMPLING = ("uniform", "learnability")  # pool.sampling (trainer/task_pool.py)


class ConfigError(ValueError):
    """A config key is missing or holds a value the run cannot use; the message names the key."""


def default_config():
    """``configs/train.yaml`` as written (OmegaConf), without composing a profile or benchmark: the defaults for
    code that has no run config (a backend built in a test, a run folder without ``config.yaml``)."""
    return OmegaConf.load(Path(__file__).resolve().parents[1] / "configs" / "train.yaml")


def _read(cfg, key: str) -> Any:
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
    value = _read(cfg, key)
    if value not in choices:
        raise ConfigError(f"config key {key!r} is {value!r}; choose one of {sorted(choices)}")
    return value


@dataclass(frozen=True)
class RoleConfig:
    """Settings of one policy role (``agent.policy`` / ``env_policy.policy`` in ``configs/train.yaml``, where the
    defaults live): ``model`` (SmolLM2 alias or HF folder), ``lr``, ``kl_coef``, ``clip_ratio``, ``ppo_epochs``,
    ``micro_batch_size``, ``max_grad_norm``, ``lora_r`` (0 = full fine-tune), ``lora_alpha``, ``gen_batch_size``
    (prompts per ``generate`` call), ``prefix_cache_tokens`` (KV states kept between turns,
    :mod:`~genenv.runtime.prefix_cache`; 0: none)."""

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

    @classmethod
    def of(cls, cfg, role: str) -> "RoleConfig":
        """``role``'s settings from the composed config (``<role>.policy``).

        Raises:
            ConfigError: a field missing from the config, or a key the role does not have.
        """
        block = _read(cfg, f"{role}.policy")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(block) - names)
        if unknown:
            raise ConfigError(f"config keys {[f'{role}.policy.{k}' for k in unknown]} are not role settings; "
                              f"known: {sorted(names)}")
        return cls(**{name: _read(cfg, f"{role}.policy.{name}") for name in sorted(names)})

    @classmethod
    def defaults(cls, role: str, **changes: Any) -> "RoleConfig":
        """``role``'s settings as ``configs/train.yaml`` defines them, with ``changes`` (for code and tests that
        build a backend without composing a whole config)."""
        return dataclasses.replace(cls.of(default_config(), role), **changes)


@dataclass(frozen=True)
class RunSettings:
    """What a training run decides once from its config (built by :func:`run_settings`), passed down instead of
    read again with a default wherever it is used.

    Attributes:
        data_dir: the benchmark data directory (``None``: ``$GENENV_DATA_DIR``, else the packaged samples).
        parsing: how the envs read the agent's text (:data:`~genenv.envs.parsing.PARSING_MODES`).
        seed_options: the run's changes to the benchmark's seed-pool loader options (``benchmark.seed_options``).
        generation_enabled / generation_mode / generation_every / constrained / grounded: the ``generation``
            block (mode one of :data:`GENERATION_MODES`).
        env_update_mode: ``env_policy.update_mode`` (a registered environment-policy update mode).
        agent_frozen: ``agent.frozen`` (no agent update, only the new tasks' episodes).
        filter_groups / max_rollouts / generated_share: ``agent.filter_groups.enable``, ``.max_rollouts`` and
            ``.generated_share`` (informative agent batches: refill until ``agent.batch_tasks`` groups have unequal
            rewards, at most this many rollouts per iteration, generated tasks at most this share of the groups).
        pool_sampling / replay_temperature / replay_staleness: the ``pool`` block (how pool tasks are drawn for the
            agent batch, one of :data:`POOL_SAMPLING`; PLR's β and ρ).
        tensorboard, resume, keep_checkpoints: outputs and checkpoints.
        roles: each policy's :class:`RoleConfig`.
    """

    data_dir: str | None
    parsing: str
    seed_options: dict[str, Any]
    generation_enabled: bool
    generation_mode: str
    generation_every: int
    constrained: bool
    grounded: bool
    env_update_mode: str
    agent_frozen: bool
    filter_groups: bool
    max_rollouts: int
    generated_share: float
    pool_sampling: str
    replay_temperature: float
    replay_staleness: float
    tensorboard: bool
    resume: bool
    keep_checkpoints: int
    roles: dict[str, RoleConfig]

    def generates_at(self, iteration: int) -> bool:
        """Whether the environment policy writes tasks at ``iteration``: every iteration in GenEnv mode, every
        ``generation.every``-th (0, K, 2K, ...) in EnvGen mode; never when ``generation.enabled`` is false."""
        return self.generation_enabled and (self.generation_mode == "genenv" or iteration % self.generation_every == 0)


def run_settings(cfg) -> RunSettings:
    """The run's :class:`RunSettings` from the composed config, validated.

    Raises:
        ConfigError: a missing key, an unknown ``parsing`` / ``generation.mode`` / ``env_policy.update_mode`` /
            ``pool.sampling``, ``generation.every``, ``keep_checkpoints`` or ``agent.filter_groups.max_rollouts``
            below 1, ``pool.temperature`` ≤ 0, ``pool.staleness`` or ``agent.filter_groups.generated_share``
            outside [0, 1]; the message names the key.
    """
    from genenv.trainer.env_policy_updates import ENV_POLICY_UPDATES

    data_dir = _read(cfg, "data_dir")
    settings = RunSettings(
        data_dir=None if data_dir is None else str(data_dir),
        parsing=_choice(cfg, "parsing", PARSING_MODES),
        seed_options=dict(_read(cfg, "benchmark.seed_options") or {}),
        generation_enabled=bool(_read(cfg, "generation.enabled")),
        generation_mode=_choice(cfg, "generation.mode", GENERATION_MODES),
        generation_every=int(_read(cfg, "generation.every")),
        constrained=bool(_read(cfg, "generation.constrained")),
        grounded=bool(_read(cfg, "generation.grounded")),
        env_update_mode=_choice(cfg, "env_policy.update_mode", ENV_POLICY_UPDATES),
        agent_frozen=bool(_read(cfg, "agent.frozen")),
        filter_groups=bool(_read(cfg, "agent.filter_groups.enable")),
        max_rollouts=int(_read(cfg, "agent.filter_groups.max_rollouts")),
        generated_share=float(_read(cfg, "agent.filter_groups.generated_share")),
        pool_sampling=_choice(cfg, "pool.sampling", POOL_SAMPLING),
        replay_temperature=float(_read(cfg, "pool.temperature")),
        replay_staleness=float(_read(cfg, "pool.staleness")),
        tensorboard=bool(_read(cfg, "tensorboard")),
        resume=bool(_read(cfg, "resume")),
        keep_checkpoints=int(_read(cfg, "keep_checkpoints")),
        roles={role: RoleConfig.of(cfg, role) for role in ("agent", "env_policy")},
    )
    for key, value in (("generation.every", settings.generation_every), ("keep_checkpoints", settings.keep_checkpoints),
                       ("agent.filter_groups.max_rollouts", settings.max_rollouts)):
        if value < 1:
            raise ConfigError(f"config key {key!r} is {value}; it must be at least 1")
    if not 0 <= settings.generated_share <= 1:
        raise ConfigError(f"config key 'agent.filter_groups.generated_share' is {settings.generated_share}; it must "
                          "be in [0, 1]")
    if settings.replay_temperature <= 0 or not 0 <= settings.replay_staleness <= 1:
        raise ConfigError(f"config keys 'pool.temperature' ({settings.replay_temperature}) and 'pool.staleness' "
                          f"({settings.replay_staleness}): the temperature must be > 0 and the staleness in [0, 1]")
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
