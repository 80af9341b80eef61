"""TravelPlanner environments: sole planning (``genenv/TravelPlanner-v0``) and two-stage tool use
(``genenv/TravelPlannerTwoStage-v0``), over the benchmark's real database.

Data (``<data_dir>/travelplanner/``, ``shared/data/SOURCES.md`` section 5):

- ``validation``: the 102 validation queries with all fields (``validation/validation_with_hidden_profile.csv``,
  42 medium + 60 hard), ids ``travelplanner-val-<idx>`` with the benchmark's 1-180 numbering
  (``validation/validation_index.jsonl``). They have no gold plan (the 180 example plans of
  ``example_evaluation.jsonl`` are an example model output); their gold is the plan the constructive search
  finds (:mod:`genenv.envs.travelplanner_search`), or ``None`` where it finds none.
- ``train``: the 45 annotated train queries (``train/std_travelplanner.jsonl``: query text and the human plan;
  ``train/train_ref_info.jsonl``: reference information), ids ``travelplanner-train-<sha1 of the query text, 8 hex>``
  (``metadata["index"]`` is the position in the file, 0-44). Their fields are
  read from the text (:func:`~genenv.envs.travelplanner_query.extract_fields`); the gold is the annotated plan.
- Split names: ``validation`` and ``train``; ``test`` and ``heldout`` are names for ``validation`` (the official
  test set's plans are graded only by the benchmark's server, and its fields are not public). Loader options
  ``level`` (easy / medium / hard) and ``days`` (3 / 5 / 7) filter the queries.

A query's reference information is the list of its sections ("Attractions in X", "Flight from A to B on D",
"Self-driving from A to B", ...); each section is the answer of one of the six tools
(:meth:`~genenv.envs.travelplanner_db.TravelDB.tool`) and is rendered by it, compactly, from the database. Sole
planning shows all of it in the prompt; in two-stage mode the agent calls the tools itself, and the gold action
sequence is those calls followed by the plan.

Action: a plan = a list of day records with the keys of :data:`PLAN_KEYS`, as JSON, in the annotated Python-
literal form (read with :func:`ast.literal_eval`, never ``eval``), or as "Day N:" blocks of "Key: value" lines
(:func:`parse_plan`). Reward (both modes): :func:`genenv.rewards.travelplanner.plan_reward`, the share of the
query's constraints the plan passes (0 unless it fills exactly ``days`` days); ``success`` = the benchmark's
final pass (every constraint). ``info``: ``delivered``, ``cs`` / ``hd`` (check -> bool), ``cost``, ``passed``,
``total``, ``final_pass``, ``level``, ``error`` (the first failed check, or the parse error).
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

from genenv.envs.base import InvalidAction, MultiStepTaskEnv, TaskEnv, parse_or_invalid
from genenv.envs.data import DataError, benchmark_file, iter_jsonl, resolve_data_dir
from genenv.envs.parsing import (
    MAX_ACTION_CHARS, ActionParseError, ToolCall, parse_bracket_call, parse_literal, strip_think,
)
from genenv.envs.registry import register_env
from genenv.envs.task import Task
from genenv.envs.travelplanner_db import (
    FLIGHT_SECTION_RE,
    TOOL_ALIASES,
    TOOLS,
    TRAIN_REF_FILE,
    VALIDATION_FILE,
    TravelDB,
    literal_sections,
    load_database,
    read_table,
)
from genenv.envs.travelplanner_query import QUERY_FIELDS, extract_fields
from genenv.envs.travelplanner_search import search_plan
from genenv.rewards.travelplanner import evaluate_plan, plan_reward

SPLITS = ("validation", "train")
SPLIT_ALIASES = {"test": "validation", "heldout": "validation"}
MODES = ("sole_planning", "two_stage")
LEVELS = ("easy", "medium", "hard")
PLAN_KEYS = ("days", "current_city", "transportation", "breakfast", "attraction", "lunch", "dinner",
             "accommodation")
MAX_PLAN_DAYS = 14
STD_FILE = ("train", "std_travelplanner.jsonl")
INDEX_FILE = ("validation", "validation_index.jsonl")

_KEY_ALIASES = {"day": "days", "days": "days", "current_city": "current_city", "city": "current_city",
                "transportation": "transportation", "transport": "transportation", "breakfast": "breakfast",
                "attraction": "attraction", "attractions": "attraction", "lunch": "lunch", "dinner": "dinner",
                "accommodation": "accommodation", "accommodations": "accommodation"}
_DAY_HEADER_RE = re.compile(r"^[ \t#*]*day[ \t]*(\d+)[ \t*]*:?[ \t*]*$", re.IGNORECASE | re.MULTILINE)
_FIELD_RE = re.compile(r"^[ \t\-*]*(current[ _]city|transportation|breakfast|attractions?|lunch|dinner|"
                       r"accommodations?)[ \t*]*:[ \t]*(.*?)[ \t]*$", re.IGNORECASE | re.MULTILINE)
_SECTION_RES = {
    "AttractionSearch": re.compile(r"^Attractions in (.+)$"),
    "RestaurantSearch": re.compile(r"^Restaurants in (.+)$"),
    "AccommodationSearch": re.compile(r"^Accommodations in (.+)$"),
}
_DRIVE_SECTION_RE = re.compile(r"^(Self-driving|Taxi) from (.+) to (.+)$")


# ----- plans -----
def _norm_value(key: str, value: Any, day: int) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or isinstance(value, dict):
        raise ActionParseError(f"day {day}: {key} must be text, got {type(value).__name__}")
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        if not all(isinstance(v, str) for v in value):
            raise ActionParseError(f"day {day}: {key} must be text or a list of text")
        return ";".join(v.strip() for v in value) + (";" if value and key == "attraction" else "")
    if not isinstance(value, str):
        raise ActionParseError(f"day {day}: {key} must be text, got {type(value).__name__}")
    return value.strip()


def normalize_plan(days: Any) -> list[dict[str, Any]]:
    """Day records in our structure: keys mapped to :data:`PLAN_KEYS` (case, spaces, ``day``/``attractions``
    aliases), values stripped text (``None`` -> ``-``, a list of attractions joined with ``;``), ``days`` an int
    (the record's position when absent); unknown keys dropped; empty records kept (they count as unfilled days).

    Raises:
        ActionParseError: not a non-empty list of objects, more than :data:`MAX_PLAN_DAYS` records, or a value that
            is not text.
    """
    if isinstance(days, dict) and isinstance(days.get("plan"), list):
        days = days["plan"]
    if not isinstance(days, list):
        raise ActionParseError(f"a plan must be a list of day records, got {type(days).__name__}")
    if not days:
        raise ActionParseError("empty plan")
    if len(days) > MAX_PLAN_DAYS:
        raise ActionParseError(f"a plan has at most {MAX_PLAN_DAYS} days, got {len(days)}")
    plan = []
    for i, record in enumerate(days, 1):
        if not isinstance(record, dict):
            raise ActionParseError(f"day {i} is a {type(record).__name__}, expected an object")
        day: dict[str, Any] = {}
        for key, value in record.items():
            name = _KEY_ALIASES.get(str(key).strip().lower().replace(" ", "_"))
            if name == "days":
                day["days"] = value if isinstance(value, int) and not isinstance(value, bool) else i
            elif name:
                day[name] = _norm_value(name, value, i)
        if day and "days" not in day:
            day["days"] = i
        plan.append(day)
    if not any(plan):
        raise ActionParseError("every day record is empty")
    return plan


def _day_blocks(text: str) -> list[dict[str, Any]]:
    headers = list(_DAY_HEADER_RE.finditer(text))
    if not headers:
        raise ActionParseError("no plan found (expected a JSON list of day objects or 'Day 1:' blocks)")
    days = []
    for k, header in enumerate(headers):
        body = text[header.end():headers[k + 1].start() if k + 1 < len(headers) else len(text)]
        fields = {m.group(1).lower().replace(" ", "_"): m.group(2) for m in _FIELD_RE.finditer(body)}
        if not fields:
            raise ActionParseError(f"Day {header.group(1)} has no 'Current City: ...' style lines")
        days.append({"days": int(header.group(1)), **fields})
    return days


def parse_plan(text: str) -> list[dict[str, Any]]:
    """A plan from model text: a JSON or Python-literal list of day objects (or ``{"plan": [...]}``), found
    anywhere in the text (:func:`~genenv.envs.parsing.parse_literal`), else "Day N:" blocks of "Current City:",
    "Transportation:", ... lines (the benchmark's text format); then :func:`normalize_plan`.

    Raises:
        ActionParseError: neither form is present, or the structure is wrong (the message says how); a plan is
            never guessed from other text.
    """
    try:
        value, literal_error = parse_literal(text), None
    except ActionParseError as exc:
        value, literal_error = None, exc
    structure_error = None
    if value is not None:
        try:
            return normalize_plan(value)
        except ActionParseError as exc:  # a list or object that is not a plan; the text form may still be there
            structure_error = exc
    try:
        blocks = _day_blocks(strip_think(text)) if isinstance(text, str) and len(text) <= MAX_ACTION_CHARS else None
    except ActionParseError:
        blocks = None
    if blocks:
        return normalize_plan(blocks)
    if structure_error is not None:
        raise structure_error
    raise ActionParseError(f"no plan found: {literal_error}")


def plan_text(plan: list[dict[str, Any]]) -> str:
    """A plan as model text: a JSON list, one day per line (what :func:`parse_plan` reads back)."""
    return "[\n" + ",\n".join(json.dumps(day, ensure_ascii=False) for day in plan) + "\n]"


# ----- reference information -----
def reference_calls(descriptions: list[str], where: str) -> list[list[Any]]:
    """The tool call behind each reference section description: ``[[tool, [args]], ...]``.

    Raises:
        DataError: a description of an unknown kind.
    """
    calls = []
    for d in descriptions:
        flight = FLIGHT_SECTION_RE.match(d)
        drive = _DRIVE_SECTION_RE.match(d)
        if flight:
            calls.append(["FlightSearch", list(flight.groups())])
        elif drive:
            calls.append(["GoogleDistanceMatrix", [drive.group(2), drive.group(3), drive.group(1).lower()]])
        else:
            tool = next((t for t, rx in _SECTION_RES.items() if rx.match(d)), None)
            if tool is None:
                raise DataError(f"{where}: unknown reference section {d[:60]!r}")
            calls.append([tool, [_SECTION_RES[tool].match(d).group(1)]])
    return calls


def section_title(tool: str, args: list[str]) -> str:
    """The reference section title of a tool call (the benchmark's wording)."""
    if tool == "FlightSearch":
        return f"Flight from {args[0]} to {args[1]} on {args[2]}"
    if tool == "GoogleDistanceMatrix":
        return f"{'Self-driving' if args[2] == 'self-driving' else 'Taxi'} from {args[0]} to {args[1]}"
    if tool == "CitySearch":
        return f"Cities in {args[0]}"
    return {"AttractionSearch": "Attractions", "RestaurantSearch": "Restaurants",
            "AccommodationSearch": "Accommodations"}[tool] + f" in {args[0]}"


def render_reference(calls: list[list[Any]], db: TravelDB) -> str:
    """The reference information of ``calls``: one ``Title:`` block per call with the tool's compact answer."""
    return "\n\n".join(f"{section_title(tool, args)}:\n{db.tool(tool, args)}" for tool, args in calls)


def route_calls(query: dict[str, Any], route: list[str]) -> list[list[Any]]:
    """The reference calls of a query travelling ``route`` (cities in order): each city's attractions,
    restaurants and accommodations, then per leg the flights on its date, self-driving and taxi (the layout of
    the benchmark's reference information)."""
    calls: list[list[Any]] = []
    for city in route:
        calls += [["AttractionSearch", [city]], ["RestaurantSearch", [city]], ["AccommodationSearch", [city]]]
    stops = [query["org"]] + list(route) + [query["org"]]
    for k in range(len(stops) - 1):
        date = query["date"][min(2 * k, len(query["date"]) - 1)]
        calls += [["FlightSearch", [stops[k], stops[k + 1], date]],
                  ["GoogleDistanceMatrix", [stops[k], stops[k + 1], "self-driving"]],
                  ["GoogleDistanceMatrix", [stops[k], stops[k + 1], "taxi"]]]
    return calls


def reference_cities(calls: list[list[Any]]) -> list[str]:
    """The destination cities of reference ``calls`` (those with an attraction / restaurant / accommodation
    search), in order."""
    return list(dict.fromkeys(args[0] for tool, args in calls if tool in _SECTION_RES))


# ----- loading -----
def _train_records(root: Path, db: TravelDB) -> list[dict[str, Any]]:
    std = benchmark_file(root, "travelplanner", *STD_FILE)
    ref = benchmark_file(root, "travelplanner", *TRAIN_REF_FILE)
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

    path = benchmark_file(root, "travelplanner", *VALIDATION_FILE)
    frame = read_table(path, [*QUERY_FIELDS, "query", "level", "reference_information"])
    index_path = benchmark_file(root, "travelplanner", *INDEX_FILE)
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
        metadata: dict[str, Any] = {"query": fields, "level": fields["level"], "index": rec["index"],
                                    "reference_calls": calls, "reference": render_reference(calls, db)}
        gold = rec["plan"]
        if gold is not None:
            metadata["gold_source"] = "annotated"
        else:
            found = search_plan(fields, db, cities=reference_cities(calls))
            gold = found.plan
            metadata["gold_source"] = "search" if found.plan else None
            metadata["search"] = {"reason": found.reason, "detail": found.detail, "cost": found.cost}
        tasks.append(Task(id=rec["id"], benchmark="travelplanner", split=split, prompt=fields["query"], gold=gold,
                          action_kind="structured", metadata=metadata))
    return tuple(tasks)


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
    tasks = copy.deepcopy(list(_load_cached(str(resolve_data_dir(data_dir).resolve()), split)))
    tasks = [t for t in tasks if (level is None or t.metadata["level"] == level)
             and (days is None or t.metadata["query"]["days"] == int(days))]
    if mode == "two_stage":
        for t in tasks:
            t.benchmark = "travelplanner_two_stage"
            t.tools = tool_schemas()
    return tasks


def tool_schemas() -> list[dict[str, Any]]:
    """The six tools as function descriptions (``name``, ``description``, ``parameters``)."""
    descriptions = {
        "FlightSearch": "Flights from a city to a city on a date (YYYY-MM-DD).",
        "GoogleDistanceMatrix": "Duration, distance and cost of self-driving or a taxi between two cities.",
        "AccommodationSearch": "Accommodations in a city.", "RestaurantSearch": "Restaurants in a city.",
        "AttractionSearch": "Attractions in a city.", "CitySearch": "The cities of a state.",
    }
    return [{"name": name, "description": descriptions[name], "parameters": list(params)}
            for name, params in TOOLS.items()]


# ----- prompts -----
PLAN_FORMAT = (
    "Write the plan as a JSON list with one object per day and the keys \"days\", \"current_city\", "
    "\"transportation\", \"breakfast\", \"attraction\", \"lunch\", \"dinner\", \"accommodation\". Write every place "
    "as \"Name, City\" exactly as in the information; separate attractions with \";\"; write \"-\" when there is "
    "nothing. On a travel day current_city is \"from A to B\" and transportation is copied from the information "
    "(\"Flight Number: F..., from A to B, Departure Time: ..., Arrival Time: ...\" or \"Self-driving, from A to B, "
    "...\" or \"Taxi, from A to B, ...\"). Every other day needs breakfast, an attraction, lunch and dinner; every "
    "day but the last needs an accommodation; the last day returns to the origin. Never repeat a restaurant or an "
    "attraction, never mix self-driving with flights or taxis, stay at least an accommodation's minimum nights, "
    "and keep to the budget and the query's requirements.")
SOLE_SYSTEM = ("You are a travel planner. Plan the trip in the query using only the reference information. "
               + PLAN_FORMAT + " Reply with the JSON list only.")
# The demonstrated turn: validation query 1 of the benchmark (text only in our data, so never an evaluated task),
# with an excerpt of its real reference information and a plan that passes every check (tests verify both).
DEMO_QUERY = ("Please create a travel plan for me where I'll be departing from Washington and heading to Myrtle Beach "
              "for a 3-day trip from March 13th to March 15th, 2022. Can you help me keep this journey within a "
              "budget of $1,400?")
DEMO_REFERENCE = """Attractions in Myrtle Beach:
Name
SkyWheel Myrtle Beach
WonderWorks Myrtle Beach
Family Kingdom Amusement Park
(first 3 of 20 shown)

Restaurants in Myrtle Beach:
Name | Average Cost | Cuisines
The Night Owl | 12 | Desserts, Tea, American, Bakery, Indian, Seafood
Catfish Charlie's | 14 | Tea, Chinese, Desserts
La Pino'z Pizza | 14 | Cafe, Seafood, Fast Food
Nagai | 19 | Desserts, Pizza, Mexican, Fast Food, American, Seafood
First Eat | 21 | Tea, Mexican, Fast Food
(first 5 of 28 shown)

Accommodations in Myrtle Beach:
NAME | price | room type | house_rules | minimum nights | maximum occupancy
Greenwich Village Apartment | 781 | Entire home/apt | No parties & No pets | 3 | 6
Yellow submarine | 179 | Private room | No pets & No visitors & No children under 10 | 2 | 2
(first 2 of 19 shown)

Flight from Washington to Myrtle Beach on 2022-03-13:
There is no flight from Washington to Myrtle Beach on 2022-03-13.

Self-driving from Washington to Myrtle Beach:
self-driving, from Washington to Myrtle Beach, duration: 6 hours 47 mins, distance: 693 km, cost: 34

Taxi from Washington to Myrtle Beach:
taxi, from Washington to Myrtle Beach, duration: 6 hours 47 mins, distance: 693 km, cost: 693

Flight from Myrtle Beach to Washington on 2022-03-15:
There is no flight from Myrtle Beach to Washington on 2022-03-15.

Self-driving from Myrtle Beach to Washington:
self-driving, from Myrtle Beach to Washington, duration: 6 hours 45 mins, distance: 693 km, cost: 34

Taxi from Myrtle Beach to Washington:
taxi, from Myrtle Beach to Washington, duration: 6 hours 45 mins, distance: 693 km, cost: 693"""
DEMO_PLAN = [
    {"days": 1, "current_city": "from Washington to Myrtle Beach",
     "transportation": "Self-driving, from Washington to Myrtle Beach, duration: 6 hours 47 mins, distance: 693 km, "
                       "cost: 34", "breakfast": "-", "attraction": "-", "lunch": "-",
     "dinner": "Nagai, Myrtle Beach", "accommodation": "Yellow submarine, Myrtle Beach"},
    {"days": 2, "current_city": "Myrtle Beach", "transportation": "-", "breakfast": "The Night Owl, Myrtle Beach",
     "attraction": "SkyWheel Myrtle Beach, Myrtle Beach;WonderWorks Myrtle Beach, Myrtle Beach;",
     "lunch": "Catfish Charlie's, Myrtle Beach", "dinner": "La Pino'z Pizza, Myrtle Beach",
     "accommodation": "Yellow submarine, Myrtle Beach"},
    {"days": 3, "current_city": "from Myrtle Beach to Washington",
     "transportation": "Self-driving, from Myrtle Beach to Washington, duration: 6 hours 45 mins, distance: 693 km, "
                       "cost: 34", "breakfast": "First Eat, Myrtle Beach", "attraction": "-", "lunch": "-",
     "dinner": "-", "accommodation": "-"},
]


def sole_user_turn(reference: str, query: str) -> str:
    """The user message of sole planning: the reference information, then the query."""
    return f"Reference information:\n{reference}\n\nQuery: {query}"


# ----- environments -----
class _Scoring:
    """What both modes share: the database of the env's data directory and the plan verdict as reward + info."""

    db: TravelDB

    def plan_outcome(self, task: Task, plan: list[dict[str, Any]] | None,
                     parse_error: str = "") -> tuple[float, dict[str, Any]]:
        """``(reward, info)`` of ``plan`` (``None``: nothing delivered, with ``parse_error`` as the reason)."""
        query = task.metadata["query"]
        verdict = evaluate_plan(query, plan, self.db)
        reward = plan_reward(verdict, query, plan)
        failures = verdict.failures()
        error = parse_error or ("" if verdict.final_pass else (failures[0] if failures else "not a final pass"))
        return reward, {**verdict.to_info(), "success": verdict.final_pass, "error": error, "reward": reward,
                        "level": task.metadata.get("level"), "days": query.get("days")}


@register_env("genenv/TravelPlanner-v0", tuple({"split": s} for s in SPLITS),
              gym_entry_point="genenv.envs.travelplanner:make_travelplanner_env")
class TravelPlannerEnv(_Scoring, TaskEnv):
    """``genenv/TravelPlanner-v0``, sole planning: the reference information is in the prompt and one step
    submits the plan (see the module docstring).

    Constructor: ``split``, ``level``, ``days``, ``data_dir``, ``limit`` or ``tasks``; ``mode`` must be
    ``sole_planning`` (``gymnasium.make`` with ``mode="two_stage"`` returns :class:`TravelPlannerTwoStageEnv`).
    """

    benchmark = "travelplanner"
    action_kind = "structured"

    def __init__(self, tasks: list[Task] | None = None, split: str | None = "validation", data_dir: str | None = None,
                 limit: int | None = None, render_mode: str | None = None, level: str | None = None,
                 days: int | None = None, mode: str = "sole_planning"):
        if mode != "sole_planning":
            raise ValueError(f"{type(self).__name__} is the sole-planning env; use make_travelplanner_env for {mode!r}")
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         level=level, days=days)
        self.db = load_database(resolve_data_dir(data_dir))

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, level: str | None = None,
                   days: int | None = None, **_: Any) -> list[Task]:
        """See :func:`load_travelplanner_tasks` (mode ``sole_planning``)."""
        return load_travelplanner_tasks(split=split, data_dir=data_dir, level=level, days=days)

    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """System instructions, one demonstrated turn (:data:`DEMO_QUERY` and its plan), then the task's
        reference information and query."""
        return [{"role": "system", "content": SOLE_SYSTEM},
                {"role": "user", "content": sole_user_turn(DEMO_REFERENCE, DEMO_QUERY)},
                {"role": "assistant", "content": plan_text(DEMO_PLAN)},
                {"role": "user", "content": sole_user_turn(task.metadata["reference"], task.prompt)}]

    @classmethod
    def parse_action(cls, text: str) -> list[dict[str, Any]] | InvalidAction:
        """The plan in model text (:func:`parse_plan`)."""
        return parse_or_invalid(parse_plan, text)

    def score(self, task: Task, action: Any) -> tuple[float, dict[str, Any]]:
        """The checker's verdict on the plan (reward: share of constraints passed; success: final pass)."""
        return self.plan_outcome(task, normalize_plan(action))

    def score_invalid(self, task: Task, action: InvalidAction) -> tuple[float, dict[str, Any]]:
        """No plan delivered: every check fails, reward 0, the parse error as ``error``."""
        return self.plan_outcome(task, None, action.reason or "no plan")

    @classmethod
    def gold_action(cls, task: Task) -> list[dict[str, Any]] | None:
        """The gold plan (annotated or searched; ``None`` when the search found none)."""
        return task.gold

    @classmethod
    def gold_text(cls, task: Task, turn: int = 0) -> str:
        """The gold plan as a JSON list (empty text when there is none)."""
        return plan_text(task.gold) if task.gold else ""


TWO_STAGE_SYSTEM = (
    "You are a travel planner with search tools over a travel database. Each reply is exactly one action:\n"
    "FlightSearch[Departure City, Destination City, Date]: flights on a date (YYYY-MM-DD).\n"
    "GoogleDistanceMatrix[Origin, Destination, Mode]: self-driving or taxi duration, distance and cost "
    "(Mode is self-driving or taxi).\n"
    "AccommodationSearch[City], RestaurantSearch[City], AttractionSearch[City]: what a city offers.\n"
    "CitySearch[State]: the cities of a state.\n"
    "Search for the cities, transport, restaurants, attractions and accommodations you need, one action per "
    "reply, then reply with the plan instead of an action. " + PLAN_FORMAT + "\n\n"
    "Example. Query: a 3-day trip from Washington to Myrtle Beach, March 13-15, 2022, for one person.\n"
    "Your first replies: AttractionSearch[Myrtle Beach], then RestaurantSearch[Myrtle Beach], then "
    "AccommodationSearch[Myrtle Beach], then FlightSearch[Washington, Myrtle Beach, 2022-03-13], then "
    "GoogleDistanceMatrix[Washington, Myrtle Beach, self-driving], ... and finally the plan:\n" + plan_text(DEMO_PLAN))


class PlanSubmission(list):
    """A parsed plan submitted in a two-stage episode (a ``list`` of day records); it ends the episode."""


@register_env("genenv/TravelPlannerTwoStage-v0", tuple({"split": s} for s in SPLITS))
class TravelPlannerTwoStageEnv(_Scoring, MultiStepTaskEnv):
    """``genenv/TravelPlannerTwoStage-v0``: the agent calls the six tools over the database, one per step
    (``ToolName[args]``; the observation is the tool's answer), then submits the plan, which ends the episode
    and is scored as in sole planning. ``max_steps`` (default 30, the benchmark's ReAct limit) truncates an
    episode; the last allowed step without a plan scores as no plan delivered.

    Constructor: as :class:`TravelPlannerEnv`, plus ``max_steps``.
    """

    benchmark = "travelplanner_two_stage"
    action_kind = "structured"
    default_max_steps = 30

    def __init__(self, tasks: list[Task] | None = None, split: str | None = "validation", data_dir: str | None = None,
                 limit: int | None = None, render_mode: str | None = None, max_steps: int | None = None,
                 level: str | None = None, days: int | None = None, mode: str = "two_stage"):
        if mode != "two_stage":
            raise ValueError(f"{type(self).__name__} is the two-stage env; got mode {mode!r}")
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         max_steps=max_steps, level=level, days=days)
        self.db = load_database(resolve_data_dir(data_dir))

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, level: str | None = None,
                   days: int | None = None, **_: Any) -> list[Task]:
        """See :func:`load_travelplanner_tasks` (mode ``two_stage``)."""
        return load_travelplanner_tasks(split=split, data_dir=data_dir, level=level, days=days, mode="two_stage")

    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """The tool instructions with an example, then the query."""
        return [{"role": "system", "content": TWO_STAGE_SYSTEM}, {"role": "user", "content": f"Query: {task.prompt}"}]

    @classmethod
    def parse_action(cls, text: str) -> ToolCall | PlanSubmission | InvalidAction:
        """A tool call ``Name[args]`` (:func:`~genenv.envs.parsing.parse_bracket_call`), else a plan
        (:func:`parse_plan`), else an :class:`InvalidAction` naming both problems."""
        try:
            return parse_bracket_call(text, TOOLS, TOOL_ALIASES)
        except ActionParseError as call_error:
            try:
                return PlanSubmission(parse_plan(text))
            except ActionParseError as plan_error:
                return InvalidAction(f"{call_error}; and no plan: {plan_error}", text if isinstance(text, str) else "")

    def start(self, task: Task) -> None:
        """Nothing to set up: the database is read-only and an episode keeps no state beyond the base class's."""

    def transition(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        """Run one tool call, or score the submitted plan and end the episode."""
        if isinstance(action, list) and not isinstance(action, PlanSubmission) and all(
                isinstance(d, dict) for d in action) and action:
            action = PlanSubmission(action)
        if isinstance(action, PlanSubmission):
            reward, info = self.plan_outcome(self.task, normalize_plan(list(action)))
            return "The plan was submitted.", reward, True, info
        if not isinstance(action, ToolCall):
            obs, error = "Invalid action: expected ToolName[arguments] or the plan.", "not a tool call or a plan"
        else:
            try:
                obs, error = self.db.tool(action.name, list(action.arguments.values())), ""
            except ValueError as exc:
                obs, error = f"Error: {exc}", str(exc)
        if self.steps + 1 >= self.max_steps:  # the last step: no plan was delivered
            _, end = self.plan_outcome(self.task, None, error or "no plan submitted within the step limit")
            return obs, 0.0, False, end
        return obs, 0.0, False, {"success": False, "error": error, "delivered": False}

    def invalid_observation(self, action: InvalidAction) -> str:
        """The parse problem, and what a valid action looks like."""
        return f"Invalid action: {action.reason}. Reply with one ToolName[arguments] or the plan as a JSON list."

    @classmethod
    def gold_action(cls, task: Task) -> list[str]:
        """``CitySearch[State]`` for a state destination, the reference calls as actions, then the gold plan."""
        query = task.metadata["query"]
        steps = [f"CitySearch[{query['dest']}]"] if query["days"] > 3 else []
        steps += [f"{tool}[{', '.join(args)}]" for tool, args in task.metadata["reference_calls"]]
        return steps + [plan_text(task.gold) if task.gold else ""]

    idle_text = "[]"


def make_travelplanner_env(mode: str = "sole_planning", **kwargs: Any) -> TaskEnv:
    """What ``gymnasium.make("genenv/TravelPlanner-v0", mode=...)`` calls: :class:`TravelPlannerEnv` for
    ``sole_planning``, :class:`TravelPlannerTwoStageEnv` for ``two_stage``.

    Raises:
        ValueError: unknown mode.
    """
    if mode == "two_stage":
        return TravelPlannerTwoStageEnv(**kwargs)
    if mode == "sole_planning":
        return TravelPlannerEnv(**kwargs)
    raise ValueError(f"unknown TravelPlanner mode {mode!r}; choose one of {MODES}")


SAMPLE_TRAIN = (0, 1, 5, 15, 30)  # easy 3-day x2, easy 5-day, medium 3-day, hard 3-day
SAMPLE_VALIDATION_ROWS = 4  # the first rows (medium, 3- and 5-day), plus the first hard 3- and 7-day queries
DEMO_CITIES = ("Washington", "Myrtle Beach")


def build_sample(source: Path, dest: Path) -> None:
    """Write the packaged TravelPlanner sample (same layout as the full data) from the full data dir ``source``.

    Kept: train queries :data:`SAMPLE_TRAIN` (both train files, same order); the first
    :data:`SAMPLE_VALIDATION_ROWS` validation rows and the first hard 3-day and 7-day ones, with their index
    entries renumbered to the sample's rows; every database row (before ``dropna``, so the sandbox is the same) of
    the cities those queries' reference information names, of their origins and of the demonstration's cities;
    the distance rows between those cities; the full city list.
    """
    import ast

    src, out = Path(source) / "travelplanner", Path(dest) / "travelplanner"
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
