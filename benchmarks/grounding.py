"""Grounded validation: is a generated task's gold answer stated in its request?

A generated tool-use task (BFCL, BFCL multi-turn, API-Bank) pairs a request with a gold call. Type-checking the call
against its schema, or executing it, does not show that the call *follows from the request*: a small environment
policy happily writes "What's the weather?" with the gold call ``get_weather(city="Paris", unit="kelvin")``. A task
is grounded when every gold argument value is stated in the request:

- a string is stated when its normalised form occurs in the normalised request, or, for a multi-word value, when
  at least half of its words do (``"Los Angeles, CA"`` in "... in Los Angeles"); normalisation lower-cases,
  reads ``_`` as a space and ``^`` as ``**`` (``engine_size``, ``x^2``), collapses punctuation and whitespace,
  and drops a plural ``s`` (``pandas`` states ``panda``);
- a number is stated when the request contains it as a numeric literal (``12``, ``12.0``, ``1,200`` (also read
  as 1 and 200), ``1e-9``, ``5%`` for 0.05 and 5), or as a number word (``six``, ``twice``, ``a dozen``), up to
  sign (``112.07 W`` for -112.07) and relative tolerance 1e-6;
- a date or time string (``2023-03-26``, ``03-26``, ``2023-03-26 14:00:00``, ``14:00``) is stated when the
  request names its month (by name or number) and day, and its hour (12- or 24-hour clock) when it has one
  ("March 26th at 2 PM"); the year may be left implicit;
- a string that is a number (``"2"``) is checked as a number;
- booleans, ``None`` and the values 0 and 1 are exempt (requests rarely spell them: "from rest", "enable it");
- a list is stated when every item is; an object (dict) when every value is;
- a value equal to the parameter's schema ``default`` or among its ``enum`` (or its items' ``enum``) is exempt.

Written here because no library checks this; the rule was calibrated on the real BFCL, BFCL multi-turn and
API-Bank tasks (see ``docs/task-generation.md`` for how many real tasks pass it and why the others do not).
"""
from __future__ import annotations

import math
import re
from typing import Any, Iterable

__all__ = ["normalise", "stated_numbers", "ungrounded_arguments"]

_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
          "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
          "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
          "million": 1_000_000, "billion": 1_000_000_000, "twice": 2, "thrice": 3, "double": 2, "triple": 3,
          "half": 0.5, "quarter": 0.25, "dozen": 12, "single": 1, "once": 1, "first": 1, "second": 2, "third": 3,
          "fourth": 4, "fifth": 5}
_NUMBER_RE = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?%?")
_TOKEN_RE = re.compile(r"[a-z0-9*]+(?:\.[0-9]+)?")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_DATE_RE = re.compile(r"^(?:(\d{4})-)?(\d{1,2})-(\d{1,2})(?:-(\d{4}))?(?:[ T](\d{1,2}):(\d{2})(?::\d{2})?)?$")
_TIME_RE = re.compile(r"^(\d{1,2}):(\d{2})(?::\d{2})?$")
MAX_TEXT = 20_000  # longer texts are cut before scanning (bounded cost on any model output)


def normalise(text: Any) -> str:
    """Lower case, ``_`` as a space, ``^`` as ``**``, every run of other punctuation and whitespace as one space,
    a trailing plural ``s`` dropped from words of four letters or more."""
    s = str(text)[:MAX_TEXT].lower().replace("_", " ").replace("^", "**")
    return " ".join(_singular(w) for w in _TOKEN_RE.findall(s))


def _singular(word: str) -> str:
    if len(word) >= 4 and word.endswith("s") and not word.endswith("ss") and word.isalpha():
        return word[:-1]
    return word


def stated_numbers(text: str) -> set[float]:
    """Every number the text states: numeric literals (``1,200``, ``3.5``, ``1e-9``; ``5%`` gives 0.05 and 5) and
    number words (`_WORDS`), as absolute values."""
    text = str(text)[:MAX_TEXT]
    out: set[float] = set()
    for match in _NUMBER_RE.finditer(text):
        literal = match.group(0)
        body = literal.rstrip("%").lstrip("+")
        for digits in [body.replace(",", "")] + (body.split(",") if "," in body else []):
            if not any(c.isdigit() for c in digits):
                continue
            try:
                value = abs(float(digits))
            except ValueError:
                continue
            if math.isfinite(value):
                out.add(value)
                if literal.endswith("%"):
                    out.add(value / 100)
    for word in re.findall(r"[a-z]+", text.lower()):
        if word in _WORDS:
            out.add(float(_WORDS[word]))
    return out


def _as_number(text: str) -> float | None:
    """``text`` as a number when it is one (``"2"``, ``"3.5"``), else ``None``."""
    try:
        value = float(text.strip()) if len(text) < 40 else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _number_stated(value: float, numbers: set[float]) -> bool:
    target = abs(float(value))
    return any(math.isclose(target, n, rel_tol=1e-6, abs_tol=1e-12) for n in numbers)


def _month_day_stated(month: int, day: int, request: str) -> bool:
    """The request names ``month`` (name, 3-letter abbreviation or number) and ``day`` (a number, ordinal suffix
    allowed)."""
    if not (1 <= month <= 12):
        return False
    low = request.lower()
    name = _MONTHS[month - 1]
    named = name in low or re.search(rf"\b{name[:3]}\b", low) is not None
    numbers = stated_numbers(re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", low))
    return (named or float(month) in numbers) and float(day) in numbers


def _hour_stated(hour: int, minute: int, request: str) -> bool:
    """The request names the hour (24-hour, or 12-hour with am/pm or not) and, unless 0, the minutes; the day's
    bounds 00:00 and 23:59 need no statement ("from March 1 to March 31")."""
    if (hour, minute) in ((0, 0), (23, 59)):
        return True
    low = request.lower()
    numbers = stated_numbers(low)
    hours = {float(hour), float(hour % 12 or 12)}
    return bool(hours & numbers) and (minute == 0 or f":{minute:02d}" in low or float(minute) in numbers)


def _string_stated(value: str, request: str, raw_request: str) -> bool:
    date = _DATE_RE.match(value.strip())
    if date:
        year, a, b, year2, hour, minute = date.groups()
        month, day = (int(a), int(b)) if (year or not year2) else (int(b), int(a))  # YYYY-MM-DD / MM-DD / DD-MM-YYYY
        if not _month_day_stated(month, day, raw_request) and not _month_day_stated(int(b), int(a), raw_request):
            return False
        return hour is None or _hour_stated(int(hour), int(minute), raw_request)
    time = _TIME_RE.match(value.strip())
    if time:
        return _hour_stated(int(time.group(1)), int(time.group(2)), raw_request)
    wanted = normalise(value)
    if not wanted:
        return True
    if f" {wanted} " in f" {request} ":
        return True
    words = wanted.split()
    if len(words) < 2:
        return False
    present = set(request.split())
    return sum(w in present for w in words) * 2 >= len(words)


def ungrounded_values(value: Any, request: str, exempt: Iterable[Any] = ()) -> list[Any]:
    """The parts of ``value`` (an argument value: string, number, list, dict) that ``request`` does not state
    (see the module docstring); ``exempt`` holds values that need no statement (the parameter's default and enum).
    Never raises; a value of another type is exempt."""
    exempt = list(exempt)
    request = str(request)[:MAX_TEXT]
    norm_request = normalise(request)
    numbers = stated_numbers(request)
    missing: list[Any] = []

    def walk(v: Any, depth: int = 0) -> None:
        if depth > 8 or len(missing) > 20:
            return
        if any(v == e and type(v) is type(e) for e in exempt):
            return
        if isinstance(v, bool) or v is None:
            return
        if isinstance(v, (int, float)):
            if v not in (0, 1) and not _number_stated(v, numbers):
                missing.append(v)
        elif isinstance(v, str):
            number = _as_number(v)
            stated = (number in (0, 1) or _number_stated(number, numbers)) if number is not None else \
                _string_stated(v, norm_request, request)
            if not stated:
                missing.append(v)
        elif isinstance(v, (list, tuple)):
            for item in v[:200]:
                walk(item, depth + 1)
        elif isinstance(v, dict):
            for item in list(v.values())[:200]:
                walk(item, depth + 1)

    walk(value)
    return missing


def ungrounded_arguments(arguments: dict[str, Any], request: str,
                         schemas: dict[str, dict[str, Any]] | None = None) -> dict[str, list[Any]]:
    """``{parameter: [unstated parts]}`` for the arguments of one call that ``request`` does not state; a
    parameter's schema ``default`` and ``enum`` values (and an array's ``items.enum``) are exempt (``schemas``:
    parameter → its JSON schema).
    Empty when the call is grounded."""
    out = {}
    for name, value in (arguments or {}).items():
        schema = (schemas or {}).get(name) or {}
        exempt = list(schema.get("enum") or []) if isinstance(schema.get("enum"), list) else []
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        exempt += list(items.get("enum") or []) if isinstance(items.get("enum"), list) else []
        if "default" in schema:
            exempt.append(schema["default"])
        missing = ungrounded_values(value, request, exempt)
        if missing:
            out[str(name)] = missing
    return out
