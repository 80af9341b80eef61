"""JSON Schemas of generation formats whose every accepted text has a known maximum length.

Under structured decoding (`genenv.runtime.grammar`) a generation can still fail: the token budget ends while
the object is open (a string or an array the model keeps extending). A schema built from the helpers here bounds
every part, and `max_json_bytes` gives the longest text its grammar accepts. A byte-level BPE token carries
at least one byte of text, so ``max_json_bytes(schema) + 1`` tokens (the last one the end-of-turn token) always hold
a complete object: that is the token budget of a constrained generation (`genenv.trainer.generation`).

What the bound relies on (xgrammar 0.2.9's JSON-Schema grammar, the engine of the local policy and vLLM's default;
measured, and tested in ``tests/test_task_generation.py``):

- separators ``", "`` and ``": "``, no other whitespace (`genenv.runtime.grammar.JSON_OPTIONS`);
- a string with a ``pattern`` or a ``maxLength`` is generated without escape sequences (``\\"``, ``\\n``,
  ``\\uXXXX`` are refused):
  its JSON text is its characters in quotes; `text` patterns allow printable ASCII except ``"`` and ``\\``,
  one byte (so at most one token) per character;
- ``enum`` / ``const`` values are generated as their JSON text with raw UTF-8;
- a ``number`` with ``minimum`` and ``maximum`` has at most `FRACTION_DIGITS` fractional digits and no
  exponent; an ``integer`` with both bounds has their digits at most;
- ``maxItems``, ``maxProperties`` and ``propertyNames`` patterns are enforced.

Anything else (a string without a bounded pattern, an array without ``maxItems``, a number without bounds, ``{}``)
makes `max_json_bytes` raise `UnboundedSchema` naming where.
"""
from __future__ import annotations

import json
import re
from typing import Any, Sequence

try:  # Python 3.11+: the regular-expression parser the re module uses (its widths are the pattern's lengths)
    from re import _parser as _sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse  # type: ignore[no-redef]

__all__ = ["TEXT_CLASS", "UnboundedSchema", "array", "fits", "json_object", "max_json_bytes", "number", "text"]

TEXT_CLASS = r"[ !#-\[\]-~]"  # printable ASCII except '"' and '\': one byte, one JSON character, no escape
FRACTION_DIGITS = 6  # fractional digits xgrammar 0.2.9 allows a bounded number
NUMBER_LIMIT = 1_000_000_000  # |value| of the bounded numbers below
UTF8_MAX = 4  # bytes of one character that is not known to be ASCII


class UnboundedSchema(ValueError):
    """A part of a generation schema accepts texts of any length (``path``: where, as ``$.a.b[]``)."""

    def __init__(self, path: str, why: str):
        super().__init__(f"generation schema unbounded at {path}: {why}")
        self.path = path


def json_object(properties: dict[str, Any], optional: Sequence[str] = ()) -> dict[str, Any]:
    """A JSON Schema object with exactly ``properties`` (in that order), all required but ``optional``, no others
    (the strict shape a generation format takes)."""
    return {"type": "object", "properties": properties,
            "required": [k for k in properties if k not in optional], "additionalProperties": False}


def text(max_chars: int, min_chars: int = 0, suffix: str = "") -> dict[str, Any]:
    """A string of ``min_chars`` to ``max_chars`` printable ASCII characters other than ``"`` and ``\\``, then the
    literal ``suffix`` (e.g. ``"?"``): JSON text of at most ``max_chars + len(suffix) + 2`` bytes.

    Raises:
        ValueError: ``max_chars < min_chars`` or a negative bound.
    """
    if min_chars < 0 or max_chars < min_chars:
        raise ValueError(f"text bounds must satisfy 0 <= min_chars <= max_chars, got {min_chars}, {max_chars}")
    return {"type": "string", "pattern": f"^{TEXT_CLASS}{{{min_chars},{max_chars}}}{re.escape(suffix)}$"}


def integer(minimum: int = -NUMBER_LIMIT, maximum: int = NUMBER_LIMIT) -> dict[str, Any]:
    """An integer in ``[minimum, maximum]``."""
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


def number(minimum: float = -NUMBER_LIMIT, maximum: float = NUMBER_LIMIT) -> dict[str, Any]:
    """A number in ``[minimum, maximum]`` (at most `FRACTION_DIGITS` fractional digits when generated)."""
    return {"type": "number", "minimum": minimum, "maximum": maximum}


def array(items: dict[str, Any], max_items: int, min_items: int = 0) -> dict[str, Any]:
    """An array of ``min_items`` to ``max_items`` values of ``items``."""
    return {"type": "array", "items": items, "minItems": min_items, "maxItems": max_items}


def pattern_width(pattern: str) -> tuple[int, bool]:
    """The most characters a string matching ``pattern`` (Python ``re`` syntax, anchored) has, and whether every
    character it can match is ASCII.

    Raises:
        UnboundedSchema: the pattern matches strings of any length (path ``pattern``).
        re.error: not a regular expression.
    """
    parsed = _sre_parse.parse(pattern)
    width = parsed.getwidth()[1]
    if width >= _sre_parse.MAXREPEAT:
        raise UnboundedSchema("pattern", f"{pattern!r} matches strings of any length")
    return width, _ascii_only(parsed)


def _ascii_only(parsed) -> bool:
    """Whether every character node of a parsed pattern matches ASCII only (conservative: classes by category,
    negated sets and ``.`` count as non-ASCII)."""
    c = _sre_parse
    for op, av in parsed:
        if op is c.LITERAL:
            if av >= 128:
                return False
        elif op is c.IN:
            for sub_op, sub_av in av:
                if sub_op is c.LITERAL and sub_av < 128:
                    continue
                if sub_op is c.RANGE and sub_av[1] < 128:
                    continue
                return False
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            if not _ascii_only(av[2]):
                return False
        elif op is c.SUBPATTERN:
            if not _ascii_only(av[-1]):
                return False
        elif op is c.BRANCH:
            if not all(_ascii_only(branch) for branch in av[1]):
                return False
        elif op is c.AT:
            continue
        else:  # ANY, NOT_LITERAL, CATEGORY, back-references, ...
            return False
    return True


def _literal_bytes(value: Any) -> int:
    """Bytes of ``value``'s JSON text as generated (raw UTF-8, the grammar's separators)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")).encode())


def _number_bytes(schema: dict[str, Any], path: str, fraction: bool) -> int:
    lo = schema.get("minimum", schema.get("exclusiveMinimum"))
    hi = schema.get("maximum", schema.get("exclusiveMaximum"))
    if lo is None or hi is None:
        raise UnboundedSchema(path, f"{schema.get('type')} needs minimum and maximum")
    digits = max(len(str(int(abs(v)))) for v in (lo, hi))
    sign = 1 if min(lo, hi) < 0 else 0
    return sign + digits + (1 + FRACTION_DIGITS if fraction else 0)


def max_json_bytes(schema: dict[str, Any] | bool, path: str = "$") -> int:
    """The longest JSON text, in UTF-8 bytes, that the grammar of ``schema`` accepts (see the module docstring for
    the grammar facts this relies on); an upper bound where parts of the schema exclude each other.

    Args:
        schema: a JSON Schema built with this module's helpers, ``enum`` / ``const``, ``anyOf`` / ``oneOf``,
            ``type`` lists, ``boolean`` / ``null``, objects with ``properties`` or with ``additionalProperties``
            plus ``maxProperties`` and a ``propertyNames`` pattern.
        path: where ``schema`` sits (for errors).
    Raises:
        UnboundedSchema: some part accepts texts of any length.
    """
    if schema is True or schema == {}:
        raise UnboundedSchema(path, "any JSON value")
    if schema is False:
        return 0
    if "const" in schema:
        return _literal_bytes(schema["const"])
    if "enum" in schema:
        return max(_literal_bytes(v) for v in schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return max(max_json_bytes(s, f"{path}<{key}{i}>") for i, s in enumerate(schema[key]))
    kind = schema.get("type")
    if isinstance(kind, list):
        return max(max_json_bytes({**schema, "type": k}, path) for k in kind)
    if kind == "null":
        return 4
    if kind == "boolean":
        return 5
    if kind == "integer":
        return _number_bytes(schema, path, fraction=False)
    if kind == "number":
        return _number_bytes(schema, path, fraction=True)
    if kind == "string":
        if "pattern" not in schema and "maxLength" in schema:  # no escapes under maxLength either
            return 2 + int(schema["maxLength"]) * UTF8_MAX
        if "pattern" not in schema:
            raise UnboundedSchema(path, "a string needs a bounded pattern (text()) or maxLength")
        try:
            width, ascii_only = pattern_width(schema["pattern"])
        except UnboundedSchema as exc:
            raise UnboundedSchema(path, str(exc)) from None
        return 2 + width * (1 if ascii_only else UTF8_MAX)
    if kind == "array":
        if "maxItems" not in schema:
            raise UnboundedSchema(path, "an array needs maxItems")
        n = int(schema["maxItems"])
        if n == 0:
            return 2
        return 2 + n * max_json_bytes(schema.get("items", {}), f"{path}[]") + 2 * (n - 1)
    if kind == "object":
        return _object_bytes(schema, path)
    raise UnboundedSchema(path, f"unsupported schema {json.dumps(schema)[:80]}")


def _object_bytes(schema: dict[str, Any], path: str) -> int:
    """`max_json_bytes` of an object: its listed properties (all present, the worst case) and, when
    ``additionalProperties`` is a schema, ``maxProperties`` more with keys of a bounded ``propertyNames``."""
    parts = [len(json.dumps(k, ensure_ascii=False).encode()) + 2 + max_json_bytes(s, f"{path}.{k}")
             for k, s in schema.get("properties", {}).items()]
    extra = schema.get("additionalProperties", False)
    if extra not in (False, None):
        if "maxProperties" not in schema:
            raise UnboundedSchema(path, "additional properties need maxProperties")
        names = schema.get("propertyNames", {})
        if "pattern" not in names:
            raise UnboundedSchema(path, "additional properties need a propertyNames pattern")
        width, ascii_only = pattern_width(names["pattern"])
        key = 2 + width * (1 if ascii_only else UTF8_MAX)
        value = max_json_bytes(extra if isinstance(extra, dict) else {}, f"{path}.*")
        parts += [key + 2 + value] * max(0, int(schema["maxProperties"]) - len(parts))
    return 2 + sum(parts) + 2 * max(0, len(parts) - 1)


_GENERABLE_NUMBER = re.compile(rf"-?(0|[1-9][0-9]*)(\.[0-9]{{1,{FRACTION_DIGITS}}})?")


def _numbers_generable(value: Any) -> bool:
    """Whether every number in ``value`` has a JSON text a bounded number's grammar writes (no exponent, at most
    `FRACTION_DIGITS` fractional digits: ``1e-09`` cannot be written)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, (int, float)):
        return bool(_GENERABLE_NUMBER.fullmatch(json.dumps(value)))
    if isinstance(value, dict):
        return all(_numbers_generable(v) for v in value.values())
    if isinstance(value, list):
        return all(_numbers_generable(v) for v in value)
    return False


def fits(value: Any, schema: dict[str, Any]) -> bool:
    """Whether the grammar of ``schema`` can write ``value``: valid under ``schema`` (``jsonschema``'s Draft
    2020-12 validator; the anchored patterns of `text` test the whole string) with every number in a form a
    bounded number is generated in (`_numbers_generable`)."""
    import jsonschema

    return _numbers_generable(value) and jsonschema.Draft202012Validator(schema).is_valid(value)
