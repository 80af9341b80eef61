"""The API-Bank tool runtime: the API base class, argument conversion, result records and result comparison.

The official API implementations (``api-bank/apis/*.py`` in AlibabaResearch/DAMO-ConvAI) are not on PyPI; the
classes of this package re-implement the behaviour that the API descriptions and ``init_database/`` define,
written from the benchmark's documentation and verified against the results recorded in the test data
(``tests/test_api_bank.py`` replays every gold call of the data and compares).

A call's *result record* has the official layout ``{"api_name", "input", "output", "exception"}``: ``input`` the
converted arguments, ``output`` the API's return value (``None`` on failure) and ``exception`` the error text
(``None`` on success). `ApiRuntime.check` decides whether a predicted call's result counts as the gold
result, by the released per-API checker's rule (`genenv.benchmarks.api_bank.apis.checks`).
"""
from __future__ import annotations

import ast
import copy
import datetime as dt
from typing import Any, ClassVar

from genenv.benchmarks.api_bank.apis.checks import MISSING_ARGUMENT, READINGS, check_result, is_empty, required_missing

__all__ = [
    "API_CLASSES", "Api", "ApiError", "ApiRuntime", "SUITES", "convert_argument", "month_day", "norm_date",
    "register_api", "require_text", "strict_datetime",
]

SUITES = ("lv12", "lv3")  # the level-1/2 APIs and the level-3 APIs (two API sets; some names occur in both)
API_CLASSES: dict[str, dict[str, type["Api"]]] = {suite: {} for suite in SUITES}


class ApiError(Exception):
    """An API refused a call; ``str(exc)`` becomes the result's ``exception``."""


def register_api(cls: type["Api"]) -> type["Api"]:
    """Class decorator: add an `Api` subclass to `API_CLASSES` under its ``suite`` and ``name``."""
    apis = API_CLASSES[cls.suite]
    if not cls.name or cls.name in apis:
        raise ValueError(f"API class {cls.__name__}: empty or duplicate name {cls.name!r} in suite {cls.suite!r}")
    apis[cls.name] = cls
    return cls


# ---------- value helpers shared by the API families ----------
def strict_datetime(value: str, fmt: str = "%Y-%m-%d %H:%M:%S") -> dt.datetime:
    """``value`` parsed with ``fmt``; `ApiError` with Python's message when it does not match."""
    try:
        return dt.datetime.strptime(str(value), fmt)
    except ValueError as exc:
        raise ApiError(str(exc)) from None


def norm_date(value: Any, fmt: str = "%Y-%m-%d") -> str:
    """A date string normalised to ``fmt`` (stripped; a short year zero-padded to 4 digits).

    Raises:
        ApiError: ``value`` does not parse with ``fmt``.
    """
    text = str(value).strip()
    parts = text.split("-")
    if len(parts) == 3 and len(parts[0]) != 4:
        parts[0] = parts[0].zfill(4)
        text = "-".join(parts)
    return strict_datetime(text, fmt).strftime(fmt)


def month_day(value: Any) -> str:
    """``MM-DD`` of a ``YYYY-MM-DD`` or ``MM-DD`` date; `ApiError` otherwise."""
    text = str(value).strip()
    try:
        return norm_date(text).split("-", 1)[1] if text.count("-") == 2 else \
            dt.datetime.strptime(f"2000-{text}", "%Y-%m-%d").strftime("%m-%d")
    except (ApiError, ValueError) as exc:
        raise ApiError(f"invalid date {text!r}: {exc}") from None


# ---------- argument conversion ----------
def convert_argument(value: Any, type_name: str, param: str, reading: str = "official") -> Any:
    """Convert one argument to the type the API description declares (``str``, ``int``, ``float``, ``bool``,
    ``list``, ``list(str)``, ``dict``).

    Model text and the recorded ``param_dict`` give strings; strings of lists are read with
    `ast.literal_eval` (never ``eval``). Under the ``"official"`` reading numbers and booleans written as
    strings are read as the released ``ToolManager.api_call`` reads them (``api-bank/tool_manager.py``): an
    ``int`` string must satisfy ``str.isdigit()`` and a ``float`` string must after removing one ``.`` (so
    ``' 40.7128 '`` and ``'-3'`` are refused), and a ``bool`` string is true only when it is ``'True'``. The
    ``"lenient"`` reading accepts what Python's ``int`` / ``float`` accept and ``true`` / ``false`` in any case,
    and strips surrounding white space from strings.

    Raises:
        ApiError: the value cannot be converted; the message names the parameter.
    """
    try:
        if reading == "official" and isinstance(value, str) and type_name in ("int", "float", "bool"):
            if type_name == "bool":
                return value == "True"
            digits = value if type_name == "int" else value.replace(".", "", 1)
            if not digits.isdigit():
                raise ValueError(f"not a {type_name} as the released ToolManager reads it")
        if type_name == "str":
            if isinstance(value, (dict, list)):
                raise ValueError("expected a string")
            return str(value) if reading == "official" else str(value).strip()
        if type_name == "int":
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError("expected an integer")
            return int(str(value).strip()) if isinstance(value, str) else int(value)
        if type_name == "float":
            if isinstance(value, bool):
                raise ValueError("expected a number")
            return float(value)
        if type_name == "bool":
            if isinstance(value, bool):
                return value
            if str(value).strip().lower() in ("true", "false"):
                return str(value).strip().lower() == "true"
            raise ValueError("expected True or False")
        if type_name.startswith("list") or type_name == "dict":
            want = dict if type_name == "dict" else list
            if isinstance(value, str):
                value = ast.literal_eval(value.strip())
            if not isinstance(value, want):
                raise ValueError(f"expected a {want.__name__}")
            return value
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise ApiError(f"invalid value for parameter {param!r} ({type_name}): {exc}") from None
    return value


class Api:
    """One API-Bank API.

    Class attributes: ``name`` (the API name), ``suite`` (``"lv12"`` or ``"lv3"``), ``database`` (stem of its
    ``init_database/*.json`` table, or empty). Which parameters a call must give, and how a result is compared
    with the gold result, is the API's entry in `genenv.benchmarks.api_bank.apis.checks.CHECKS` (from the
    released class); `run` receives only the arguments given.

    Subclasses implement `run`, which receives the converted arguments, reads and mutates the runtime's
    tables, and returns the output or raises `ApiError`.
    """

    name: ClassVar[str] = ""
    suite: ClassVar[str] = "lv12"
    database: ClassVar[str] = ""

    def run(self, rt: "ApiRuntime", **kwargs: Any) -> Any:
        """Execute the call on ``rt``'s state; returns the output."""
        raise NotImplementedError


class ApiRuntime:
    """The tool manager of one episode: the database state and the API instances over it.

    Args:
        tables: ``{stem: parsed init_database JSON}``, shared read-only: a table is deep-copied on its first use by
            this runtime (copy on write), so the caller's tables are never mutated and unused ones cost nothing.
        catalogue: ``{api name: description}`` (``input_parameters`` with types), see
            `genenv.benchmarks.api_bank.apis.catalogue.load_catalogue`.
        suite: ``"lv12"`` (levels 1 and 2) or ``"lv3"`` (level 3): which API set serves the calls.
        searcher: the ToolSearcher retriever (``None``: ToolSearcher calls fail with a clear exception).
        reading: ``"official"`` or ``"lenient"``: how arguments are converted (`convert_argument`) and
            results compared (`genenv.benchmarks.api_bank.apis.checks.check_result`).

    `execute` never raises: every failure becomes the result's ``exception``.

    Raises:
        ValueError: unknown ``suite`` or ``reading``.
    """

    def __init__(self, tables: dict[str, Any], catalogue: dict[str, dict[str, Any]], suite: str = "lv12",
                 searcher: Any = None, reading: str = "official"):
        if suite not in SUITES:
            raise ValueError(f"unknown API suite {suite!r}; choose one of {SUITES}")
        if reading not in READINGS:
            raise ValueError(f"unknown reading {reading!r}; choose one of {READINGS}")
        self.apis, self.suite, self.reading = API_CLASSES[suite], suite, reading
        self._shared = tables
        self.tables: dict[str, Any] = {}
        self.catalogue = catalogue
        self.searcher = searcher
        self.memory: dict[str, Any] = {}  # per-API in-memory state (ForgotPassword's code, OpenBankAccount rows)

    def table(self, stem: str) -> Any:
        """The mutable state of ``init_database/<stem>.json``; `ApiError` if it was not loaded."""
        if stem not in self.tables:
            if stem not in self._shared:
                raise ApiError(f"database {stem!r} is not available")
            self.tables[stem] = copy.deepcopy(self._shared[stem])
        return self.tables[stem]

    def fork(self) -> "ApiRuntime":
        """An independent copy of this runtime's current state (to run two calls from the same state)."""
        other = ApiRuntime(self._shared, self.catalogue, suite=self.suite, searcher=self.searcher,
                           reading=self.reading)
        other.tables, other.memory = copy.deepcopy(self.tables), copy.deepcopy(
            {k: v for k, v in self.memory.items() if k != "bm25"})
        return other

    def user_of(self, token: Any) -> str:
        """The username whose token is ``token`` (Account table); `ApiError` ``The token is invalid.``"""
        for user, record in self.table("Account").items():
            if record.get("token") == token:
                return user
        raise ApiError("The token is invalid.")

    def convert(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Arguments of a call to ``name`` converted to their declared types, in the description's order. An
        argument given empty (``None`` or ``""``; under the lenient reading also white space only:
        `is_empty`) counts as not given, as the released parser
        drops it.

        Raises:
            ApiError: unknown API, unknown parameter, an unconvertible value, or a required parameter (one the
                released ``call`` has no default for: `required_missing`)
                left out or given empty; the last one's message starts with ``MISS_INPUT_ARGUMENT``.
        """
        if name not in self.apis or name not in self.catalogue:
            raise ApiError(f"invalid tool name {name!r}")
        declared = self.catalogue[name].get("input_parameters", {})
        unknown = [k for k in arguments if k not in declared]
        if unknown:
            raise ApiError(f"invalid parameter name(s) {unknown} for {name}; expected {list(declared)}")
        missing = required_missing(self.suite, name, declared, arguments, self.reading)
        if missing:
            raise ApiError(f"{MISSING_ARGUMENT}: {name} is missing required argument(s) {missing} (left out or "
                           f"empty; the released {name}.call has no default for them)")
        return {k: convert_argument(arguments[k], str(declared[k].get("type", "str")), k, self.reading)
                for k in declared if k in arguments and not is_empty(arguments[k], self.reading)}

    def execute(self, name: Any, arguments: Any) -> dict[str, Any]:
        """Run one call; returns its result record (never raises)."""
        record: dict[str, Any] = {"api_name": name, "input": arguments, "output": None, "exception": None}
        try:
            if not isinstance(name, str) or not isinstance(arguments, dict):
                raise ApiError("a call needs a string name and a dict of arguments")
            converted = self.convert(name, arguments)
            record["input"] = converted if self.catalogue[name].get("input_parameters") else None
            record["output"] = self.apis[name]().run(self, **converted)
        except ApiError as exc:
            record["exception"] = str(exc)
        except (ValueError, TypeError, KeyError, ArithmeticError, OverflowError, RecursionError) as exc:
            record["exception"] = f"{type(exc).__name__}: {exc}"  # a backend bug must not crash a run
        return record

    def check(self, predicted: dict[str, Any], gold: dict[str, Any]) -> tuple[bool, str]:
        """Whether ``predicted`` counts as ``gold`` under this runtime's reading: ``(ok, reason)``
        (`genenv.benchmarks.api_bank.apis.checks.check_result`)."""
        return check_result(self.suite, predicted, gold, self.reading)


def require_text(value: Any, message: str) -> str:
    """``value`` stripped; `ApiError` ``message`` when it is blank."""
    if is_empty(value, "lenient"):
        raise ApiError(message)
    return str(value).strip()
