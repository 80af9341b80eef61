"""TravelPlanner queries: the structured fields, their validation, reading them from query text, and writing text.

A query is a dict with the fields of the benchmark's Hugging Face card (``osunlp/TravelPlanner``):

- ``org`` (origin city), ``dest`` (a city for 3-day trips, a state for 5- and 7-day trips), ``days`` (3, 5 or 7),
  ``visiting_city_number`` (1, 2 or 3, one per two days), ``date`` (the ``days`` consecutive ISO dates),
  ``people_number`` (1-8), ``budget`` (USD, the whole trip), ``level`` (easy / medium / hard), ``query`` (text);
- ``local_constraint``: ``house rule`` (``smoking``, ``parties``, ``children under 10``, ``visitors``, ``pets`` or
  ``None``), ``cuisine`` (a list of `CUISINES` or ``None``), ``room type`` (``entire room``,
  ``private room``, ``shared room``, ``not shared room`` or ``None``), ``transportation`` (``no flight``,
  ``no self-driving`` or ``None``).

The 102 validation queries carry these fields. The 45 train queries exist only as text (the user turns of
``std_travelplanner.jsonl``; the card's ``train.csv`` was not obtainable), so `extract_fields` reads them
from the text with deterministic rules; the tests measure those rules against the 102 validation queries whose
fields are known. Generated queries are written by the environment policy as fields and turned into text by
`render_query`.
"""
from __future__ import annotations

import datetime as dt
import re
from typing import Any, Iterable

__all__ = [
    "CITY_NUMBER", "CONSTRAINT_KEYS", "CUISINES", "DAYS", "HOUSE_RULES", "MAX_PEOPLE", "QUERY_FIELDS", "ROOM_TYPES",
    "TRANSPORT_RULES", "VALIDATION_REASONS", "YEAR", "extract_fields", "level_of", "render_query", "validate_fields",
]

HOUSE_RULES = ("smoking", "parties", "children under 10", "visitors", "pets")
CUISINES = ("Chinese", "American", "Italian", "Mexican", "Indian", "Mediterranean", "French")
ROOM_TYPES = ("entire room", "private room", "shared room", "not shared room")
TRANSPORT_RULES = ("no flight", "no self-driving")
CONSTRAINT_KEYS = ("house rule", "cuisine", "room type", "transportation")
DAYS = (3, 5, 7)
CITY_NUMBER = {3: 1, 5: 2, 7: 3}  # TravelPlanner's design: one destination city per two days
MAX_PEOPLE = 8
QUERY_FIELDS = ("org", "dest", "days", "visiting_city_number", "date", "people_number", "budget",
                "local_constraint")  # a query's structured fields (the validation CSV columns)
YEAR = 2022  # the database (flights, prices) is of March 2022

_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "single": 1, "solo": 1, "alone": 1, "pair": 2, "couple": 2, "duo": 2}
_MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                       "september", "october", "november", "december"), 1)}
_MONTH_RE = "(" + "|".join(m.capitalize() for m in _MONTHS) + ")"


def empty_constraint() -> dict[str, Any]:
    """``{"house rule": None, "cuisine": None, "room type": None, "transportation": None}``."""
    return {k: None for k in CONSTRAINT_KEYS}


def level_of(constraint: dict[str, Any], people: int) -> str:
    """The benchmark's difficulty level of a query: ``easy`` (one person, no local constraint), ``medium``
    (at most one of house rule / cuisine / room type), else ``hard`` (TravelPlanner paper, section 3.3)."""
    n = sum(constraint.get(k) is not None for k in CONSTRAINT_KEYS)
    if n == 0 and people == 1:
        return "easy"
    return "medium" if n <= 1 and constraint.get("transportation") is None else "hard"


VALIDATION_REASONS = ("missing_fields", "unknown_place", "bad_dates", "bad_value")


def validate_fields(q: dict[str, Any], city_state: dict[str, str],
                    state_cities: dict[str, list[str]]) -> tuple[str, str] | None:
    """Why query ``q`` is not a well-formed TravelPlanner query over the given cities, as ``(reason, detail)``
    with ``reason`` in `VALIDATION_REASONS`, or ``None`` when it is well formed.

    Rules: every field present (``missing_fields``); ``org`` a known city and ``dest`` a known city other than
    ``org`` for 3 days, else a known state with at least ``visiting_city_number`` cities besides ``org``
    (``unknown_place``); ``date`` ``days`` consecutive ISO dates of `YEAR` (``bad_dates``); ``days`` in
    `DAYS`, ``visiting_city_number`` = `CITY_NUMBER` [days], ``people_number`` 1-`MAX_PEOPLE`,
    ``budget`` a positive number, ``local_constraint`` with the four keys and allowed values (``bad_value``).
    """
    missing = [k for k in QUERY_FIELDS if k not in q]
    if missing:
        return "missing_fields", f"missing field(s) {missing}"
    days = q["days"]
    if isinstance(days, bool) or days not in DAYS:
        return "bad_value", f"days must be one of {DAYS}, got {str(days)[:20]!r}"
    if q["visiting_city_number"] != CITY_NUMBER[days]:
        got = str(q["visiting_city_number"])[:20]
        return "bad_value", f"a {days}-day trip visits {CITY_NUMBER[days]} city/cities, got {got!r}"
    if not isinstance(q["org"], str) or q["org"] not in city_state:
        return "unknown_place", f"org {str(q['org'])[:40]!r} is not a city of the database"
    dest = q["dest"]
    if not isinstance(dest, str):
        return "unknown_place", "dest must be a string"
    if days == 3:
        if dest not in city_state or dest == q["org"]:
            return "unknown_place", f"dest {dest[:40]!r} must be a database city other than org for a 3-day trip"
    else:
        others = [c for c in state_cities.get(dest, []) if c != q["org"]]
        if len(others) < CITY_NUMBER[days]:
            return "unknown_place", f"dest {dest[:40]!r} must be a state with {CITY_NUMBER[days]}+ cities besides org"
    problem = date_problem(q["date"], days)
    if problem:
        return "bad_dates", problem
    people = q["people_number"]
    if isinstance(people, bool) or not isinstance(people, int) or not 1 <= people <= MAX_PEOPLE:
        return "bad_value", f"people_number must be an integer 1-{MAX_PEOPLE}, got {str(people)[:20]!r}"
    budget = q["budget"]
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget < 1e6:
        return "bad_value", f"budget must be a positive number, got {str(budget)[:20]!r}"
    problem = constraint_problem(q["local_constraint"])
    return ("bad_value", problem) if problem else None


def date_problem(dates: Any, days: int) -> str | None:
    """Why ``dates`` is not ``days`` consecutive ``YYYY-MM-DD`` dates of `YEAR`, or ``None``."""
    if not isinstance(dates, list) or len(dates) != days or not all(isinstance(d, str) for d in dates):
        return f"date must be a list of {days} ISO date strings"
    try:
        parsed = [dt.date.fromisoformat(d) for d in dates]
    except ValueError as exc:
        return f"bad date: {exc}"
    if any(d.year != YEAR for d in parsed):
        return f"dates must be in {YEAR} (the database's year)"
    if any((b - a).days != 1 for a, b in zip(parsed, parsed[1:])):
        return "dates must be consecutive days"
    return None


def constraint_problem(c: Any) -> str | None:
    """Why ``c`` is not a valid ``local_constraint`` dict, or ``None``."""
    if not isinstance(c, dict) or set(c) != set(CONSTRAINT_KEYS):
        return f"local_constraint must have exactly the keys {list(CONSTRAINT_KEYS)}"
    if c["house rule"] is not None and c["house rule"] not in HOUSE_RULES:
        return f"house rule must be one of {HOUSE_RULES} or null"
    cuisine = c["cuisine"]
    if cuisine is not None and (not isinstance(cuisine, list) or not cuisine or len(set(cuisine)) != len(cuisine)
                                or any(x not in CUISINES for x in cuisine)):
        return f"cuisine must be null or a list of distinct names from {CUISINES}"
    if c["room type"] is not None and c["room type"] not in ROOM_TYPES:
        return f"room type must be one of {ROOM_TYPES} or null"
    if c["transportation"] is not None and c["transportation"] not in TRANSPORT_RULES:
        return f"transportation must be one of {TRANSPORT_RULES} or null"
    return None


# ----- reading fields from query text (train queries) -----
def _place_mentions(text: str, names: Iterable[str]) -> list[tuple[int, str]]:
    """``(position, name)`` of the known place names in ``text``, longest match first, non-overlapping."""
    found: list[tuple[int, int, str]] = []
    for name in sorted(set(names), key=len, reverse=True):
        for m in re.finditer(r"(?<![\w.])" + re.escape(name) + r"(?![\w])", text):
            if all(m.end() <= s or m.start() >= e for s, e, _ in found):
                found.append((m.start(), m.end(), name))
    return sorted((s, n) for s, _, n in found)


def _days_of(text: str) -> int | None:
    low = text.lower()
    m = re.search(r"\b(\d|three|five|seven)[- ]days?\b", low) or re.search(r"\b(\d|three|five|seven) days\b", low)
    if m:
        word = m.group(1)
        return int(word) if word.isdigit() else {"three": 3, "five": 5, "seven": 7}[word]
    if re.search(r"\bweek\b|\bweek-long\b|one-week", low):
        return 7
    return None


def _dates_of(text: str) -> list[dt.date]:
    """Every (month, day) mentioned, in order: ``March 16th``, ``16th of March``, and a bare ``13th`` after
    ``between March 9th and``."""
    out: list[tuple[int, dt.date]] = []
    for m in re.finditer(_MONTH_RE + r"\s+(\d{1,2})(?:st|nd|rd|th)?\b", text):
        out.append((m.start(), dt.date(YEAR, _MONTHS[m.group(1).lower()], int(m.group(2)))))
    for m in re.finditer(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+of\s+" + _MONTH_RE, text):
        out.append((m.start(), dt.date(YEAR, _MONTHS[m.group(2).lower()], int(m.group(1)))))
    m = re.search(_MONTH_RE + r"\s+\d{1,2}(?:st|nd|rd|th)?\s+(?:and|to|-|through)\s+(\d{1,2})(?:st|nd|rd|th)\b", text)
    if m:
        out.append((m.end(), dt.date(YEAR, _MONTHS[m.group(1).lower()], int(m.group(2)))))
    m = re.search(r"\b(\d{1,2})(?:st|nd|rd|th)\s+(?:and|to|-|through)\s+(?:the\s+)?\d{1,2}(?:st|nd|rd|th)\s+of\s+"
                  + _MONTH_RE, text)
    if m:
        out.append((m.start(), dt.date(YEAR, _MONTHS[m.group(2).lower()], int(m.group(1)))))
    return [d for _, d in sorted(out)]


def _people_of(text: str) -> int:
    low = text.lower()
    patterns = [r"group of (\w+)", r"party of (\w+)", r"for (\w+) (?:people|persons|individuals|travell?ers)",
                r"(\w+) (?:people|persons|individuals|travell?ers)", r"for a (pair|couple|duo)\b", r"for (two|2)\b",
                r"\b(solo|alone|single)\b", r"for (one) person", r"\ba (pair)\b"]
    for pattern in patterns:
        m = re.search(pattern, low)
        if m:
            word = m.group(1)
            n = int(word) if word.isdigit() else _NUMBER_WORDS.get(word)
            if n:
                return n
    return 1


def _budget_of(text: str) -> int | None:
    m = re.search(r"\$\s?([\d,]+)", text)
    return int(m.group(1).replace(",", "")) if m else None


def _constraints_of(text: str) -> dict[str, Any]:
    low = text.lower()
    c = empty_constraint()
    rules = [("children under 10", r"\bchildren\b|\bkids\b"), ("pets", r"\bpets?\b|pet-friendly"),
             ("smoking", r"smok"), ("visitors", r"visitor"), ("parties", r"\bparties\b|host(?:ing)? (?:a )?part")]
    for rule, pattern in rules:
        if re.search(pattern, low):
            c["house rule"] = rule
            break
    if re.search(r"not (?:be )?(?:a )?shared|non-shared|not.{0,20}shared room", low):
        c["room type"] = "not shared room"
    else:
        for kind in ("entire", "private", "shared"):
            if re.search(kind + r" (?:rooms?|accommodations?|spaces?)", low):
                c["room type"] = f"{kind} room"
                break
    cuisines = sorted((low.find(x.lower()), x) for x in CUISINES if re.search(r"\b" + x.lower() + r"\b", low))
    c["cuisine"] = [x for _, x in cuisines] or None
    negation = r"(?:not|no|n't|avoid|without|never|exclude)\W+(?:\w+\W+){0,6}?"
    if re.search(negation + r"(?:flights?|flying|fly|air travel|airline)\b|non-flight", low):
        c["transportation"] = "no flight"
    elif re.search(r"non-self-driv|" + negation + r"(?:self-driv|drive|driving)", low):
        c["transportation"] = "no self-driving"
    return c


def extract_fields(text: str, city_state: dict[str, str], states: Iterable[str]) -> dict[str, Any]:
    """Read a query's structured fields from its text (deterministic rules; see the module docstring).

    Rules: the first known place mentioned is ``org`` (a city); the length comes from "N-day"/"N days"/"week",
    else from the dates; ``dest`` is the next place mentioned, a city for 3 days or the state of that name for
    5/7 days; the start date is the first "Month Nth" / "Nth of Month" and the dates run for ``days`` days
    (the last date mentioned must be the trip's last day); people from "group of N", "N people", "two",
    "solo", ... (default 1); budget the first ``$`` amount; local constraints from key phrases (house-rule words,
    "entire/private/shared room", cuisine names in mention order, negated flying / self-driving).

    Raises:
        ValueError: a field cannot be read (the message says which); nothing is guessed.
    """
    states = set(states)
    mentions = _place_mentions(text, set(city_state) | states)
    if len(mentions) < 2:
        raise ValueError(f"fewer than two known places in {text[:60]!r}")
    org = mentions[0][1]
    if org not in city_state:
        raise ValueError(f"the first place {org!r} is not a city")
    dates = _dates_of(text)
    days = _days_of(text) or ((dates[-1] - dates[0]).days + 1 if len(dates) >= 2 else None)
    if days not in DAYS:
        raise ValueError(f"trip length {days!r} not in {DAYS}")
    rest = [n for _, n in mentions[1:] if n != org]
    dest = next((n for n in rest if (n in city_state if days == 3 else n in states)), None)
    if dest is None:
        raise ValueError(f"no {'city' if days == 3 else 'state'} destination in {text[:60]!r}")
    if not dates:
        raise ValueError("no date")
    start = dates[0]
    trip = [start + dt.timedelta(days=i) for i in range(days)]
    if len(dates) >= 2 and dates[-1] != trip[-1]:
        raise ValueError(f"the dates {dates[0]}..{dates[-1]} do not span {days} days")
    budget = _budget_of(text)
    if budget is None:
        raise ValueError("no budget")
    people = _people_of(text)
    constraint = _constraints_of(text)
    return {"org": org, "dest": dest, "days": days, "visiting_city_number": CITY_NUMBER[days],
            "date": [d.isoformat() for d in trip], "people_number": people, "local_constraint": constraint,
            "budget": budget, "level": level_of(constraint, people), "query": text}


# ----- writing text from fields (generated queries) -----
def _day_text(iso: str) -> str:
    d = dt.date.fromisoformat(iso)
    suffix = "th" if 10 <= d.day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(d.day % 10, "th")
    return f"{d.strftime('%B')} {d.day}{suffix}, {d.year}"


def render_query(q: dict[str, Any]) -> str:
    """The query text of structured fields ``q`` (our template; every field and constraint is stated).

    Example: ``Please plan a 3-day trip for 2 people from Atlanta to Chicago, from March 24th, 2022 to March
    26th, 2022, with a budget of $1,900. Accommodations must allow parties. We want entire rooms.``
    """
    people = q["people_number"]
    who = "one person" if people == 1 else f"{people} people"
    where = (f"from {q['org']} to {q['dest']}" if q["days"] == 3 else
             f"from {q['org']} visiting {q['visiting_city_number']} cities in {q['dest']}")
    parts = [f"Please plan a {q['days']}-day trip for {who} {where}, from {_day_text(q['date'][0])} to "
             f"{_day_text(q['date'][-1])}, with a budget of ${q['budget']:,}."]
    c = q["local_constraint"]
    if c["house rule"]:
        parts.append(f"Accommodations must allow {c['house rule']}.")
    if c["room type"]:
        parts.append("We do not want shared rooms." if c["room type"] == "not shared room"
                     else f"We want {c['room type']}s.")
    if c["cuisine"]:
        parts.append(f"We want to try {', '.join(c['cuisine'][:-1])}{' and ' if len(c['cuisine']) > 1 else ''}"
                     f"{c['cuisine'][-1]} cuisine.")
    if c["transportation"] == "no flight":
        parts.append("We will not take any flights.")
    elif c["transportation"] == "no self-driving":
        parts.append("We will not drive ourselves.")
    return " ".join(parts)
