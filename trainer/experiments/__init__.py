"""Curriculum experiments and their statistics, above the co-evolution loop and below the user-facing command:
`run` (``genenv-experiment``: arms x seeds as run folders),
`report` (``summary.md``, ``summary.json``, ``curves.png``),
`alignment` (difficulty alignment, agent frozen),
`outcome` (held-out outcome, agent trained), `contrasts` and `factorial` (named arm contrasts and the 2x2 design,
tested over seeds with Holm) and
`stats` (the paired cells and tests both statistics use). The loop, its engines
and its metrics never import this package (a contract in ``pyproject.toml``)."""

__all__ = [  # what a user may import: the public modules
    "alignment", "archive", "contrasts", "factorial", "outcome", "provenance", "report", "run", "settings", "stats",
]
