"""TravelPlanner plans as data and as model text: the day-record structure, reading a plan from model text (JSON,
the annotated Python-literal form, or "Day N:" blocks) and writing it back.

A plan is a list of day records with the keys of `PLAN_KEYS`; values are text (``-`` for nothing,
attractions joined with ``;``), ``days`` is the day number.
"""
from __future__ import annotations

import json
import re
from typing import Any

from genenv.envs.parsing import MAX_ACTION_CHARS, ActionParseError, parse_literal, strip_think

__all__ = ["normalize_plan", "parse_plan", "plan_text"]

PLAN_KEYS = ("days", "current_city", "transportation", "breakfast", "attraction", "lunch", "dinner",
             "accommodation")
MAX_PLAN_DAYS = 14
_KEY_ALIASES = {"day": "days", "days": "days", "current_city": "current_city", "city": "current_city",
                "transportation": "transportation", "transport": "transportation", "breakfast": "breakfast",
                "attraction": "attraction", "attractions": "attraction", "lunch": "lunch", "dinner": "dinner",
                "accommodation": "accommodation", "accommodations": "accommodation"}
_DAY_HEADER_RE = re.compile(r"^[ \t#*]*day[ \t]*(\d+)[ \t*]*:?[ \t*]*$", re.IGNORECASE | re.MULTILINE)
_FIELD_RE = re.compile(r"^[ \t\-*]*(current[ _]city|transportation|breakfast|attractions?|lunch|dinner|"
                       r"accommodations?)[ \t*]*:[ \t]*(.*?)[ \t]*$", re.IGNORECASE | re.MULTILINE)

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
    """Day records in our structure: keys mapped to `PLAN_KEYS` (case, spaces, ``day``/``attractions``
    aliases), values stripped text (``None`` -> ``-``, a list of attractions joined with ``;``), ``days`` an int
    (the record's position when absent); unknown keys dropped; empty records kept (they count as unfilled days).

    Raises:
        ActionParseError: not a non-empty list of objects, more than `MAX_PLAN_DAYS` records, or a value that
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
    anywhere in the text (`parse_literal`), else "Day N:" blocks of "Current City:",
    "Transportation:", ... lines (the benchmark's text format); then `normalize_plan`.

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
    """A plan as model text: a JSON list, one day per line (what `parse_plan` reads back)."""
    return "[\n" + ",\n".join(json.dumps(day, ensure_ascii=False) for day in plan) + "\n]"
