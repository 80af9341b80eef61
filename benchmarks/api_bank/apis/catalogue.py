"""The API catalogue and database tables of API-Bank, read from the data directory (``<data_dir>/api_bank/``).

Catalogue (``{api name: {name, description, input_parameters, output_parameters}}``), per suite:

- ``lv12``: the API descriptions listed in the level-1 prompts (``test-data/level-1-api.json``, after
  "API descriptions:"), then any other API found by a recorded ToolSearcher call in ``lv1-lv2-samples/``, plus
  ToolSearcher's own description from the level-2 prompts;
- ``lv3``: the descriptions returned by the recorded ToolSearcher calls of ``test-data/level-3.json``, plus
  ToolSearcher's description from the level-3 step prompts.

Tables: every ``init_database/*.json`` by file stem, plus ``recorded/Dictionary`` and ``recorded/Translate``,
the web-service results recorded in the dialogues (see `genenv.benchmarks.api_bank.apis.info`).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from genenv.benchmarks.api_bank.apis.info import recorded_key
from genenv.envs.data import DataError, iter_jsonl, read_json

__all__ = ["DIALOGUE_DIRS", "dialogue", "load_catalogue", "load_tables", "prompt_descriptions"]

DIALOGUE_DIRS = {1: "level-1-given-desc", 2: "level-2-toolsearcher"}


def _entry(desc: dict[str, Any]) -> dict[str, Any]:
    """A description in the catalogue layout (the level-2/3 prompts use ``apiCode``/``parameters``/``response``)."""
    return {"name": desc.get("name", desc.get("apiCode")), "description": desc.get("description", ""),
            "input_parameters": desc.get("input_parameters", desc.get("parameters", {})) or {},
            "output_parameters": desc.get("output_parameters", desc.get("response", {})) or {}}


def prompt_descriptions(text: str) -> list[dict[str, Any]]:
    """The JSON API descriptions in a prompt: every line that is a JSON object with ``name`` or ``apiCode``."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and ('"name"' in line or '"apiCode"' in line):
            try:
                desc = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(desc, dict) and (desc.get("name") or desc.get("apiCode")):
                found.append(_entry(desc))
    return found


def dialogue(root: Path, level: int, file: str) -> list[dict[str, Any]]:
    """The turns of one recorded level-1/2 dialogue (``lv1-lv2-samples/<dir>/<file>``)."""
    path = root / "lv1-lv2-samples" / DIALOGUE_DIRS[level] / file
    if not path.is_file():
        raise DataError(f"missing API-Bank dialogue {path}; point GENENV_DATA_DIR at the full data folder")
    return [rec for _, rec in iter_jsonl(path)]


def _dialogue_api_turns(root: Path):
    for level, sub in DIALOGUE_DIRS.items():
        folder = root / "lv1-lv2-samples" / sub
        for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
            for _, turn in iter_jsonl(path):
                if turn.get("role") == "API":
                    yield level, turn


@functools.lru_cache(maxsize=8)
def load_catalogue(root: Path, suite: str) -> dict[str, dict[str, Any]]:
    """The catalogue of ``suite`` (``"lv12"`` / ``"lv3"``) from the data under ``root`` (cached per root).

    Raises:
        DataError: no API description found (the data folder lacks the API-Bank test files).
    """
    base = Path(root) / "test-data"
    catalogue: dict[str, dict[str, Any]] = {}

    def add(entry: dict[str, Any]) -> None:
        if entry.get("name"):
            catalogue.setdefault(entry["name"], entry)

    if suite == "lv12":
        for path in (base / "level-1-api.json", base / "level-2-api.json"):
            if path.is_file():
                for rec in read_json(path):
                    for entry in prompt_descriptions(rec.get("instruction", "") + "\n" + rec.get("input", "")):
                        add(entry)
        for _, turn in _dialogue_api_turns(Path(root)):
            if turn.get("api_name") == "ToolSearcher":
                output = (turn.get("result") or {}).get("output")
                for item in output if isinstance(output, list) else [output]:
                    if isinstance(item, dict):
                        add(_entry(item))
    else:
        for path in (base / "level-3-batch-inf.json",):
            if path.is_file():
                for rec in read_json(path)[:1]:
                    for entry in prompt_descriptions(rec.get("input", "")):
                        add(entry)
        path = base / "level-3.json"
        if path.is_file():
            for task in read_json(path):
                for call in task.get("apis", []):
                    if call.get("api_name") == "ToolSearcher":
                        add(_entry(call["output"]["output"]))
    if not catalogue:
        raise DataError(f"no API-Bank API descriptions under {base}; point GENENV_DATA_DIR at the full data folder")
    return catalogue


@functools.lru_cache(maxsize=4)
def load_tables(root: Path) -> dict[str, Any]:
    """``init_database/*.json`` by stem, plus the recorded web-service results (read-only: runtimes copy them).

    Raises:
        DataError: ``init_database/`` is missing.
    """
    folder = Path(root) / "init_database"
    if not folder.is_dir():
        raise DataError(f"missing {folder}; point GENENV_DATA_DIR at the full data folder")
    tables: dict[str, Any] = {p.stem: read_json(p) for p in sorted(folder.glob("*.json"))}
    recorded: dict[str, dict[str, Any]] = {"recorded/Dictionary": {}, "recorded/Translate": {}}
    for _, turn in _dialogue_api_turns(Path(root)):
        name, result = turn.get("api_name"), turn.get("result") or {}
        if name in ("Dictionary", "Translate") and result.get("exception") is None:
            recorded[f"recorded/{name}"][recorded_key(name, turn.get("param_dict") or {})] = result.get("output")
    tables.update(recorded)
    return tables
