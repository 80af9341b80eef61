"""API-Bank's ``ToolSearcher``: retrieval of an API description from the catalogue by keywords.

The original ranks every API by the cosine similarity of sentence embeddings (``paraphrase-MiniLM-L3-v2``) of the
keywords and "<API name split into words> <description>", and returns the best one. Here: an exact API name in
the keywords (``"QueryMeeting"``, ``"query meeting"``) wins outright; otherwise the packaged all-MiniLM-L6-v2 model
(`genenv.rewards.text.embedding_model`, offline) ranks the same texts. Level-1/2 (suite ``lv12``): when the
best API takes a ``token``, the result is ``[GetUserToken's description, best]``, as recorded in the data.
A search counts as correct when its output equals the gold search's on the same catalogue (the released
checker's rule); the recorded outputs of the data describe an older catalogue version.
"""
from __future__ import annotations

import re
from typing import Any

from genenv.benchmarks.api_bank.apis.base import Api, ApiError, register_api, require_text

__all__ = ["ToolRetriever", "describe", "found_names"]

_CAMEL_RE = re.compile(r"(?<!^)(?=[A-Z])")


def split_name(name: str) -> str:
    """``"QueryMeeting"`` -> ``"query meeting"``."""
    return _CAMEL_RE.sub(" ", name).lower()


class ToolRetriever:
    """Ranks catalogue APIs for keywords (see the module docstring); the embedding model loads on first use.

    Args:
        catalogue: ``{api name: description}``; ToolSearcher itself is never a result.
    """

    def __init__(self, catalogue: dict[str, dict[str, Any]]):
        self.names = [n for n in catalogue if n != "ToolSearcher"]
        self.texts = [f"{split_name(n)} {catalogue[n].get('description', '')}" for n in self.names]
        self._exact = {re.sub(r"[\s_]", "", n).lower(): n for n in self.names}
        self._matrix = None
        self._cache: dict[str, str] = {}

    def best(self, keywords: str) -> str:
        """The name of the best-matching API for ``keywords`` (answers are cached per keywords string)."""
        key = re.sub(r"[\s_]", "", keywords).lower()
        if key in self._exact:
            return self._exact[key]
        if keywords not in self._cache:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[keywords] = self._rank(keywords)
        return self._cache[keywords]

    def _rank(self, keywords: str) -> str:
        from genenv.rewards.text import embedding_model

        model = embedding_model()
        if self._matrix is None:
            self._matrix = model.encode(self.texts, normalize_embeddings=True, convert_to_numpy=True)
        query = model.encode([keywords], normalize_embeddings=True, convert_to_numpy=True)[0]
        return self.names[int((self._matrix @ query).argmax())]


def describe(catalogue: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    """The catalogue description of ``name`` in the recorded ``ToolSearcher`` output layout."""
    entry = catalogue[name]
    return {"name": name, "description": entry.get("description", ""),
            "input_parameters": entry.get("input_parameters", {}),
            "output_parameters": entry.get("output_parameters", {})}


def found_names(output: Any) -> list[str]:
    """API names in a ToolSearcher output (a description or a list of them)."""
    items = output if isinstance(output, list) else [output]
    return [i.get("name") for i in items if isinstance(i, dict)]


class _ToolSearcher(Api):
    name = "ToolSearcher"

    def run(self, rt, keywords: str) -> Any:
        keywords = require_text(keywords, "The keywords cannot be empty.")
        if rt.searcher is None:
            raise ApiError("ToolSearcher has no retriever in this runtime")
        best = rt.searcher.best(keywords)
        found = describe(rt.catalogue, best)
        if self.suite == "lv12" and "token" in found["input_parameters"] and "GetUserToken" in rt.catalogue:
            return [describe(rt.catalogue, "GetUserToken"), found]
        return found


@register_api
class ToolSearcher(_ToolSearcher):
    """``ToolSearcher(keywords)`` over the level-1/2 catalogue."""


@register_api
class Lv3ToolSearcher(_ToolSearcher):
    """``ToolSearcher(keywords)`` over the level-3 catalogue."""

    suite = "lv3"
