"""The paper's Table 1 (arXiv 2512.19682v2, GenEnv), read from ``baselines/genenv_table1.csv`` in the data dir.

Columns: ``group, model, alfworld, bfcl, api_bank, bamboogle, travelplanner, average`` (percent). A copy ships in
this package (``eval/baselines/``), so the leaderboard prints it on a fresh clone.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from genenv.envs.data import DataError, benchmark_dir, benchmark_file

__all__ = ["build_sample", "load_baselines"]

PACKAGED = Path(__file__).with_name("baselines")

COLUMNS = ("group", "model", "alfworld", "bfcl", "api_bank", "bamboogle", "travelplanner", "average")


def load_baselines(data_dir: str | None = None) -> pd.DataFrame:
    """Table 1 as a DataFrame (one row per model, scores in percent).

    Raises:
        DataError: the file is missing or lacks the documented columns.
    """
    path = benchmark_file(benchmark_dir("baselines", data_dir, PACKAGED), "genenv_table1.csv")
    df = pd.read_csv(path)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing columns {missing}; expected {COLUMNS}")
    return df


def build_sample(source: Path, dest: Path = PACKAGED) -> None:
    """Copy ``baselines/genenv_table1.csv`` and its ``README.md`` from the full data dir ``source`` into ``dest``
    (maintainers: ``genenv-envs build-samples``)."""
    import shutil

    dest.mkdir(parents=True, exist_ok=True)
    for name in ("genenv_table1.csv", "README.md"):
        shutil.copyfile(Path(source) / "baselines" / name, dest / name)
