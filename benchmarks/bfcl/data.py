"""Where BFCL's data is read from, and the maintainers' tool that builds the packaged sample.

``<data_dir>/bfcl/`` holds ``BFCL_v4_<category>.json`` and ``possible_answer/BFCL_v4_<category>.json`` as shipped
by ``bfcl-eval==2026.3.23`` (``shared/data/SOURCES.md``); without a data directory the packaged ``sample/`` of this
folder is read (the same layout, first entries of every category).
"""
from __future__ import annotations

import json
from pathlib import Path

from genenv.benchmarks.bfcl.checker import IRRELEVANCE_CATEGORIES, RELEVANCE_CATEGORIES
from genenv.envs.data import benchmark_dir

__all__ = ["MULTI_TURN_CATEGORIES", "NO_ANSWER_CATEGORIES", "SINGLE_TURN_CATEGORIES", "bfcl_dir", "build_sample"]

SAMPLE = Path(__file__).with_name("sample")
SINGLE_TURN_CATEGORIES = (
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
    "irrelevance", "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
    "live_irrelevance", "live_relevance",
)
MULTI_TURN_CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param",
                         "multi_turn_long_context")
NO_ANSWER_CATEGORIES = IRRELEVANCE_CATEGORIES + RELEVANCE_CATEGORIES  # categories without an answer file
SAMPLE_PER_CATEGORY = 12
SAMPLE_SIZES = {"simple_python": 50}  # the default training / evaluation category gets a larger sample


def bfcl_dir(data_dir: str | None = None) -> Path:
    """``<data_dir>/bfcl``, else the packaged sample (`genenv.envs.data.benchmark_dir`)."""
    return benchmark_dir("bfcl", data_dir, SAMPLE)


def build_sample(source: Path, dest: Path = SAMPLE) -> None:
    """Copy the first `SAMPLE_PER_CATEGORY` entries of every single-turn and multi-turn category (50 of
    simple_python) and their answers from ``source/bfcl`` (the full data) into ``dest``."""
    source = Path(source) / "bfcl"
    (dest / "possible_answer").mkdir(parents=True, exist_ok=True)
    for cat in SINGLE_TURN_CATEGORIES + MULTI_TURN_CATEGORIES:
        name = f"BFCL_v4_{cat}.json"
        size = SAMPLE_SIZES.get(cat, SAMPLE_PER_CATEGORY)
        lines = (source / name).read_text(encoding="utf-8").splitlines()[:size]
        (dest / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        if cat not in NO_ANSWER_CATEGORIES:
            ids = {json.loads(line)["id"] for line in lines}
            answers = [a for a in (source / "possible_answer" / name).read_text(encoding="utf-8").splitlines()
                       if a.strip() and json.loads(a)["id"] in ids]
            (dest / "possible_answer" / name).write_text("\n".join(answers) + "\n", encoding="utf-8")
