"""The benchmark spec: everything the trainer and the leaderboard need to know about one benchmark, in two parts.

A `BenchmarkSpec` ties a registered environment (``envs/``) to

- evaluation (`BenchmarkEvaluation`, this module; what the leaderboard and held-out evaluation use): the
  units a leaderboard run covers (BFCL: one per category), the labelled metrics computed from trajectories, the paper's Table 1 column the benchmark belongs to, and which metric (if any) is measured under
  that column's protocol (`BenchmarkSpec.paper_metric`, run by `BenchmarkSpec.paper_options`; or
  why it cannot be, `BenchmarkSpec.paper_unavailable`);
- task writing by the environment policy (`TaskWriter`; what the trainer's
  task writing uses): the prompt, the JSON Schema of a generation, the strict-JSON parser and the validator.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from genenv.benchmarks.task_writer import TaskWriter
from genenv.envs.registry import env_entry
from genenv.envs.task import Task

__all__ = ["BenchmarkEvaluation", "BenchmarkSpec", "Metric"]


@dataclass(frozen=True)
class Metric:
    """A labelled score in [0, 1]: ``key`` (e.g. ``bfcl/simple_python/ast_accuracy``), ``value``, ``n`` tasks,
    and ``protocol`` (which official or paper protocol it follows, in words)."""

    key: str
    value: float
    n: int
    protocol: str


class BenchmarkEvaluation(abc.ABC):
    """The evaluation part of a benchmark spec (see the module docstring).

    Class attributes: ``name`` (registry key, equal to the env's ``benchmark``), ``baseline_column`` (column of
    the paper's Table 1; empty: not in the paper, the leaderboard compares nothing), ``paper_protocol`` (what
    that column measures), ``paper_options`` (the loader options that evaluate the paper's protocol, what
    ``genenv-eval --benchmarks paper`` runs; ``None``: this spec is not the one that runs it),
    ``paper_unavailable`` (why the paper's protocol cannot run offline, in a few words; empty: it can, or the
    spec is not in the paper), ``seed_options`` (loader options of the default training pool).

    Args:
        data_dir: the data directory this spec's loaders, backends and validators read (``None``:
            ``$GENENV_DATA_DIR``, else the packaged samples; see `genenv.envs.data.resolve_data_dir`).
    """

    name: str = ""
    baseline_column: str = ""
    paper_protocol: str = ""
    paper_options: dict[str, Any] | None = None
    paper_unavailable: str = ""
    seed_options: dict[str, Any] = {}

    def __init__(self, data_dir: str | None = None):
        self.data_dir = None if data_dir is None else str(data_dir)

    @property
    def env_class(self) -> type:
        """The benchmark's `TaskEnv` subclass."""
        return env_entry(self.name).env_class

    def pool_options(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Loader options of the training pool: this benchmark's `seed_options` updated key by key with
        ``overrides`` (a run's ``benchmark.seed_options``, which holds only what the run changes). The one place a
        run's seed pool options are resolved (the loop's seed pool, its held-out evaluation, the benchmark scripts)."""
        return {**self.seed_options, **dict(overrides or {})}

    def load(self, split: str = "test", **options: Any) -> list[Task]:
        """Tasks of ``split`` from this spec's data directory (loader options as for the env constructor)."""
        return self.env_class.load_tasks(split=split, data_dir=self.data_dir, **options)

    # ----- evaluation -----
    def eval_units(self, options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """The ``(label, loader options)`` units a leaderboard run evaluates; one unit by default."""
        return [(self.name, dict(options))]

    @abc.abstractmethod
    def summarize(self, unit: str, trajectories: Sequence[Any]) -> list[Metric]:
        """Labelled metrics of one unit's trajectories."""

    @abc.abstractmethod
    def headline(self, metrics: Sequence[Metric]) -> Metric | None:
        """The benchmark's main metric (with its protocol label): the score a training run's held-out evaluation
        records and the leaderboard lists first; it follows the paper's protocol only where
        `paper_metric` says so."""

    def paper_metric(self, metrics: Sequence[Metric]) -> Metric | None:
        """The metric of ``metrics`` measured under the protocol of the paper's ``baseline_column`` (the one
        number that may stand beside the paper's rows), or ``None``: this spec measures no such metric, or the
        run did not evaluate the units it needs (None by default).

        ``metrics`` may hold other benchmarks' metrics too (a leaderboard run's): a spec picks its own by key.
        The protocol label is returned as evaluated, so a caller can see marks such as lenient parsing that
        make the number another protocol.
        """
        return None


class BenchmarkSpec(BenchmarkEvaluation, TaskWriter):
    """A benchmark's spec: its evaluation part (`BenchmarkEvaluation`) and its task-writer part
    (`TaskWriter`), one subclass per benchmark, registered with
    `genenv.benchmarks.registry.register_benchmark`. Code that needs one part takes that type.

    Args:
        data_dir: as `BenchmarkEvaluation` (the writer's validators read it too).
        grounded: as `TaskWriter`.
    """

    def __init__(self, data_dir: str | None = None, grounded: bool = True):
        BenchmarkEvaluation.__init__(self, data_dir)
        TaskWriter.__init__(self, grounded)
