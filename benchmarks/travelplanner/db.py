"""The TravelPlanner sandbox: the database tables, the per-query flights, entity look-ups and the six search tools.

Data (``<data_dir>/travelplanner/``, see ``shared/data/SOURCES.md`` section 5), read with pandas:

- ``database/accommodations/clean_accommodations_2022.csv``, ``database/restaurants/clean_restaurant_2022.csv``,
  ``database/attractions/attractions.csv``: loaded as the benchmark's own tools load them (``tools/*/apis.py`` of
  github OSU-NLP-Group/TravelPlanner): rows with any empty field are dropped (``dropna``), so e.g. the 710
  accommodations without house rules are *outside* the sandbox, exactly as in the official harness.
- ``database/googleDistanceMatrix/distance.csv``: driving distance and duration per ordered city pair (the first
  row of a pair wins; ``tools/googleDistanceMatrix/apis.py``). Cost is computed from the distance: self-driving
  ``int(km * 0.05)`` USD per car (5 people per car), taxi ``int(km)`` USD per car (4 people per car); a pair with
  no distance or a duration in days has "no valid information".
- ``database/background/citySet_with_states.txt``: ``city<TAB>state`` (312 cities; a duplicated city would keep the
  last state, as the official ``dict`` does).
- **Flights**: the benchmark's global flights table (``clean_Flights_2022.csv``, ~3.8 M rows) is not in any
  obtainable snapshot. We rebuild a flights table from the reference information of every query we have: the
  ``Flight from X to Y on DATE`` sections of ``train/train_ref_info.jsonl`` (JSON rows) and of
  ``validation/validation_with_hidden_profile.csv`` (pandas text tables, parsed line by line), de-duplicated by
  flight number. Every flight any query's reference information shows is therefore known, but a flight on a
  route or date that no query's reference information covers is unknown and searching for it reports no flight.

Every reader raises `DataError` naming the file. `load_database` caches one
`TravelDB` per data directory.
"""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from genenv.benchmarks.travelplanner.reference import TITLE_RES
from genenv.envs.data import DataError, benchmark_file, iter_jsonl, require_fields

__all__ = [
    "FLIGHT_SECTION_RE", "MAX_ROWS", "PEOPLE_PER_VEHICLE", "TOOLS", "TOOL_ALIASES", "TRAIN_REF_FILE", "TravelDB",
    "VALIDATION_FILE", "cuisines_of", "house_rule_fits", "literal_sections", "load_database", "parse_flight_table",
    "people_per_unit", "read_table", "room_type_fits", "shown_rows",
]

DB_FILES = {
    "accommodations": ("database", "accommodations", "clean_accommodations_2022.csv"),
    "restaurants": ("database", "restaurants", "clean_restaurant_2022.csv"),
    "attractions": ("database", "attractions", "attractions.csv"),
    "distances": ("database", "googleDistanceMatrix", "distance.csv"),
    "cities": ("database", "background", "citySet_with_states.txt"),
}
TRAIN_REF_FILE = ("train", "train_ref_info.jsonl")
VALIDATION_FILE = ("validation", "validation_with_hidden_profile.csv")

COLUMNS = {  # the columns each official tool keeps, in its order
    "accommodations": ["NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy",
                       "review rate number", "city"],
    "restaurants": ["Name", "Average Cost", "Cuisines", "Aggregate Rating", "City"],
    "attractions": ["Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City"],
}
NAME_COLUMN = {"accommodations": "NAME", "restaurants": "Name", "attractions": "Name"}
CITY_COLUMN = {"accommodations": "city", "restaurants": "City", "attractions": "City"}
FLIGHT_COLUMNS = ["Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate",
                  "OriginCityName", "DestCityName", "Distance"]
# Shown columns of each table in tool results and in the sole-planning reference information (compact rendering).
SHOWN_COLUMNS = {
    "accommodations": ["NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy"],
    "restaurants": ["Name", "Average Cost", "Cuisines"],
    "attractions": ["Name"],
    "flights": ["Flight Number", "Price", "DepTime", "ArrTime"],
}
# Row caps of the compact tables: the first rows in database order. With these caps the longest sole-planning
# reference of the 102 validation queries is 5,408 SmolLM2 tokens, so the whole prompt plus a 7-day plan fits the
# model's 8,192-token context (measured in tests/test_travelplanner.py). Over the 147 queries' reference
# information 23 of 312 restaurant lists and 13 of 459 flight lists are cut, nothing else; "(first N of M shown)"
# says so. The constructive search uses the shown rows only.
MAX_ROWS = {"accommodations": 40, "restaurants": 40, "attractions": 20, "flights": 20}
PEOPLE_PER_VEHICLE = {"self-driving": 5, "taxi": 4}  # DATABASE_README.md (a car seats 5, a taxi 4)
TRANSPORT_MODES = ("self-driving", "taxi")
FLIGHT_SECTION_RE = TITLE_RES["FlightSearch"]  # "Flight from A to B on YYYY-MM-DD": groups origin, destination, date
_FLIGHT_LINE_RE = re.compile(
    r"^\s*(F\d+)\s+(\d+(?:\.\d+)?)\s+(\d{1,2}:\d{2})\s+(\d{1,2}:\d{2})\s+(\d+ hours? \d+ minutes?)\s+"
    r"(\d{4}-\d{2}-\d{2})\s+(.+?)\s+(\d+(?:\.\d+)?)\s*$")
_PAREN_RE = re.compile(r"^(.*?)\s*\([^)]*\)\s*$")


def strip_parenthesis(text: str) -> str:
    """``"Austin(Texas)"`` -> ``"Austin"``: drop one trailing parenthesised part (the official
    ``extract_before_parenthesis``)."""
    match = _PAREN_RE.match(text)
    return (match.group(1) if match else text).strip()


def read_table(path: Path, columns: list[str] | tuple[str, ...]) -> pd.DataFrame:
    """The CSV file ``path`` as a DataFrame (all its columns, file order).

    Raises:
        DataError: the file cannot be parsed, or it lacks one of ``columns``.
    """
    try:
        frame = pd.read_csv(path)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise DataError(f"{path} is not a readable CSV file ({exc}); re-copy it.") from exc
    require_fields(frame, tuple(columns), str(path))  # a DataFrame's ``in`` tests its columns
    return frame


ROOM_TYPE_ROW = {"entire room": "Entire home/apt", "private room": "Private room", "shared room": "Shared room"}


def room_type_fits(row_type: str, wanted: str) -> bool:
    """Whether an accommodation's ``room type`` cell meets the query's ``room type`` constraint: entire room =
    "Entire home/apt", private room = "Private room", shared room = "Shared room", not shared room = anything
    but "Shared room" (the harness's ``room_type`` check); an unknown constraint fits nothing."""
    return row_type != "Shared room" if wanted == "not shared room" else row_type == ROOM_TYPE_ROW.get(wanted)


def house_rule_fits(house_rules: Any, rule: str) -> bool:
    """Whether an accommodation's ``house_rules`` cell allows the query's ``house rule`` (it must not contain
    "No <rule>", e.g. "No pets"; the harness's ``room_rule`` check)."""
    return f"No {rule}" not in str(house_rules)


def cuisines_of(row: pd.Series) -> set[str]:
    """The cuisines a restaurant row serves: its comma-separated ``Cuisines`` cell, stripped
    (``database/restaurants/clean_restaurant_2022.csv``)."""
    return {c.strip() for c in str(row["Cuisines"]).split(",")}


def parse_flight_table(text: str, origin: str, destination: str, where: str) -> list[dict[str, Any]]:
    """Rows of one ``Flight from X to Y on DATE`` reference section in its pandas text form.

    Args:
        text: the section's content: a ``DataFrame.to_string()`` table, or ``There is no flight from ...``.
        origin / destination: the cities named in the section's description (city names contain spaces, so
            the two city columns are split by matching them).
        where: file and record, for error messages.
    Returns:
        one dict per flight with the `FLIGHT_COLUMNS` keys (``Price`` int, ``Distance`` float).
    Raises:
        DataError: a line is neither the header nor a flight row of the two cities.
    """
    if text.strip().startswith("There is no flight"):
        return []
    rows = []
    for line in text.strip().splitlines()[1:]:
        match = _FLIGHT_LINE_RE.match(line)
        if not match or " ".join(match.group(7).split()) != f"{origin} {destination}":
            raise DataError(f"{where}: cannot read flight row {line.strip()[:80]!r} of {origin} -> {destination}")
        number, price, dep, arr, elapsed, date, _, distance = match.groups()
        rows.append({"Flight Number": number, "Price": int(float(price)), "DepTime": dep, "ArrTime": arr,
                     "ActualElapsedTime": elapsed, "FlightDate": date, "OriginCityName": origin,
                     "DestCityName": destination, "Distance": float(distance)})
    return rows


def reference_flights(root: Path) -> pd.DataFrame:
    """The flights table rebuilt from every query's reference information (see the module docstring).

    Returns:
        a DataFrame with `FLIGHT_COLUMNS`, one row per flight number (first occurrence kept), in file order
        (train queries first).
    Raises:
        DataError: a reference file is missing or malformed.
    """
    rows: list[dict[str, Any]] = []
    train = benchmark_file(root, *TRAIN_REF_FILE)
    for lineno, record in iter_jsonl(train):
        for description, content in record.items():
            if FLIGHT_SECTION_RE.match(description) and isinstance(content, list):
                for row in content:
                    if not all(c in row for c in FLIGHT_COLUMNS):
                        raise DataError(f"{train}: line {lineno}, {description}: flight row lacks {FLIGHT_COLUMNS}")
                    rows.append({c: row[c] for c in FLIGHT_COLUMNS})
    validation = benchmark_file(root, *VALIDATION_FILE)
    frame = read_table(validation, ["reference_information"])
    for i, text in enumerate(frame["reference_information"]):
        for section in literal_sections(text, f"{validation}: row {i}"):
            match = FLIGHT_SECTION_RE.match(section["Description"])
            if match:
                rows += parse_flight_table(section["Content"], match.group(1), match.group(2),
                                           f"{validation}: row {i}")
    flights = pd.DataFrame(rows, columns=FLIGHT_COLUMNS)
    return flights.drop_duplicates("Flight Number").reset_index(drop=True)


def literal_sections(text: Any, where: str) -> list[dict[str, str]]:
    """A ``reference_information`` cell (a Python-literal list of ``{'Description', 'Content'}``) as a list,
    read with `ast.literal_eval` (never ``eval``).

    Raises:
        DataError: the cell is not such a list.
    """
    try:
        sections = ast.literal_eval(text) if isinstance(text, str) else None
    except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
        raise DataError(f"{where}: reference_information is not a Python literal ({exc})") from exc
    if not isinstance(sections, list) or not all(isinstance(s, dict) and {"Description", "Content"} <= set(s)
                                                 for s in sections):
        raise DataError(f"{where}: reference_information is not a list of {{'Description', 'Content'}}")
    return sections


@dataclass(frozen=True)
class Drive:
    """One distance-matrix answer: ``mode`` (``self-driving`` / ``taxi``), ``origin``, ``destination``,
    ``duration`` and ``distance`` (the table's text) and ``cost`` (USD per vehicle, ``None`` when there is no
    valid information)."""

    mode: str
    origin: str
    destination: str
    duration: str | None = None
    distance: str | None = None
    cost: int | None = None

    def text(self) -> str:
        """The tool's answer, as the reference information words it."""
        if self.cost is None:
            return "No valid information."
        return (f"{self.mode}, from {self.origin} to {self.destination}, duration: {self.duration}, "
                f"distance: {self.distance}, cost: {self.cost}")


@dataclass
class TravelDB:
    """The sandbox tables (pandas DataFrames, as the official tools load them) and look-ups over them.

    Attributes:
        accommodations / restaurants / attractions: the entity tables after ``dropna``.
        distances: ``origin, destination, duration, distance`` (first row per ordered pair).
        flights: the rebuilt flights table (`reference_flights`).
        city_state: city -> state; state_cities: state -> cities (file order).
        root: the data directory it was read from.
    """

    accommodations: pd.DataFrame
    restaurants: pd.DataFrame
    attractions: pd.DataFrame
    distances: pd.DataFrame
    flights: pd.DataFrame
    city_state: dict[str, str]
    state_cities: dict[str, list[str]]
    root: Path | None = None
    _by_city: dict[str, dict[str, pd.DataFrame]] = field(default_factory=dict, repr=False)
    _pairs: dict[tuple[str, str], tuple[str | None, str | None]] = field(default_factory=dict, repr=False)
    _legs: dict[tuple[str, str, str], pd.DataFrame] = field(default_factory=dict, repr=False)
    _names: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict, repr=False)
    _by_number: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for kind in ("accommodations", "restaurants", "attractions"):
            table = getattr(self, kind)
            self._by_city[kind] = {city: rows for city, rows in table.groupby(CITY_COLUMN[kind], sort=False)}
            for city, rows in self._by_city[kind].items():
                index: dict[str, int] = {}
                for position, name in enumerate(rows[NAME_COLUMN[kind]].astype(str)):
                    index.setdefault(_norm(name), position)  # the first row in database order wins
                self._names[(kind, city)] = index
        self._by_number = {number: i for i, number in enumerate(self.flights["Flight Number"])}
        for origin, dest, duration, distance in self.distances[["origin", "destination", "duration",
                                                                "distance"]].itertuples(index=False):
            key = (origin, dest)
            if key not in self._pairs:
                self._pairs[key] = (None if pd.isna(duration) else str(duration),
                                    None if pd.isna(distance) else str(distance))
        self._legs = {key: rows for key, rows in self.flights.groupby(["OriginCityName", "DestCityName",
                                                                        "FlightDate"], sort=False)}

    # ----- entities -----
    def city_rows(self, kind: str, city: str) -> pd.DataFrame:
        """All rows of table ``kind`` (``accommodations`` / ``restaurants`` / ``attractions``) in ``city``
        (database order; empty when none)."""
        empty = getattr(self, kind).iloc[0:0]
        return self._by_city[kind].get(city, empty)

    def find(self, kind: str, name: str, city: str) -> pd.Series | None:
        """The row of table ``kind`` named ``name`` in ``city``, or ``None``.

        Matching rule (ours, stricter than the official ``str.contains``): the name must equal the table's
        name exactly (case and inner spaces included; surrounding spaces ignored, as the harness strips the
        plan's name); the first such row in database order wins. The official harness accepts any row whose
        name *contains* the given text (case-sensitively), so a one-letter "name" would pass; for an RL reward
        that is an exploit, so we require the whole name. Case and repeated spaces count, as in the harness
        (which fails a name written in another case or with doubled spaces).
        """
        if not isinstance(name, str):
            return None
        position = self._names.get((kind, city), {}).get(_norm(name))
        return None if position is None else self._by_city[kind][city].iloc[position]

    # ----- transport -----
    def drive(self, origin: str, destination: str, mode: str) -> Drive:
        """Distance-matrix answer for ``mode`` (``self-driving`` or ``taxi``) from ``origin`` to ``destination``
        (``tools/googleDistanceMatrix/apis.py`` ``run_for_evaluation``): cost ``int(km * 0.05)`` per car for
        self-driving, ``int(km)`` per taxi; ``cost=None`` without a row, without a distance, or when the
        duration is given in days.

        Raises:
            ValueError: ``mode`` is not ``self-driving`` or ``taxi``.
        """
        if mode not in TRANSPORT_MODES:
            raise ValueError(f"mode must be one of {TRANSPORT_MODES}, got {mode!r}")
        origin, destination = strip_parenthesis(origin), strip_parenthesis(destination)
        duration, distance = self._pairs.get((origin, destination), (None, None))
        if duration is None or distance is None or "day" in duration:
            return Drive(mode, origin, destination, duration, distance, None)
        km = float(distance.replace("km", "").replace(",", "").strip())
        cost = int(km * 0.05) if mode == "self-driving" else int(km)
        return Drive(mode, origin, destination, duration, distance, cost)

    def find_flight(self, number: str, origin: str, destination: str) -> pd.Series | None:
        """The flight ``number`` from ``origin`` to ``destination``, or ``None`` (the official sandbox rule:
        number and both cities; the date is not checked)."""
        position = self._by_number.get(number)  # numbers are unique (`reference_flights`)
        if position is None:
            return None
        row = self.flights.iloc[position]
        wanted = (strip_parenthesis(origin), strip_parenthesis(destination))
        same = (row["OriginCityName"], row["DestCityName"]) == wanted
        return row if same else None

    def flights_on(self, origin: str, destination: str, date: str) -> pd.DataFrame:
        """Flights from ``origin`` to ``destination`` on ``date`` (``YYYY-MM-DD``), table order."""
        key = (strip_parenthesis(origin), strip_parenthesis(destination), date)
        return self._legs.get(key, self.flights.iloc[0:0])

    # ----- the six tools -----
    def tool(self, name: str, args: list[str]) -> str:
        """Run one of `TOOLS` on positional ``args``; returns the observation text.

        Raises:
            ValueError: unknown tool, wrong number of arguments, or a bad mode (the message is the observation
                the agent sees).
        """
        name = TOOL_ALIASES.get(name, name)  # "DistanceMatrix": the name in the official ReAct prompt
        if name not in TOOLS:
            raise ValueError(f"unknown tool {name!r}; the tools are {', '.join(TOOLS)}")
        params = TOOLS[name]
        if len(args) != len(params):
            raise ValueError(f"{name} takes {len(params)} argument(s) ({', '.join(params)}), got {len(args)}")
        args = [str(a).strip() for a in args]
        if name == "FlightSearch":
            return self.flight_search(*args)
        if name == "GoogleDistanceMatrix":
            return self.drive(args[0], args[1], _mode(args[2])).text()
        if name == "CitySearch":
            return self.city_search(args[0])
        kind = {"AccommodationSearch": "accommodations", "RestaurantSearch": "restaurants",
                "AttractionSearch": "attractions"}[name]
        return self.table_text(kind, strip_parenthesis(args[0]))

    def flight_search(self, origin: str, destination: str, date: str) -> str:
        """FlightSearch[Departure City, Destination City, Date]: the compact table, or the official "There is no
        flight from X to Y on DATE." (also for a route and date the rebuilt table does not cover)."""
        rows = self.flights_on(origin, destination, date)
        if rows.empty:
            return f"There is no flight from {origin} to {destination} on {date}."
        return compact_table(rows, "flights")

    def city_search(self, state: str) -> str:
        """CitySearch[State]: the state's cities, comma separated, or ``Invalid state`` (official wording)."""
        cities = self.state_cities.get(state.strip())
        return ", ".join(cities) if cities else f"Invalid state {state.strip()!r}."

    def table_text(self, kind: str, city: str) -> str:
        """AccommodationSearch / RestaurantSearch / AttractionSearch[City]: the compact table of the city's rows."""
        rows = self.city_rows(kind, city)
        if rows.empty:
            return f"There is no {kind[:-1]} in {city}."
        return compact_table(rows, kind)


# Tool name -> its parameters (the official ReAct prompt's signatures).
TOOLS: dict[str, tuple[str, ...]] = {
    "FlightSearch": ("Departure City", "Destination City", "Date"),
    "GoogleDistanceMatrix": ("Origin", "Destination", "Mode"),
    "AccommodationSearch": ("City",),
    "RestaurantSearch": ("City",),
    "AttractionSearch": ("City",),
    "CitySearch": ("State",),
}
TOOL_ALIASES = {"DistanceMatrix": "GoogleDistanceMatrix"}


def _mode(text: str) -> str:
    key = text.strip().lower().replace("_", "-").replace(" ", "-")
    if key in ("self-driving", "driving", "selfdriving"):
        return "self-driving"
    if key == "taxi":
        return "taxi"
    raise ValueError(f"mode must be self-driving or taxi, got {text!r}")


def _norm(text: str) -> str:
    return str(text).strip()


def _cell(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def compact_table(rows: pd.DataFrame, kind: str, max_rows: int | None = None) -> str:
    """Rows as ``col | col | ...`` lines under a header line, the first ``max_rows`` (default
    `MAX_ROWS`) in table order, with ``(first N of M shown)`` when rows are cut.

    Args:
        rows: rows of the table ``kind``.
        kind: ``accommodations``, ``restaurants``, ``attractions`` or ``flights`` (selects the columns).
    """
    limit = MAX_ROWS[kind] if max_rows is None else max_rows
    columns = SHOWN_COLUMNS[kind]
    lines = [" | ".join(columns)]
    for values in rows[columns].head(limit).itertuples(index=False):
        lines.append(" | ".join(_cell(v) for v in values))
    if len(rows) > limit:
        lines.append(f"(first {limit} of {len(rows)} shown)")
    return "\n".join(lines)


def shown_rows(db: TravelDB, kind: str, city: str) -> pd.DataFrame:
    """The rows of ``kind`` in ``city`` that `compact_table` shows (the first `MAX_ROWS`)."""
    return db.city_rows(kind, city).head(MAX_ROWS[kind])


def people_per_unit(people: int, capacity: int | float) -> int:
    """Units (cars, taxis, rooms) needed for ``people``: ``ceil(people / capacity)`` (DATABASE_README.md)."""
    return math.ceil(people / max(1, int(capacity)))


@lru_cache(maxsize=4)
def _load(root: str) -> TravelDB:
    base = Path(root)
    tables = {}
    for kind in ("accommodations", "restaurants", "attractions"):
        path = benchmark_file(base, *DB_FILES[kind])
        frame = read_table(path, COLUMNS[kind])
        tables[kind] = frame.dropna()[COLUMNS[kind]].reset_index(drop=True)
    path = benchmark_file(base, *DB_FILES["distances"])
    distances = read_table(path, ["origin", "destination", "duration", "distance"])
    path = benchmark_file(base, *DB_FILES["cities"])
    city_state: dict[str, str] = {}
    state_cities: dict[str, list[str]] = {}
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise DataError(f"{path}: line {lineno} is not 'city<TAB>state'")
        city, state = parts[0].strip(), parts[1].strip()
        city_state[city] = state
        state_cities.setdefault(state, []).append(city)
    return TravelDB(tables["accommodations"], tables["restaurants"], tables["attractions"], distances,
                    reference_flights(base), city_state, state_cities, base)


def load_database(root: Path | str) -> TravelDB:
    """The `TravelDB` of data directory ``root`` (cached per resolved path).

    Raises:
        DataError: a table is missing or malformed (the message names the file).
    """
    return _load(str(Path(root).resolve()))

