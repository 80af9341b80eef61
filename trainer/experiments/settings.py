"""What a curriculum experiment decides once from its config (``configs/experiment.yaml`` composed over
``configs/train.yaml``, or an experiment directory's stored ``experiment.yaml``): :class:`ExperimentSettings`, built
and validated by :func:`experiment_settings`, the one reader of an experiment's config keys. ``genenv-experiment``
and its report read every experiment-level decision from here; each arm's own run is configured by its arm file
(``configs/arm/<arm>.yaml``) and read by :func:`~genenv.trainer.settings.run_settings`."""
from __future__ import annotations

from dataclasses import dataclass

from genenv.trainer.settings import ConfigError, read_key


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
    """

    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    experiment_dir: str
    iterations: int
    eval_every: int
    score_metric: str | None
    keep_finished_checkpoints: bool
    agent_batch: str

    @property
    def agent_frozen(self) -> bool:
        """Whether every arm's agent is frozen (the experiment measures the environment policy alone)."""
        return self.agent_batch == "frozen"


def experiment_settings(cfg) -> ExperimentSettings:
    """The :class:`ExperimentSettings` of ``cfg`` (a composed experiment config or a stored ``experiment.yaml``).

    Raises:
        ConfigError: a missing key (the message names it); no arm or no seed; ``iterations`` below 1; a held-out
            evaluation that never runs (``eval.every`` < 1) while the agent trains.
    """
    score = read_key(cfg, "score_metric")
    settings = ExperimentSettings(
        arms=tuple(str(a) for a in read_key(cfg, "arms")),
        seeds=tuple(int(s) for s in read_key(cfg, "seeds")),
        experiment_dir=str(read_key(cfg, "experiment_dir")),
        iterations=int(read_key(cfg, "iterations")),
        eval_every=int(read_key(cfg, "eval.every") or 0),
        score_metric=None if score is None else str(score),
        keep_finished_checkpoints=bool(read_key(cfg, "keep_finished_checkpoints")),
        agent_batch=str(read_key(cfg, "agent_batch")),
    )
    if not settings.arms or not settings.seeds:
        raise ConfigError("config keys 'arms' and 'seeds' must each name at least one")
    if settings.iterations < 1:
        raise ConfigError(f"config key 'iterations' is {settings.iterations}; it must be at least 1")
    if settings.eval_every < 1 and not settings.agent_frozen:
        raise ConfigError("an experiment compares held-out scores: set eval.every >= 1 (or agent_batch=frozen to "
                          "measure the environment policy alone)")
    return settings
