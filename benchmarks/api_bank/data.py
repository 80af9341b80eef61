"""Where API-Bank's data is read from, and the maintainers' tool that builds the packaged sample.

``<data_dir>/api_bank/`` holds the official test sets (``test-data/``), the recorded dialogues
(``lv1-lv2-samples/``), the backends' initial tables (``init_database/``) and ToolRL's processed files
(``toolrl/``), as described in ``shared/data/SOURCES.md``; without a data directory the packaged ``sample/`` of this
folder is read (the same layout).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv.envs.data import benchmark_dir, read_json

__all__ = ["OFFICIAL_FILES", "SAMPLE", "api_bank_dir", "build_sample"]

SAMPLE = Path(__file__).with_name("sample")
OFFICIAL_FILES = {1: "level-1-api.json", 2: "level-2-api.json", 3: "level-3-batch-inf.json"}  # test-data/, by level


def api_bank_dir(data_dir: str | None = None) -> Path:
    """``<data_dir>/api_bank``, else the packaged sample (`genenv.envs.data.benchmark_dir`)."""
    return benchmark_dir("api_bank", data_dir, SAMPLE)


def build_sample(source: Path, dest: Path = SAMPLE) -> None:
    """Write the packaged API-Bank sample (same layout as the full data) from the full data dir ``source``.

    Kept: per official file of levels 1-2, the first sample of every gold API without and with earlier calls in
    its dialogue (so the level-1/2 catalogue is complete and replay is exercised), and up to 40 response samples
    of those dialogues; per ToolRL file, the first sample of every gold API; level 3, the first 10 tasks, their
    steps and responses; the dialogues those samples come from; ``init_database/`` (ImageCaptioning cut to the
    images of the kept dialogues plus 20 more).
    """
    src, out = Path(source) / "api_bank", Path(dest)

    def first_per_api(records: list[dict[str, Any]], name_of) -> list[dict[str, Any]]:
        seen, kept = set(), []
        for rec in records:
            if name_of(rec) not in seen:
                seen.add(name_of(rec))
                kept.append(rec)
        return kept

    def write(rel: str, data: Any) -> None:
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")

    def call_name(text: str) -> str:
        return text.split("[", 1)[-1].split("(", 1)[0]

    files: dict[int, set[str]] = {1: set(), 2: set()}
    for level in (1, 2):
        recs = first_per_api(read_json(src / "test-data" / OFFICIAL_FILES[level]),
                             lambda r: (call_name(r["expected_output"]), "API-Request:" in r["input"]))
        files[level].update(r["file"] for r in recs)
        write(f"test-data/{OFFICIAL_FILES[level]}", recs)
        toolrl = read_json(src / "toolrl" / f"level-{level}-api_processed.json")
        kept = first_per_api(toolrl, lambda r: (r["answer"] if isinstance(r["answer"], list)
                                                else [r["answer"]])[0]["name"])
        write(f"toolrl/level-{level}-api_processed.json", kept)
    for level in (1, 2):  # the response samples of the kept dialogues
        name = f"level-{level}-response.json"
        kept = [r for r in read_json(src / "test-data" / name) if r["file"] in files[level]]
        write(f"test-data/{name}", kept[:40])
    write("test-data/level-3-batch-inf-response.json",
          [r for r in read_json(src / "test-data" / "level-3-batch-inf-response.json") if r["sample_id"] < 10])
    write("test-data/level-3.json", read_json(src / "test-data" / "level-3.json")[:10])
    write("test-data/level-3-batch-inf.json",
          [r for r in read_json(src / "test-data" / "level-3-batch-inf.json") if r["sample_id"] < 10])
    write("toolrl/level-3-api_processed.json",
          [r for r in read_json(src / "toolrl" / "level-3-api_processed.json") if r["other"]["sample_id"] < 10])
    from genenv.benchmarks.api_bank.apis.catalogue import DIALOGUE_DIRS

    urls: set[str] = set()
    for level, names in files.items():
        for name in sorted(names):
            text = (src / "lv1-lv2-samples" / DIALOGUE_DIRS[level] / name).read_text(encoding="utf-8")
            (out / "lv1-lv2-samples" / DIALOGUE_DIRS[level]).mkdir(parents=True, exist_ok=True)
            (out / "lv1-lv2-samples" / DIALOGUE_DIRS[level] / name).write_text(text, encoding="utf-8")
            urls.update(u for u in text.replace('"', " ").replace("'", " ").split() if u.startswith("http"))
    (out / "init_database").mkdir(parents=True, exist_ok=True)
    for path in sorted((src / "init_database").glob("*.json")):
        if path.stem == "ImageCaptioning":
            entries = read_json(path)
            write("init_database/ImageCaptioning.json",
                  [e for e in entries if e["url"] in urls] + [e for e in entries[:20] if e["url"] not in urls])
        else:
            (out / "init_database" / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
