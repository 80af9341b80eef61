"""TravelPlanner's queries as tasks, where the data is read from, and the maintainers' tool that builds the packaged
sample.

Data (``<data_dir>/travelplanner/``, ``shared/data/SOURCES.md`` section 5; without a data directory the packaged
``sample/`` of this folder, the same layout):

- ``validation``: the 102 validation queries with all fields (``validation/validation_with_hidden_profile.csv``,
  42 medium + 60 hard), ids ``travelplanner-val-<idx>`` with the benchmark's 1-180 numbering
  (``validation/validation_index.jsonl``). They have no gold plan (the 180 example plans of
  ``example_evaluation.jsonl`` are an example model output); their gold is the plan the constructive search
  finds (`genenv.benchmarks.travelplanner.search`), or ``None`` where it finds none.
- ``train``: the 45 annotated train queries (``train/std_travelplanner.jsonl``: query text and the human plan;
  ``train/train_ref_info.jsonl``: reference information), ids ``travelplanner-train-<sha1 of the query text, 8
  hex>`` (``metadata["index"]`` is the position in the file, 0-44). Their fields are read from the text
  (`extract_fields`); the gold is the annotated plan.
- Split names: ``validation`` and ``train``; ``test`` and ``heldout`` are names for ``validation`` (the official
  test set's plans are graded only by the benchmark's server, and its fields are not public). Loader options
  ``level`` (easy / medium / hard) and ``days`` (3 / 5 / 7) filter the queries.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from genenv.benchmarks.travelplanner.db import (TRAIN_REF_FILE, VALIDATION_FILE, TravelDB, literal_sections,
                                                load_database, read_table)
from genenv.benchmarks.travelplanner.plan import normalize_plan
from genenv.benchmarks.travelplanner.prompts import tool_schemas
from genenv.benchmarks.travelplanner.query import QUERY_FIELDS, extract_fields
from genenv.benchmarks.travelplanner.reference import reference_calls, reference_cities, render_reference
from genenv.benchmarks.travelplanner.search import search_plan
from genenv.envs.data import DataError, benchmark_dir, benchmark_file, iter_jsonl
from genenv.envs.parsing import ActionParseError, parse_literal
from genenv.envs.task import Task

__all__ = ["MODES", "SAMPLE", "SPLITS", "build_sample", "load_travelplanner_tasks", "query_task", "travelplanner_dir"]

SAMPLE = Path(__file__).with_name("sample")
SPLITS = ("validation", "train")
SPLIT_ALIASES = {"test": "validation", "heldout": "validation"}
MODES = ("sole_planning", "two_stage")
LEVELS = ("easy", "medium", "hard")
STD_FILE = ("train", "std_travelplanner.jsonl")
INDEX_FILE = ("validation", "validation_index.jsonl")


def travelplanner_dir(data_dir: str | None = None) -> Path:
    """``<data_dir>/travelplanner``, else the packaged sample (`genenv.envs.data.benchmark_dir`)."""
    return benchmark_dir("travelplanner", data_dir, SAMPLE)


def _train_records(root: Path, db: TravelDB) -> list[dict[str, Any]]:
    std = benchmark_file(root, *STD_FILE)
    ref = benchmark_file(root, *TRAIN_REF_FILE)
    chats = list(iter_jsonl(std))
    refs = list(iter_jsonl(ref))
    if len(chats) != len(refs):
        raise DataError(f"{std} has {len(chats)} queries but {ref} has {len(refs)} reference records")
    records = []
    for i, ((lineno, chat), (_, info)) in enumerate(zip(chats, refs)):
        where = f"{std}: line {lineno}"
        try:
            user, assistant = chat["messages"][1]["content"], chat["messages"][2]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise DataError(f"{where}: expected messages [system, user, assistant]") from exc
        if "Query:" not in user:
            raise DataError(f"{where}: the user turn has no 'Query:'")
        text = user.rsplit("Query:", 1)[1].strip()
        descriptions = list(info)
        if descriptions and descriptions[0] not in user:
            raise DataError(f"{ref}: record {i + 1} ({descriptions[0]!r}) does not belong to {where}")
        try:
            fields = extract_fields(text, db.city_state, db.state_cities)
            plan = normalize_plan(parse_literal(assistant))
        except (ValueError, ActionParseError) as exc:
            raise DataError(f"{where}: {exc}") from exc
        digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]  # stable in the full data and the sample
        records.append({"id": f"travelplanner-train-{digest}", "index": i, "fields": fields, "plan": plan,
                        "calls": reference_calls(descriptions, f"{ref}: record {i + 1}")})
    return records


def _validation_records(root: Path) -> list[dict[str, Any]]:
    import ast

    path = benchmark_file(root, *VALIDATION_FILE)
    frame = read_table(path, [*QUERY_FIELDS, "query", "level", "reference_information"])
    index_path = benchmark_file(root, *INDEX_FILE)
    idx_of = {rec["csv_row"]: rec["idx"] for _, rec in iter_jsonl(index_path)
              if rec.get("in_validation_with_hidden_profile")}
    records = []
    for row_no, row in frame.iterrows():
        where = f"{path}: row {row_no}"
        try:
            fields = {"org": str(row["org"]), "dest": str(row["dest"]), "days": int(row["days"]),
                      "visiting_city_number": int(row["visiting_city_number"]),
                      "date": list(ast.literal_eval(row["date"])), "people_number": int(row["people_number"]),
                      "local_constraint": dict(ast.literal_eval(row["local_constraint"])),
                      "budget": int(row["budget"]), "level": str(row["level"]), "query": str(row["query"])}
        except (ValueError, SyntaxError, TypeError) as exc:
            raise DataError(f"{where}: malformed field ({exc})") from exc
        if row_no not in idx_of:
            raise DataError(f"{index_path}: no entry for csv_row {row_no}")
        sections = literal_sections(row["reference_information"], where)
        records.append({"id": f"travelplanner-val-{idx_of[row_no]}", "index": idx_of[row_no], "fields": fields,
                        "plan": None, "calls": reference_calls([s["Description"] for s in sections], where)})
    return records


@lru_cache(maxsize=8)
def _load_cached(root: str, split: str) -> tuple[Task, ...]:
    base = Path(root)
    db = load_database(base)
    records = _train_records(base, db) if split == "train" else _validation_records(base)
    tasks = []
    for rec in records:
        fields, calls = rec["fields"], rec["calls"]
        gold, extra = rec["plan"], {"gold_source": "annotated"}
        if gold is None:
            found = search_plan(fields, db, cities=reference_cities(calls))
            gold, extra = found.plan, {"gold_source": "search" if found.plan else None,
                                       "search": {"reason": found.reason, "detail": found.detail, "cost": found.cost}}
        tasks.append(query_task(rec["id"], split, fields, calls, gold, db, index=rec["index"], **extra))
    return tuple(tasks)


def query_task(task_id: str, split: str, fields: dict[str, Any], calls: list[list[Any]],
               gold: list[dict[str, Any]] | None, db: TravelDB, mode: str = "sole_planning", index: int | None = None,
               gold_source: str | None = "search", search: dict[str, Any] | None = None, **task_fields: Any) -> Task:
    """The `Task` of one query: ``prompt`` = the query text, ``gold`` = the plan, ``metadata``: ``query``
    (fields), ``level``, ``index``, ``reference_calls``, ``reference`` (rendered from ``db``), ``gold_source``
    and ``search`` (when a search found the gold). ``mode="two_stage"`` gives the two-stage benchmark's task (its
    tools listed). ``task_fields`` go to the `Task` (origin, parent id, generation step)."""
    metadata: dict[str, Any] = {"query": fields, "level": fields["level"], "index": index, "reference_calls": calls,
                                "reference": render_reference(calls, db), "gold_source": gold_source}
    if search is not None:
        metadata["search"] = search
    task = Task(id=task_id, benchmark="travelplanner", split=split, prompt=fields["query"], gold=gold,
                action_kind="structured", metadata=metadata, **task_fields)
    return as_mode(task, mode)


def as_mode(task: Task, mode: str) -> Task:
    """``task`` (in place) as a task of ``mode``'s benchmark: ``travelplanner_two_stage`` lists the six tools.

    Raises:
        ValueError: unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"unknown TravelPlanner mode {mode!r}; choose one of {MODES}")
    if mode == "two_stage":
        task.benchmark, task.tools = "travelplanner_two_stage", tool_schemas()
    return task


def load_travelplanner_tasks(split: str | None = "validation", data_dir: str | None = None, level: str | None = None,
                             days: int | None = None, mode: str = "sole_planning") -> list[Task]:
    """Load the TravelPlanner queries of ``split`` as tasks (see the module docstring).

    Args:
        split: ``validation`` (alias ``test`` / ``heldout``) or ``train``.
        data_dir: data directory (default ``$GENENV_DATA_DIR``, else the packaged samples).
        level / days: keep only queries of this level / length.
        mode: ``sole_planning`` (benchmark ``travelplanner``) or ``two_stage`` (``travelplanner_two_stage``).
    Returns:
        tasks in file order; ``gold`` = the plan (annotated, or found by the search, or ``None``);
        ``metadata``: ``query`` (fields), ``level``, ``index``, ``reference_calls``, ``reference`` (rendered),
        ``gold_source`` (``annotated`` / ``search`` / ``None``), ``search`` (validation: the search's outcome).
    Raises:
        ValueError: unknown split, mode, level or days. DataError: missing or malformed data.
    """
    split = SPLIT_ALIASES.get(split or "validation", split or "validation")
    if split not in SPLITS:
        raise ValueError(f"unknown TravelPlanner split {split!r}; choose one of {SPLITS + tuple(SPLIT_ALIASES)}")
    if mode not in MODES:
        raise ValueError(f"unknown TravelPlanner mode {mode!r}; choose one of {MODES}")
    if level is not None and level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; choose one of {LEVELS}")
    if days is not None and int(days) not in (3, 5, 7):
        raise ValueError(f"days must be 3, 5 or 7, got {days!r}")
    tasks = copy.deepcopy(list(_load_cached(str(travelplanner_dir(data_dir).resolve()), split)))
    tasks = [t for t in tasks if (level is None or t.metadata["level"] == level)
             and (days is None or t.metadata["query"]["days"] == int(days))]
    return [as_mode(t, mode) for t in tasks]


SAMPLE_TRAIN = (0, 1, 5, 15, 30)  # easy 3-day x2, easy 5-day, medium 3-day, hard 3-day
SAMPLE_VALIDATION_ROWS = 4  # the first rows (medium, 3- and 5-day), plus the first hard 3- and 7-day queries
DEMO_CITIES = ("Washington", "Myrtle Beach")


def build_sample(source: Path, dest: Path = SAMPLE) -> None:
    """Write the packaged TravelPlanner sample (same layout as the full data) from the full data dir ``source``.

    Kept: train queries `SAMPLE_TRAIN` (both train files, same order); the first
    `SAMPLE_VALIDATION_ROWS` validation rows and the first hard 3-day and 7-day ones, with their index
    entries renumbered to the sample's rows; every database row (before ``dropna``, so the sandbox is the same) of
    the cities those queries' reference information names, of their origins and of the demonstration's cities;
    the distance rows between those cities; the full city list.
    """
    import ast

    src, out = Path(source) / "travelplanner", Path(dest)
    for sub in ("train", "validation", "database/accommodations", "database/restaurants", "database/attractions",
                "database/googleDistanceMatrix", "database/background"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    cities: set[str] = set(DEMO_CITIES)
    std = (src / "train" / "std_travelplanner.jsonl").read_text(encoding="utf-8").splitlines()
    refs = (src / "train" / "train_ref_info.jsonl").read_text(encoding="utf-8").splitlines()
    for name, lines in (("std_travelplanner.jsonl", std), ("train_ref_info.jsonl", refs)):
        (out / "train" / name).write_text("".join(lines[i] + "\n" for i in SAMPLE_TRAIN), encoding="utf-8")
    for i in SAMPLE_TRAIN:
        for description in json.loads(refs[i]):
            for _, args in reference_calls([description], "sample"):
                cities.update(a for a in args[:2] if not re.match(r"\d{4}-", a))
    frame = pd.read_csv(src / "validation" / "validation_with_hidden_profile.csv")
    hard = frame[frame["level"] == "hard"]
    rows = list(range(SAMPLE_VALIDATION_ROWS)) + [int(hard[hard["days"] == d].index[0]) for d in (3, 7)]
    frame.iloc[rows].to_csv(out / "validation" / "validation_with_hidden_profile.csv", index=False)
    index = {rec["csv_row"]: rec for _, rec in iter_jsonl(src / "validation" / "validation_index.jsonl")
             if rec.get("in_validation_with_hidden_profile")}
    (out / "validation" / "validation_index.jsonl").write_text(
        "".join(json.dumps({**index[r], "csv_row": k}, ensure_ascii=False) + "\n" for k, r in enumerate(rows)),
        encoding="utf-8")
    for r in rows:
        cities.add(frame.loc[r, "org"])
        for section in ast.literal_eval(frame.loc[r, "reference_information"]):
            for _, args in reference_calls([section["Description"]], "sample"):
                cities.update(a for a in args[:2] if not re.match(r"\d{4}-", a))
    for rel, column in (("accommodations/clean_accommodations_2022.csv", "city"),
                        ("restaurants/clean_restaurant_2022.csv", "City"), ("attractions/attractions.csv", "City")):
        table = pd.read_csv(src / "database" / rel)
        table[table[column].isin(cities)].to_csv(out / "database" / rel, index=False)
    distances = pd.read_csv(src / "database" / "googleDistanceMatrix" / "distance.csv")
    distances[distances["origin"].isin(cities) & distances["destination"].isin(cities)].to_csv(
        out / "database" / "googleDistanceMatrix" / "distance.csv", index=False)
    (out / "database" / "background" / "citySet_with_states.txt").write_text(
        (src / "database" / "background" / "citySet_with_states.txt").read_text(encoding="utf-8"), encoding="utf-8")
