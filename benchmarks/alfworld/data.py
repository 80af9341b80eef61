"""Where ALFWorld's games are read from, and the maintainers' tool that builds the packaged sample.

``<data_dir>/alfworld/json_2.1.1/<split>/...`` (``shared/data/SOURCES.md`` section 2); without a data directory the
packaged ``sample/`` of this folder is read (the same layout: per task type the smallest games of valid_unseen,
valid_seen and two of train).
"""
from __future__ import annotations

from pathlib import Path

from genenv.benchmarks.alfworld.files import GAME_FILE, GAMES_DIR, TASK_TYPES
from genenv.envs.data import DataError, benchmark_dir

__all__ = ["build_sample", "games_root"]

SAMPLE = Path(__file__).with_name("sample")


def games_root(data_dir: str | Path | None = None) -> Path:
    """``<data_dir>/alfworld`` (data dir resolved as for every benchmark).

    Raises:
        DataError: the folder has no ``json_2.1.1/`` games.
    """
    root = benchmark_dir("alfworld", data_dir, SAMPLE)
    if not (root / GAMES_DIR).is_dir():
        raise DataError(f"no ALFWorld games under {root / GAMES_DIR}; point GENENV_DATA_DIR at the folder "
                        f"described in shared/data/SOURCES.md (alfworld/json_2.1.1/<split>/...), or unset it to "
                        f"use the packaged sample games")
    return root


SAMPLE_GAMES = {"valid_unseen": 1, "valid_seen": 1, "train": 2}  # games per task type in the packaged sample


def build_sample(source: str | Path, dest: str | Path = SAMPLE) -> list[Path]:
    """Copy a small real sample of ALFWorld games from the full data dir ``source`` into ``dest`` (same layout):
    per split and task type, the `SAMPLE_GAMES` smallest game files (the quickest to load), without their
    ``traj_data.json`` (the loader needs only the game file and its folder name). Returns the copied files.

    Raises:
        DataError: ``source`` has no ALFWorld games.
    """
    import shutil

    src, out = games_root(source) / GAMES_DIR, Path(dest) / GAMES_DIR
    if out.exists():
        shutil.rmtree(out)
    copied = []
    for split, per_type in SAMPLE_GAMES.items():
        by_type: dict[str, list[Path]] = {}
        for path in sorted((src / split).glob(f"*/*/{GAME_FILE}")):
            by_type.setdefault(path.parent.parent.name.split("-", 1)[0], []).append(path)
        for task_type in TASK_TYPES:
            for path in sorted(by_type.get(task_type, []), key=lambda p: (p.stat().st_size, str(p)))[:per_type]:
                target = out / path.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
                copied.append(target)
    return copied
