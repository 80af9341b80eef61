"""Where Bamboogle's data is read from, and the maintainers' tool that builds the packaged copy.

``<data_dir>/bamboogle/test.jsonl`` (125 records ``idx, question, answer``; ``shared/data/SOURCES.md``); without a
data directory the packaged ``sample/test.jsonl`` of this folder (all 125 questions, 39 KB).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from genenv.envs.data import benchmark_dir

__all__ = ["bamboogle_dir", "build_sample"]

SAMPLE = Path(__file__).with_name("sample")


def bamboogle_dir(data_dir: str | None = None) -> Path:
    """``<data_dir>/bamboogle``, else the packaged copy (`genenv.envs.data.benchmark_dir`)."""
    return benchmark_dir("bamboogle", data_dir, SAMPLE)


def build_sample(source: Path, dest: Path = SAMPLE) -> None:
    """Copy ``bamboogle/test.jsonl`` of the full data dir ``source`` into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(source) / "bamboogle" / "test.jsonl", dest / "test.jsonl")
