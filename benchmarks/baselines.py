"""The paper's Table 1 (arXiv 2512.19682v2, GenEnv), read from ``baselines/genenv_table1.csv`` in the data dir.

Columns: ``group, model, alfworld, bfcl, api_bank, bamboogle, travelplanner, average`` (percent). The packaged
samples carry a copy, so the leaderboard prints it on a fresh clone.
"""
from __future__ import annotations

import pandas as pd

from genenv.envs.data import DataError, benchmark_file, resolve_data_dir

COLUMNS = ("group", "model", "alfworld", "bfcl", "api_bank", "bamboogle", "travelplanner", "average")


def load_baselines(data_dir: str | None = None) -> pd.DataFrame:
    """Table 1 as a DataFrame (one row per model, scores in percent).

    Raises:
        DataError: the file is missing or lacks the documented columns.
    """
    path = benchmark_file(resolve_data_dir(data_dir), "baselines", "genenv_table1.csv")
    df = pd.read_csv(path)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing columns {missing}; expected {COLUMNS}")
    return df
