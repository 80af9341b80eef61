"""Executable API-Bank backends: one small module per API family, the runtime that executes calls on a copy of
``init_database/``, and the catalogue of API descriptions read from the data.

Use `make_runtime` to get a fresh `ApiRuntime` (its own database state) for an episode.
"""
from __future__ import annotations

from pathlib import Path

from genenv.benchmarks.api_bank.apis import accounts, calendar, health, home, info, level3, searcher  # noqa: F401
from genenv.benchmarks.api_bank.apis.base import API_CLASSES, SUITES, Api, ApiError, ApiRuntime, register_api
from genenv.benchmarks.api_bank.apis.catalogue import load_catalogue, load_tables
from genenv.benchmarks.api_bank.apis.searcher import ToolRetriever

_RETRIEVERS: dict[tuple[str, str], ToolRetriever] = {}


def make_runtime(root: Path, suite: str = "lv12", reading: str = "official") -> ApiRuntime:
    """A fresh runtime over the data under ``root`` (catalogue, tables and retriever are cached and shared);
    ``reading`` (``"official"`` / ``"lenient"``): see `ApiRuntime`.

    Raises:
        ValueError: unknown suite or reading. DataError: the API-Bank data is missing.
    """
    if suite not in SUITES:
        raise ValueError(f"unknown API suite {suite!r}; choose one of {SUITES}")
    catalogue = load_catalogue(Path(root), suite)
    key = (str(root), suite)
    if key not in _RETRIEVERS:
        _RETRIEVERS[key] = ToolRetriever(catalogue)
    return ApiRuntime(load_tables(Path(root)), catalogue, suite=suite, searcher=_RETRIEVERS[key], reading=reading)


__all__ = ["API_CLASSES", "SUITES", "Api", "ApiError", "ApiRuntime", "ToolRetriever", "load_catalogue",
           "load_tables", "make_runtime", "register_api",
           # the public modules
           "accounts", "base", "calendar", "catalogue", "checks", "health", "home", "info", "level3", "searcher"]
