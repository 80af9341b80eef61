"""TravelPlanner's constraint evaluation: 8 commonsense and 5 hard constraints per plan, and the official rates.

Written from the benchmark's definitions (Xie et al. 2024, "TravelPlanner", Table 1 and section 3.3) and the
semantics of its harness (``evaluation/commonsense_constraint.py``, ``hard_constraint.py``, ``eval.py`` of github
OSU-NLP-Group/TravelPlanner; read, not copied). Every check's rule is in its function's docstring; where our rule
differs from the released harness, the docstring says how and why ("Differs:"). Look-ups use pandas over the
`TravelDB` tables. This module does not import torch.

A plan is a list of day records (dicts with ``days``, ``current_city``, ``transportation``, ``breakfast``,
``attraction``, ``lunch``, ``dinner``, ``accommodation``; see
`genenv.benchmarks.travelplanner.plan.parse_plan`). A
field that is missing, empty or ``-`` is *unfilled*. Entities are written ``Name, City`` (split at the last
comma; a trailing ``(State)`` is dropped); attractions are ``;``-separated. Only the first ``days`` records are
read, as in the harness.

Policy for differences from the harness (``docs/travelplanner.md``, "Where we differ"): on the *format* of a
plan we follow the harness's verdict, so a reward never teaches a format the benchmark fails ("from A to B" in
lower case, ``Flight Number: F..,`` up to the comma, no full stop after a city, no space before a ``(State)``
in ``current_city``, every day record has an ``accommodation`` key); on the *content* we keep the correct rule
where the harness's verdict is wrong (substring names, the character loop of Within Current City, the dropped
last attraction, ...), since those would reward wrong plans.

Aggregation (`aggregate`, the harness's ``eval.py``), over the N queries of a split:

- delivery rate = plans delivered / N;
- commonsense micro = commonsense checks passed / (8 N); macro = plans passing all 8 / N;
- hard micro = hard checks passed / hard checks that apply (budget always, each local constraint that is set);
  hard checks are evaluated only for plans that pass *Complete Information* and *Within Sandbox* (otherwise
  they count as failed); macro = plans whose applicable hard checks all pass / N;
- final pass rate = plans passing every commonsense and every applicable hard check / N;
- the GenEnv paper's TravelPlanner number = mean of the four micro / macro rates (``baselines/README.md``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from genenv.benchmarks.travelplanner.db import (
    PEOPLE_PER_VEHICLE, TravelDB, cuisines_of, house_rule_fits, people_per_unit, room_type_fits,
)

__all__ = ["COMMONSENSE", "HARD", "LABELS", "PlanVerdict", "aggregate", "evaluate_plan", "plan_reward"]

COMMONSENSE = ("within_sandbox", "complete_information", "within_current_city", "reasonable_city_route",
               "diverse_restaurants", "diverse_attractions", "non_conflicting_transportation", "minimum_nights")
HARD = ("budget", "room_rule", "room_type", "cuisine", "transportation")
LABELS = {  # the paper's names (TravelPlanner Table 1 / eval.py paper_term_mapping)
    "within_sandbox": "Within Sandbox", "complete_information": "Complete Information",
    "within_current_city": "Within Current City", "reasonable_city_route": "Reasonable City Route",
    "diverse_restaurants": "Diverse Restaurants", "diverse_attractions": "Diverse Attractions",
    "non_conflicting_transportation": "Non-conf. Transportation", "minimum_nights": "Minimum Nights Stay",
    "budget": "Budget", "room_rule": "Room Rule", "room_type": "Room Type", "cuisine": "Cuisine",
    "transportation": "Transportation",
}
FIELDS = ("transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")
MEALS = ("breakfast", "lunch", "dinner")
HARD_KEY = {"room_rule": "house rule", "room_type": "room type", "cuisine": "cuisine",
            "transportation": "transportation"}
UNNEEDED_DAY = "You don't need to fill in the information for this or later days."
_FROM_TO_RE = re.compile(r"from\s+(.+?)\s+to\s+([^,]+?)(?=\s*,|\s*$)")  # lower-case "from", as the harness
_FLIGHT_NO_MARK = "Flight Number: "  # the harness reads the number after this exact text, up to the next comma
_PAREN_PART_RE = re.compile(r"^(.*?)\([^)]*\)")


@dataclass
class PlanVerdict:
    """The checks of one plan.

    Attributes:
        delivered: a non-empty plan was given.
        commonsense: check -> ``(passed, reason)`` for each of `COMMONSENSE`.
        hard: check -> ``(passed, reason)`` for each *applicable* check of `HARD` (budget always; the
            others when the query sets that local constraint).
        hard_evaluated: the hard checks ran (the plan passed Complete Information and Within Sandbox).
        cost: the plan's total cost in USD (``None`` when the hard checks did not run).
    """

    delivered: bool
    commonsense: dict[str, tuple[bool, str]] = field(default_factory=dict)
    hard: dict[str, tuple[bool, str]] = field(default_factory=dict)
    hard_evaluated: bool = False
    cost: float | None = None

    @property
    def commonsense_pass(self) -> bool:
        """All 8 commonsense checks pass."""
        return self.delivered and all(ok for ok, _ in self.commonsense.values())

    @property
    def hard_pass(self) -> bool:
        """The hard checks ran and every applicable one passes."""
        return self.hard_evaluated and all(ok for ok, _ in self.hard.values())

    @property
    def final_pass(self) -> bool:
        """Every commonsense and every applicable hard check passes (the benchmark's final pass)."""
        return self.commonsense_pass and self.hard_pass

    @property
    def passed(self) -> int:
        """Number of checks passed (commonsense + applicable hard)."""
        return sum(ok for ok, _ in self.commonsense.values()) + sum(ok for ok, _ in self.hard.values())

    @property
    def total(self) -> int:
        """Number of checks that count for this query: 8 + the applicable hard checks."""
        return len(COMMONSENSE) + len(self.hard)

    @classmethod
    def from_info(cls, info: dict[str, Any], query: dict[str, Any]) -> "PlanVerdict":
        """Rebuild a verdict from `to_info` output (e.g. a trajectory's ``info``); an ``info`` without the
        check results (an action the env could not score) is an undelivered plan."""
        if "cs" not in info:
            return cls(False, {k: (False, "") for k in COMMONSENSE}, {k: (False, "") for k in applicable_hard(query)})
        return cls(bool(info.get("delivered")), {k: (bool(v), "") for k, v in info["cs"].items()},
                   {k: (bool(v), "") for k, v in info.get("hd", {}).items()}, bool(info.get("hard_evaluated")),
                   info.get("cost"))

    def failures(self) -> list[str]:
        """``"<check>: <reason>"`` of every failed check."""
        return [f"{k}: {why}" for k, (ok, why) in {**self.commonsense, **self.hard}.items() if not ok]

    def to_info(self) -> dict[str, Any]:
        """JSON-compatible summary for ``info``: ``delivered``, ``cs`` / ``hd`` (check -> bool), ``cost``,
        ``final_pass``, ``passed``, ``total``."""
        return {"delivered": self.delivered, "cs": {k: ok for k, (ok, _) in self.commonsense.items()},
                "hd": {k: ok for k, (ok, _) in self.hard.items()}, "hard_evaluated": self.hard_evaluated,
                "cost": self.cost, "final_pass": self.final_pass, "passed": self.passed, "total": self.total}


# ----- reading plan fields -----
def filled(value: Any) -> bool:
    """A field value that says something: a non-empty string other than ``-``."""
    return isinstance(value, str) and value.strip() not in ("", "-")


def name_city(text: str) -> tuple[str, str] | None:
    """``"Name, City(State)"`` -> ``("Name", "City")``: split at the last comma (names may contain commas); the
    city is the stripped text before its first parenthesised part (`city_part`), so ``"City (State)"``
    and ``"City(State)."`` are ``"City"``, as the harness's ``get_valid_name_city`` reads them; ``None`` without
    a comma. A full stop after a bare city is kept, so ``"Name, City."`` names no database city (the harness
    keeps it too: format follows the harness)."""
    name, sep, city = text.rpartition(",")
    if not sep or not name.strip() or not city.strip():
        return None
    return name.strip(), city_part(city.strip()).strip()


def attraction_pieces(value: Any) -> list[str]:
    """The ``;``-separated pieces of an attraction field, stripped, empty pieces dropped, and a bare ``-`` as
    the *last* piece dropped (``"A, City;-"``: the harness never reads a last piece); a ``-`` elsewhere stays a
    piece (it names no attraction, so it fails Within Sandbox, as in the harness). ``[]`` for non-text."""
    if not isinstance(value, str):
        return []
    pieces = [a.strip() for a in value.split(";") if a.strip()]
    return pieces[:-1] if pieces and pieces[-1] == "-" else pieces


def attractions_of(value: Any) -> list[str]:
    """The attraction entries of a field (`attraction_pieces` of a filled field).

    Differs: the harness drops the last piece unconditionally (``split(';')[:-1]``, assuming a trailing ``;``),
    so an entry written without the trailing ``;`` is never checked; we check every entry, except a bare ``-``
    as the last piece (`attraction_pieces`), which the harness also ignores. A field that is only ``-;``
    has no attraction here (Complete Information fails); the harness checks ``-`` as an entity (Within Sandbox
    fails): the plan fails either way.
    """
    return attraction_pieces(value) if filled(value) else []


def city_part(text: str) -> str:
    """``current_city`` / route city text without a parenthesised part, as the harness's
    ``extract_before_parenthesis`` reads it: the text before the first ``(...)``, *not* stripped, so
    ``"Austin (Texas)"`` is ``"Austin "`` and names no city (format follows the harness; ``"Austin(Texas)"`` is
    ``"Austin"``)."""
    match = _PAREN_PART_RE.search(text)
    return match.group(1) if match else text


def from_to(text: str) -> tuple[str, str] | None:
    """``("A", "B")`` from ``"... from A to B, ..."`` (lower-case ``from`` and ``to`` as in the harness's
    ``extract_from_to``; B ends at a comma or the end; parenthesised parts dropped by `city_part`)."""
    match = _FROM_TO_RE.search(text or "")
    return (city_part(match.group(1)), city_part(match.group(2))) if match else None


def is_travel_day(record: dict[str, Any]) -> bool:
    """``current_city`` holds "from A to B" (lower-case ``from``: "From A to B" is not read as travel, as in
    the harness, so such a day names no database city and fails the route)."""
    return from_to(str(record.get("current_city", ""))) is not None


def day_cities(record: dict[str, Any]) -> list[str]:
    """The cities of a day: ``[A, B]`` for ``current_city`` = "from A to B", else ``[city]`` (`city_part`
    of the stripped text)."""
    city = str(record.get("current_city", ""))
    pair = from_to(city)
    return list(pair) if pair else [city_part(city.strip())]


MODES = ("flight", "self-driving", "taxi")  # keyword priority of `transport_mode`


def transport_modes(text: str) -> frozenset[str]:
    """Every mode whose keyword (``flight``, ``self-driving``, ``taxi``) occurs in ``text``, case-insensitively."""
    low = text.lower()
    return frozenset(mode for mode in MODES if mode in low)


def transport_mode(text: str) -> str | None:
    """The leg's mode for the sandbox check and the cost: ``flight`` if the text mentions a flight, else
    ``self-driving``, else ``taxi``; ``None`` for other text.

    This is the order of the harness's sandbox check and ``get_total_cost`` ("flight number", then
    "self-driving", then "taxi"). Its ``transportation_match`` (Non-conflicting Transportation) tests "taxi"
    first; reading legs that way, a flight leg that mentions a taxi would pass "no flight", and a self-driving
    leg that mentions a taxi would be priced as a taxi.
    """
    modes = transport_modes(text)
    return next((mode for mode in MODES if mode in modes), None)


def _days(query: dict[str, Any], plan: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d if isinstance(d, dict) else {} for d in list(plan)[:int(query["days"])]]


def filled_days(query: dict[str, Any], plan: Sequence[dict[str, Any]]) -> int:
    """The day records of the trip that count as filled: not empty, and ``current_city`` not the benchmark's
    "You don't need to fill in ..." sentence."""
    return sum(1 for d in _days(query, plan) if d and d.get("current_city") != UNNEEDED_DAY)


@dataclass(frozen=True)
class Leg:
    """A day's transportation as read from its text: ``cities`` ("from A to B" of the field, else of
    ``current_city``; ``None`` when neither reads), ``mode`` (`transport_mode`), ``modes`` (every mode
    the text mentions, `transport_modes`), ``flight_number`` (the text after ``Flight Number: `` up to the
    next comma, as the harness reads it; ``None`` without that marker) and ``is_flight``."""

    text: str
    cities: tuple[str, str] | None
    mode: str | None
    flight_number: str | None
    modes: frozenset[str] = frozenset()

    @property
    def is_flight(self) -> bool:
        """The leg is a flight: its mode says so, or it has a flight number."""
        return self.mode == "flight" or "flight number" in self.text.lower()


def leg_of(day: dict[str, Any]) -> Leg | None:
    """The `Leg` of a day record, or ``None`` when its transportation is not filled."""
    value = day.get("transportation")
    if not filled(value):
        return None
    _, mark, rest = value.partition(_FLIGHT_NO_MARK)
    return Leg(value, from_to(value) or from_to(str(day.get("current_city", ""))), transport_mode(value),
               rest.split(",")[0] if mark else None, transport_modes(value))


def _entity_row(db: TravelDB, kind: str, text: str):
    pair = name_city(text)
    return None if pair is None else db.find(kind, pair[0], pair[1])


# ----- commonsense checks -----
def within_sandbox(query: dict[str, Any], plan: Sequence[dict[str, Any]], db: TravelDB) -> tuple[bool, str]:
    """Within Sandbox: every filled entity exists in the database.

    - transportation: the cities are "from A to B" of the field, else of ``current_city``; a flight
      ("Flight Number: F...") must be in the flights table with that number, origin A and destination B;
      self-driving / taxi must have a distance-matrix cost from A to B.
    - breakfast / lunch / dinner, each attraction, accommodation: ``Name, City`` must be a row of the restaurants
      / attractions / accommodations table (exact name, see `TravelDB.find`).

    Differs: transportation text that names no mode, or whose cities cannot be read, fails (the harness lets the
    former pass and crashes on the latter); names must match whole, not as a substring.
    """
    for i, day in enumerate(_days(query, plan), 1):
        leg = leg_of(day)
        if leg is not None:
            if leg.cities is None or any(c != c.strip() for c in leg.cities):
                return False, f"day {i}: cannot read the cities of transportation {leg.text[:60]!r}"
            if leg.is_flight:
                if leg.flight_number is None or db.find_flight(leg.flight_number, *leg.cities) is None:
                    return False, f"day {i}: flight {leg.text[:60]!r} is not in the sandbox"
            elif leg.mode in ("self-driving", "taxi"):
                if db.drive(leg.cities[0], leg.cities[1], leg.mode).cost is None:
                    return False, f"day {i}: no {leg.mode} from {leg.cities[0]} to {leg.cities[1]} in the sandbox"
            else:
                return False, f"day {i}: transportation {leg.text[:60]!r} names no flight, self-driving or taxi"
        for meal in MEALS:
            if filled(day.get(meal)) and _entity_row(db, "restaurants", day[meal]) is None:
                return False, f"day {i}: {meal} {day[meal][:60]!r} is not in the sandbox"
        for attraction in attractions_of(day.get("attraction")):
            if _entity_row(db, "attractions", attraction) is None:
                return False, f"day {i}: attraction {attraction[:60]!r} is not in the sandbox"
        if filled(day.get("accommodation")) and _entity_row(db, "accommodations", day["accommodation"]) is None:
            return False, f"day {i}: accommodation {day['accommodation'][:60]!r} is not in the sandbox"
    return True, ""


def complete_information(query: dict[str, Any], plan: Sequence[dict[str, Any]], db: TravelDB) -> tuple[bool, str]:
    """Complete Information: no key information is missing.

    - exactly ``days`` day records are filled (a record counts unless empty or its ``current_city`` is the
      benchmark's "You don't need to fill in ..." sentence);
    - the plan visits ``visiting_city_number`` cities besides ``org``, and a first day "from A to B" starts at
      ``org``;
    - every day record has all six fields (transportation, breakfast, attraction, lunch, dinner, accommodation);
    - a travel day ("from A to B") has transportation; any other day has an attraction (a piece other than
      ``-``: "-;" is no attraction; the harness accepts it) and all three meals; every day but the last has an
      accommodation;
    - at least half of the information is filled: filled fields (day number and current city included, as the
      harness counts them) / (6 x days) >= 0.5.
    """
    days = _days(query, plan)
    counted = filled_days(query, plan)
    if counted != query["days"]:
        return False, f"{counted} day(s) filled, the trip has {query['days']}"
    cities: set[str] = set()
    for i, day in enumerate(days):
        if is_travel_day(day):
            pair = from_to(day["current_city"])
            if i == 0 and pair and pair[0] != query["org"]:
                return False, f"day 1 starts in {pair[0]}, not {query['org']}"
        cities.update(day_cities(day))
    cities.discard(query["org"])
    if len(cities) != query["visiting_city_number"]:
        return False, (f"{len(cities)} cities visited besides {query['org']}, the query asks "
                       f"{query['visiting_city_number']}")
    total = 0
    for i, day in enumerate(days, 1):
        missing = [f for f in FIELDS if f not in day]
        if missing:
            return False, f"day {i} has no {missing[0]} field"
        travel = is_travel_day(day)
        if travel and not filled(day["transportation"]):
            return False, f"day {i} is a travel day without transportation"
        if not travel and not attractions_of(day["attraction"]):
            return False, f"day {i} has no attraction"
        if i != query["days"] and not filled(day["accommodation"]):
            return False, f"day {i} has no accommodation"
        if not travel and not all(filled(day[m]) for m in MEALS):
            return False, f"day {i} misses a meal"
        total += sum(1 for v in day.values() if (filled(v) if isinstance(v, str) else bool(v)))
    if total / (6 * query["days"]) < 0.5:
        return False, "more than half of the information is missing"
    return True, ""


def within_current_city(query: dict[str, Any], plan: Sequence[dict[str, Any]], db: TravelDB) -> tuple[bool, str]:
    """Within Current City: every activity of a day happens in that day's city or cities.

    The day's cities are A and B on "from A to B", else the current city. Transportation must mention every one
    of them; each meal and attraction must be in one of them; the accommodation must be in the last one (where
    the night is spent).

    Differs: the harness tests whether a city name occurs anywhere in the entry's text (so "Kansas City BBQ,
    Dallas" counts as Kansas City), and on a day that is not a travel day it loops over the *characters* of the
    city name (its city list is then a string): an entry passes when it contains any one letter of the city,
    the transportation when it contains every letter, the accommodation when it contains the city's last
    letter. We compare the entry's own city (after its last comma) with the day's cities.
    """
    for i, day in enumerate(_days(query, plan), 1):
        cities = day_cities(day)
        value = day.get("transportation")
        if filled(value):
            for city in cities:
                if city not in value:
                    return False, f"day {i}: transportation does not go through {city}"
        entries = [(m, day.get(m)) for m in MEALS if filled(day.get(m))]
        entries += [("attraction", a) for a in attractions_of(day.get("attraction"))]
        for what, text in entries:
            pair = name_city(text)
            if pair is None or pair[1] not in cities:
                return False, f"day {i}: {what} {text[:60]!r} is not in {' or '.join(cities)}"
        if filled(day.get("accommodation")):
            pair = name_city(day["accommodation"])
            if pair is None or pair[1] != cities[-1]:
                return False, f"day {i}: accommodation is not in {cities[-1]}"
    return True, ""


def _valid_city_sequence(cities: list[str]) -> bool:
    """At least 3 entries; every stay in the middle of the route lasts two or more entries; no city is
    revisited once its stay is over, except a return to the start at the very end."""
    if len(cities) < 3:
        return False
    runs: list[tuple[str, int, int]] = []  # (city, start index, length)
    for i, city in enumerate(cities):
        if runs and runs[-1][0] == city:
            runs[-1] = (city, runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((city, i, 1))
    seen: set[str] = set()
    for city, start, length in runs:
        if city in seen and start not in (0, len(cities) - 1):
            return False
        end = start + length - 1
        if length == 1 and 0 < end < len(cities) - 1:
            return False
        seen.add(city)
    return True


def reasonable_city_route(query: dict[str, Any], plan: Sequence[dict[str, Any]], db: TravelDB) -> tuple[bool, str]:
    """Reasonable City Route: the route is a closed loop from ``org`` without revisits.

    The route lists each day's cities in order (A, B for "from A to B"). A first day "from A to B" must start at
    ``org``; the route must end where it starts; it must be a valid sequence (`_valid_city_sequence`);
    every city must be a database city; for 5- and 7-day trips every city between the two ends must be in the
    destination state.
    """
    route: list[str] = []
    for i, day in enumerate(_days(query, plan)):
        cities = day_cities(day)
        if is_travel_day(day) and i == 0 and cities[0] != query["org"]:
            return False, f"the first day should start in {query['org']}"
        route += cities
    if not route:
        return False, "no route"
    if route[0] != route[-1]:
        return False, "the trip does not return to where it started"
    if not _valid_city_sequence(route):
        return False, "the city sequence revisits a city or stays less than a day in one"
    for i, city in enumerate(route):
        if city not in db.city_state:
            return False, f"{city!r} is not a city of the database"
        if 0 < i < len(route) - 1 and query["days"] > 3 and db.city_state[city] != query["dest"]:
            return False, f"{city} is not in {query['dest']}"
    return True, ""


def _entity_key(text: str) -> tuple[str, str]:
    pair = name_city(text) or (text, "")
    return " ".join(pair[0].split()).casefold(), pair[1].casefold()


def diverse_restaurants(query: dict[str, Any], plan: Sequence[dict[str, Any]], db: TravelDB) -> tuple[bool, str]:
    """Diverse Restaurants: no restaurant is chosen twice for meals of the trip (compared by name and city,
    whitespace- and case-insensitive; the harness compares the raw text)."""
    seen: set[tuple[str, str]] = set()
    for i, day in enumerate(_days(query, plan), 1):
        for meal in MEALS:
            if filled(day.get(meal)):
                key = _entity_key(day[meal])
                if key in seen:
                    return False, f"day {i}: {meal} {day[meal][:60]!r} is repeated"
                seen.add(key)
    return True, ""


def diverse_attractions(query: dict[str, Any], plan: Sequence[dict[str, Any]], db: TravelDB) -> tuple[bool, str]:
    """Diverse Attractions: no attraction is visited twice in the trip (same comparison as restaurants)."""
    seen: set[tuple[str, str]] = set()
    for i, day in enumerate(_days(query, plan), 1):
        for attraction in attractions_of(day.get("attraction")):
            key = _entity_key(attraction)
            if key in seen:
                return False, f"day {i}: attraction {attraction[:60]!r} is repeated"
            seen.add(key)
    return True, ""


def non_conflicting_transportation(query: dict[str, Any], plan: Sequence[dict[str, Any]],
                                   db: TravelDB) -> tuple[bool, str]:
    """Non-conflicting Transportation: the first day has transportation, and the trip does not mix self-driving
    with flights or with taxis (a self-driven car cannot be left behind).

    Differs: every mode a leg's text mentions counts (`transport_modes`); the harness takes one mode per
    leg, "taxi" first, so "Flight Number: F1, ... then self-driving" on one leg and a taxi elsewhere pass there.
    Mentioning more modes never helps a plan here.
    """
    days = _days(query, plan)
    if not days or not filled(days[0].get("transportation")):
        return False, "the first day has no transportation"
    modes = set().union(*(leg.modes for leg in map(leg_of, days) if leg is not None))
    if "self-driving" in modes and ({"flight", "taxi"} & modes):
        return False, f"self-driving mixed with {' and '.join(sorted({'flight', 'taxi'} & modes))}"
    return True, ""


def minimum_nights(query: dict[str, Any], plan: Sequence[dict[str, Any]], db: TravelDB) -> tuple[bool, str]:
    """Minimum Nights Stay: each stay at an accommodation (consecutive days naming it) lasts at least its
    ``minimum nights``.

    A day record without an ``accommodation`` key (even the last day's) fails, as in the harness (format).

    Differs: the harness applies the rule only when its substring look-up finds exactly one row; we apply it
    to the row `TravelDB.find` returns.
    """
    runs: list[list[Any]] = []
    for i, day in enumerate(_days(query, plan), 1):
        if "accommodation" not in day:
            return False, f"day {i} has no accommodation field"
        value = day["accommodation"]
        if runs and runs[-1][0] == value:
            runs[-1][1] += 1
        else:
            runs.append([value, 1])
    for value, nights in runs:
        if filled(value):
            row = _entity_row(db, "accommodations", value)
            if row is not None and nights < row["minimum nights"]:
                return False, f"{value[:60]!r}: {nights} night(s), its minimum is {int(row['minimum nights'])}"
    return True, ""


# ----- hard checks -----
def total_cost(query: dict[str, Any], plan: Sequence[dict[str, Any]], db: TravelDB) -> float:
    """The plan's cost in USD for ``people_number`` travellers (the harness's ``get_total_cost``):

    flight price x people; self-driving cost x ceil(people / 5) cars; taxi cost x ceil(people / 4) taxis; each
    meal's average cost x people; each night's accommodation price x ceil(people / maximum occupancy) rooms
    (every day that names an accommodation is a night). Entries not found in the database add nothing.
    """
    people = int(query["people_number"])
    cost = 0.0
    for day in _days(query, plan):
        leg = leg_of(day)
        if leg is not None and leg.cities:
            if leg.is_flight:
                row = db.find_flight(leg.flight_number, *leg.cities) if leg.flight_number else None
                cost += float(row["Price"]) * people if row is not None else 0.0
            elif leg.mode in ("self-driving", "taxi"):
                drive = db.drive(leg.cities[0], leg.cities[1], leg.mode)
                cost += (drive.cost or 0) * people_per_unit(people, PEOPLE_PER_VEHICLE[leg.mode])
        for meal in MEALS:
            if filled(day.get(meal)):
                row = _entity_row(db, "restaurants", day[meal])
                cost += float(row["Average Cost"]) * people if row is not None else 0.0
        if filled(day.get("accommodation")):
            row = _entity_row(db, "accommodations", day["accommodation"])
            if row is not None:
                cost += float(row["price"]) * people_per_unit(people, row["maximum occupancy"])
    return cost


def _accommodation_rows(query, plan, db):
    for i, day in enumerate(_days(query, plan), 1):
        if filled(day.get("accommodation")):
            row = _entity_row(db, "accommodations", day["accommodation"])
            if row is not None:
                yield i, day["accommodation"], row


def room_rule(query: dict[str, Any], plan: Sequence[dict[str, Any]], db: TravelDB) -> tuple[bool, str]:
    """Room Rule: no accommodation forbids what the query's ``house rule`` needs (its ``house_rules`` must not
    contain "No <rule>", e.g. "No pets"; the harness's ``is_valid_room_rule``, which spells "parties" correctly
    since its commit ed379c4, April 2024)."""
    rule = query["local_constraint"]["house rule"]
    for i, text, row in _accommodation_rows(query, plan, db):
        if not house_rule_fits(row["house_rules"], rule):
            return False, f"day {i}: {text[:50]!r} has 'No {rule}'"
    return True, ""


def room_type(query: dict[str, Any], plan: Sequence[dict[str, Any]], db: TravelDB) -> tuple[bool, str]:
    """Room Type: every accommodation has the requested type: entire room = "Entire home/apt", private room =
    "Private room", shared room = "Shared room", not shared room = anything but "Shared room"."""
    wanted = query["local_constraint"]["room type"]
    for i, text, row in _accommodation_rows(query, plan, db):
        kind = row["room type"]
        if not room_type_fits(kind, wanted):
            return False, f"day {i}: {text[:50]!r} is a {kind}, the query asks {wanted}"
    return True, ""


def cuisine(query: dict[str, Any], plan: Sequence[dict[str, Any]], db: TravelDB) -> tuple[bool, str]:
    """Cuisine: every requested cuisine is served by at least one meal taken outside the origin city (a
    restaurant serves the cuisines its ``Cuisines`` list names).

    Differs: the harness skips the *rest of the day* after a meal in the origin city (a ``continue`` in its
    meal loop); we skip only that meal.
    """
    wanted = list(query["local_constraint"]["cuisine"])
    served: set[str] = set()
    for day in _days(query, plan):
        for meal in MEALS:
            if not filled(day.get(meal)):
                continue
            pair = name_city(day[meal])
            if pair is None or pair[1] == query["org"]:
                continue
            row = db.find("restaurants", *pair)
            if row is not None:
                served.update(c for c in wanted if c in cuisines_of(row))
    missing = [c for c in wanted if c not in served]
    return (not missing), (f"no meal serves {', '.join(missing)}" if missing else "")


def transportation(query: dict[str, Any], plan: Sequence[dict[str, Any]], db: TravelDB) -> tuple[bool, str]:
    """Transportation: no leg mentions the excluded mode (``no flight``: the keyword "flight"; ``no
    self-driving``: "self-driving"), case-insensitively, whatever else the leg mentions.

    Differs: the harness matches "Flight" / "Self-driving" case-sensitively, so "flight number: F1" passes its
    "no flight" rule. A flight leg that also mentions a taxi fails "no flight" here (regression-tested).
    """
    banned = {"no flight": "flight", "no self-driving": "self-driving"}[query["local_constraint"]["transportation"]]
    for i, day in enumerate(_days(query, plan), 1):
        leg = leg_of(day)
        if leg is not None and banned in leg.modes:
            return False, f"day {i} uses {banned}"
    return True, ""


CHECKS = {name: globals()[name] for name in COMMONSENSE + HARD if name != "budget"}  # budget: total_cost


def applicable_hard(query: dict[str, Any]) -> list[str]:
    """The hard checks that count for ``query``: budget, and each local constraint that is set."""
    constraint = query.get("local_constraint") or {}
    return ["budget"] + [k for k in HARD[1:] if constraint.get(HARD_KEY[k]) is not None]


def evaluate_plan(query: dict[str, Any], plan: Sequence[dict[str, Any]] | None, db: TravelDB) -> PlanVerdict:
    """All checks of ``plan`` for ``query``.

    Args:
        query: the query's fields (`genenv.benchmarks.travelplanner.query`).
        plan: day records, or ``None`` / empty when no plan was delivered.
        db: the sandbox.
    Returns:
        the `PlanVerdict`; an undelivered plan fails every check. The hard checks run only when Complete
        Information and Within Sandbox pass (the harness's rule); otherwise they are recorded as failed.
    """
    applicable = applicable_hard(query)
    if not plan:
        return PlanVerdict(False, {k: (False, "no plan") for k in COMMONSENSE},
                           {k: (False, "no plan") for k in applicable})
    verdict = PlanVerdict(True, {k: CHECKS[k](query, plan, db) for k in COMMONSENSE})
    if not (verdict.commonsense["complete_information"][0] and verdict.commonsense["within_sandbox"][0]):
        verdict.hard = {k: (False, "not evaluated: incomplete or outside the sandbox") for k in applicable}
        return verdict
    verdict.hard_evaluated = True
    verdict.cost = total_cost(query, plan, db)
    for k in applicable:
        if k == "budget":
            ok = verdict.cost <= float(query["budget"])
            verdict.hard[k] = (ok, "" if ok else f"costs {verdict.cost:.0f} > budget {query['budget']}")
        else:
            verdict.hard[k] = CHECKS[k](query, plan, db)
    return verdict


def plan_reward(verdict: PlanVerdict, query: dict[str, Any], plan: Sequence[dict[str, Any]] | None) -> float:
    """The agent's training reward in [0, 1]: the share of this query's checks the plan passes (its micro pass
    rate over 8 commonsense + the applicable hard checks), and 0 unless the plan fills exactly ``days`` days.

    The benchmark's own verdict (final pass) is binary and almost never reached by a small model; the share of
    constraints passed is a denser signal with the same optimum. The day-count gate stops a plan like
    ``[{}]`` from collecting the checks that pass vacuously (nothing repeated, nothing conflicting).
    """
    if not verdict.delivered or not plan:
        return 0.0
    if filled_days(query, plan) != query["days"]:
        return 0.0
    return verdict.passed / verdict.total


@dataclass(frozen=True)
class Rates:
    """The official rates of a set of plans (each in [0, 1]) and the counts behind them."""

    n: int
    delivery_rate: float
    commonsense_micro: float
    commonsense_macro: float
    hard_micro: float
    hard_macro: float
    final_pass: float
    per_check: dict[str, tuple[int, int]]  # check -> (passed, counted)

    @property
    def paper_mean(self) -> float:
        """The GenEnv paper's TravelPlanner score: mean of CS micro, CS macro, HD micro, HD macro."""
        return (self.commonsense_micro + self.commonsense_macro + self.hard_micro + self.hard_macro) / 4


def aggregate(verdicts: Sequence[PlanVerdict], queries: Sequence[dict[str, Any]]) -> Rates:
    """The harness's rates over plans and their queries (see the module docstring).

    Raises:
        ValueError: different numbers of verdicts and queries, or none.
    """
    if len(verdicts) != len(queries) or not verdicts:
        raise ValueError(f"need one verdict per query, got {len(verdicts)} verdicts for {len(queries)} queries")
    n = len(verdicts)
    per_check = {k: [0, 0] for k in COMMONSENSE + HARD}
    for v, q in zip(verdicts, queries):
        for k in COMMONSENSE:
            per_check[k][0] += bool(v.commonsense.get(k, (False, ""))[0])
            per_check[k][1] += 1
        for k in applicable_hard(q):
            per_check[k][0] += bool(v.hard.get(k, (False, ""))[0])
            per_check[k][1] += 1
    cs_pass = sum(per_check[k][0] for k in COMMONSENSE)
    hd_pass, hd_total = sum(per_check[k][0] for k in HARD), sum(per_check[k][1] for k in HARD)
    return Rates(n=n, delivery_rate=sum(v.delivered for v in verdicts) / n,
                 commonsense_micro=cs_pass / (len(COMMONSENSE) * n),
                 commonsense_macro=sum(v.commonsense_pass for v in verdicts) / n,
                 hard_micro=hd_pass / hd_total if hd_total else 0.0,
                 hard_macro=sum(v.hard_pass for v in verdicts) / n,
                 final_pass=sum(v.final_pass for v in verdicts) / n,
                 per_check={k: (p, c) for k, (p, c) in per_check.items()})
