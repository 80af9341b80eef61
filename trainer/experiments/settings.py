"""What a curriculum experiment decides once from its config (``configs/experiment.yaml`` composed over
``configs/train.yaml``, or an experiment directory's stored ``experiment.yaml``): `ExperimentSettings`, built
and validated by `experiment_settings`, and each arm's run config (`arm_config`, from the arm's file
``configs/arm/<arm>.yaml``). With `genenv.trainer.settings` (a run's settings) this is the one module of the
experiments that reads config keys; ``genenv-experiment`` and its report read every decision from here."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genenv.trainer.settings import ConfigError, read_key

__all__ = [
    "ARM_DIR", "ExperimentSettings", "HELDOUT_PROTOCOL", "arm_config", "arm_file", "arm_name", "experiment_settings",
]

ARM_DIR = Path(__file__).resolve().parents[2] / "configs" / "arm"  # the shipped arm files, one per arm
HELDOUT_PROTOCOL = ("benchmark.name", "iterations", "eval.every", "eval.limit", "score_metric")  # held-out scores
# of two experiments measure the same thing only where these agree


@dataclass(frozen=True)
class ExperimentSettings:
    """The experiment-level settings.

    Attributes:
        arms: the arms run, in order (names of ``configs/arm/<arm>.yaml`` files, or paths to arm files).
        seeds: the seeds (the unit of analysis), in the order they are run.
        experiment_dir: where the runs ``<arm>/seed<k>`` and the report go.
        iterations: co-evolution iterations per run.
        eval_every: held-out evaluation every N iterations (0: none; the agent batch must then be ``frozen``).
        score_metric: the held-out metric compared (``None``: the benchmark's headline metric).
        keep_finished_checkpoints: whether a finished run keeps its checkpoints.
        agent_batch: the experiment's agent batch (``configs/train.yaml``'s ``agent_batch`` as composed); an arm
            file that names another one wins, unless this one is ``frozen`` (an experiment on a stationary agent
            freezes every arm's agent).
        benchmark: the benchmark's registry name.
        alpha, k_min: the α band of the difficulty filter (``curriculum.alpha``, ``curriculum.k_min``).
        batch_tasks, n: the agent batch size (``agent.batch_tasks`` tasks x ``agent.n`` rollouts).
        eval_limit: held-out tasks per unit (``eval.limit``; ``None``: all).
        heldout_protocol: the values of `HELDOUT_PROTOCOL` (config key → value), what two experiments'
            held-out scores must share to be compared.
    """

    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    experiment_dir: str
    iterations: int
    eval_every: int
    score_metric: str | None
    keep_finished_checkpoints: bool
    agent_batch: str
    benchmark: str
    alpha: float
    k_min: float
    batch_tasks: int
    n: int
    eval_limit: int | None
    heldout_protocol: dict[str, Any]

    @property
    def agent_frozen(self) -> bool:
        """Whether every arm's agent is frozen (the experiment measures the environment policy alone)."""
        return self.agent_batch == "frozen"


def experiment_settings(cfg) -> ExperimentSettings:
    """The `ExperimentSettings` of ``cfg`` (a composed experiment config or a stored ``experiment.yaml``).

    Raises:
        ConfigError: a missing key (the message names it); no arm or no seed; ``iterations`` below 1; a held-out
            evaluation that never runs (``eval.every`` < 1) while the agent trains.
    """
    score, limit = read_key(cfg, "score_metric"), read_key(cfg, "eval.limit")
    settings = ExperimentSettings(
        arms=tuple(str(a) for a in read_key(cfg, "arms")),
        seeds=tuple(int(s) for s in read_key(cfg, "seeds")),
        experiment_dir=str(read_key(cfg, "experiment_dir")),
        iterations=int(read_key(cfg, "iterations")),
        eval_every=int(read_key(cfg, "eval.every") or 0),
        score_metric=None if score is None else str(score),
        keep_finished_checkpoints=bool(read_key(cfg, "keep_finished_checkpoints")),
        agent_batch=str(read_key(cfg, "agent_batch")),
        benchmark=str(read_key(cfg, "benchmark.name")),
        alpha=float(read_key(cfg, "curriculum.alpha")),
        k_min=float(read_key(cfg, "curriculum.k_min")),
        batch_tasks=int(read_key(cfg, "agent.batch_tasks")),
        n=int(read_key(cfg, "agent.n")),
        eval_limit=None if limit is None else int(limit),
        heldout_protocol={key: read_key(cfg, key) for key in HELDOUT_PROTOCOL},
    )
    if not settings.arms or not settings.seeds:
        raise ConfigError("config keys 'arms' and 'seeds' must each name at least one")
    if settings.iterations < 1:
        raise ConfigError(f"config key 'iterations' is {settings.iterations}; it must be at least 1")
    if settings.eval_every < 1 and not settings.agent_frozen:
        raise ConfigError("an experiment compares held-out scores: set eval.every >= 1 (or agent_batch=frozen to "
                          "measure the environment policy alone)")
    return settings


def arm_name(arm: str) -> str:
    """The name of ``arm`` (its run folder ``<experiment_dir>/<name>``): the file's stem for a path to a YAML
    file, else ``arm`` itself."""
    return Path(arm).stem if arm.endswith((".yaml", ".yml")) else arm


def arm_file(arm: str) -> Path:
    """The arm file of ``arm``: ``configs/arm/<arm>.yaml`` for a name, the file itself for a path.

    Raises:
        ValueError: no such arm file (the message lists the shipped arms).
    """
    path = Path(arm) if arm.endswith((".yaml", ".yml")) else ARM_DIR / f"{arm}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in ARM_DIR.glob("*.yaml")))
        raise ValueError(f"unknown arm {arm!r}: no arm file {path}; shipped arms: {known} (or give a path to a YAML "
                         "file naming task_source and, optionally, agent_batch)")
    return path


def arm_config(cfg, arm: str, seed: int, run_dir: str | Path, upfront_tasks: int | None = None):
    """The ``genenv-train`` config of ``arm`` at ``seed``: a copy of the experiment config ``cfg`` less the
    experiment's own keys, with the arm file merged over it (`arm_file`), ``seed``, ``run_dir`` and, when
    given, ``generation.upfront_tasks``.

    Raises:
        ValueError: an unknown arm; an arm file that names no ``task_source`` or keys ``genenv-train`` does not
            have; an arm that names its own agent batch in an experiment on a frozen agent.
    """
    from omegaconf import OmegaConf

    exp = experiment_settings(cfg)
    arm_cfg = OmegaConf.load(arm_file(arm))
    if "task_source" not in arm_cfg:
        raise ValueError(f"arm file {arm_file(arm)} names no task_source")
    out = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    for key in ("arms", "seeds", "experiment_dir", "keep_finished_checkpoints", "score_metric"):
        out.pop(key, None)
    unknown = sorted(set(OmegaConf.to_container(arm_cfg)) - set(out))
    if unknown:
        raise ValueError(f"arm file {arm_file(arm)} sets {unknown}, which are not genenv-train keys")
    if exp.agent_frozen and arm_cfg.get("agent_batch", "frozen") != "frozen":
        raise ValueError(f"arm {arm!r} names agent_batch={arm_cfg.agent_batch}, but the experiment freezes the agent "
                         "(agent_batch=frozen)")
    out = OmegaConf.merge(out, arm_cfg)
    out.seed = int(seed)
    out.run_dir = str(run_dir)
    if upfront_tasks is not None:
        out.generation.upfront_tasks = int(upfront_tasks)
    return out
