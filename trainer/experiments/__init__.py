"""Curriculum experiments and their statistics, above the co-evolution loop and below the user-facing command:
:mod:`~genenv.trainer.experiments.run` (``genenv-experiment``: arms x seeds as run folders),
:mod:`~genenv.trainer.experiments.report` (``summary.md``, ``summary.json``, ``curves.png``),
:mod:`~genenv.trainer.experiments.alignment` (difficulty alignment, agent frozen),
:mod:`~genenv.trainer.experiments.outcome` (held-out outcome, agent trained) and
:mod:`~genenv.trainer.experiments.stats` (the paired cells and tests both statistics use). The loop, its engines
and its metrics never import this package (a contract in ``pyproject.toml``)."""
