"""BFCL single-turn correctness through bfcl-eval's own AST checker, used as a library (not rewritten).

Official semantics (``bfcl_eval/eval_checker/eval_runner.py`` of ``bfcl-eval==2026.3.23``):

- AST categories (simple_*, multiple, parallel, parallel_multiple, live_*): the decoded calls
  ``[{name: {param: value}}]`` go to ``ast_checker(functions, calls, ground_truth, language, category, model)``;
  parallel categories match order-free. Java / JavaScript values must be strings of source code, which the
  checker converts with its type converters.
- ``irrelevance`` / ``live_irrelevance``: correct iff the output decodes to no call (a decode failure or ``[]``).
- ``live_relevance``: correct iff the output decodes to at least one call.

Reading model text under ``parsing="official"`` (`official_calls`): bfcl-eval's own decoder for the Qwen
function-calling format that our prompt demonstrates (``bfcl_eval/model_handler/local_inference/qwen_fc.py``:
``QwenFCHandler._extract_tool_calls`` / ``decode_ast``): every ``<tool_call>\n{json}\n</tool_call>`` block (the
newlines are part of its pattern), blocks that are not JSON silently dropped; no block, no call.

bfcl-eval is installed with ``--no-deps`` (its ``numpy==1.26.4`` pin conflicts with verl's ``numpy>=2``); its
checker module imports every provider SDK at import time, which is slow (figures: ``lab/notes/cpu-measurements.md``,
"benchmarks/bfcl/checker.py"), so it is imported lazily, once.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from genenv.envs.extras import MissingExtra
from genenv.envs.parsing import ActionParseError, ToolCall, check_value, raw_text

__all__ = [
    "CHECKER_MODEL_NAME", "IRRELEVANCE_CATEGORIES", "RELEVANCE_CATEGORIES", "UNSATISFIABLE_IDS", "bfcl_check",
    "language_of", "official_calls",
]

# A model name known to bfcl-eval's MODEL_CONFIG_MAPPING whose `underscore_to_dot` is False, so that dotted
# function names are compared verbatim (the checker looks the model up only for that flag).
CHECKER_MODEL_NAME = "gorilla-openfunctions-v2"

IRRELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance")

# Entries of the bfcl-eval 2026.3.23 answer key that NO model output can pass under the official checker
# (measured by trying every encoding; each reason is the checker's own). They count against every model alike.
UNSATISFIABLE_IDS: dict[str, str] = {
    "simple_java_36": "ArrayList items typed 'any' convert to strings, but the key expects the int 42 and True",
    "simple_java_65": "ArrayList items typed 'any' convert to strings, but the key expects booleans True",
    "simple_java_64": "the key's nested dict value is a bare string, which dict_checker reads as a list of characters",
    "live_simple_106-63-0": "a required array parameter whose allowed-value list is empty ([]): nothing is accepted",
    "live_simple_112-68-0": "required array parameters whose allowed-value lists are empty ([]): nothing is accepted",
    "live_multiple_862-181-3": "the key requires 'journey_start_time', which the function schema does not define",
    "live_multiple_964-207-0": "the schema requires 'statement', which the key does not allow",
}
RELEVANCE_CATEGORIES = ("live_relevance",)


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one BFCL check: ``valid`` (the official correctness bit), the checker's error list and type."""

    valid: bool
    error: str = ""
    error_type: str = ""


@lru_cache(maxsize=1)
def _checker():
    try:
        from bfcl_eval.constants.enums import Language
        from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise MissingExtra("bfcl", [exc.name or str(exc)], "bfcl-eval's checker") from exc
    return ast_checker, Language


@lru_cache(maxsize=1)
def _qwen_fc_extract():
    # a slow import, paid once (figures: lab/notes/cpu-measurements.md, "benchmarks/bfcl/checker.py")
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler

    return QwenFCHandler._extract_tool_calls


def official_calls(text: str) -> list[ToolCall]:
    """The calls bfcl-eval's Qwen function-calling handler reads from ``text`` (see the module docstring); ``[]``
    when it finds none (bfcl-eval's "no call": correct for irrelevance, wrong elsewhere).

    Raises:
        ActionParseError: ``text`` is not a string or too long (our bound), or a block decodes to something that
            is not ``{"name": str, "arguments": object}`` (bfcl-eval's ``decode_ast`` fails on it: a decode error).
    """
    calls = []
    for item in _qwen_fc_extract()(raw_text(text)):
        if not (isinstance(item, dict) and isinstance(item.get("name"), str)
                and isinstance(item.get("arguments"), dict)):
            raise ActionParseError(f"bfcl-eval's decoder reads a block that is not a call: {str(item)[:80]!r}")
        calls.append(ToolCall(item["name"], check_value(dict(item["arguments"]), "arguments")))
    return calls


def language_of(category: str) -> str:
    """``"java"``, ``"javascript"`` or ``"python"`` for a BFCL category name (as bfcl-eval's ``is_java``/``is_js``)."""
    if "javascript" in category:
        return "javascript"
    if "java" in category:
        return "java"
    return "python"


def bfcl_check(
    calls: list[dict[str, dict[str, Any]]] | None,
    functions: list[dict[str, Any]],
    ground_truth: list[dict[str, Any]] | None,
    category: str,
    parse_error: str = "",
) -> CheckResult:
    """Official BFCL correctness of one decoded model output.

    Args:
        calls: decoded calls ``[{name: {param: value}}]``, or ``None`` when the output did not decode.
        functions: the task's function schemas (BFCL ``function`` field, unmodified).
        ground_truth: BFCL ``possible_answer`` ground truth (``None`` for (ir)relevance categories).
        category: BFCL category, e.g. ``"simple_python"``, ``"live_parallel_multiple"``, ``"irrelevance"``.
        parse_error: the decoder's message when ``calls`` is ``None`` (reported in ``error``).
    Returns:
        `CheckResult`; never raises for any model output (checker exceptions become invalid results).
    """
    if category in IRRELEVANCE_CATEGORIES:
        if calls:
            return CheckResult(False, "a function call was produced for an irrelevant request",
                               "irrelevance_error:decoder_success")
        return CheckResult(True)
    if category in RELEVANCE_CATEGORIES:
        if not calls:
            return CheckResult(False, f"no function call decoded. {parse_error}".strip(),
                               "relevance_error:decoder_failed")
        return CheckResult(True)
    if calls is None:
        return CheckResult(False, f"Invalid syntax. Failed to decode AST. {parse_error}".strip(),
                           "ast_decoder:decoder_failed")
    from bfcl_eval.utils import is_function_calling_format_output

    ast_checker, Language = _checker()
    if not is_function_calling_format_output(calls):  # the official eval_runner's format check; [] passes it, and
        # the AST checker then reports wrong_count, as the official runner does
        return CheckResult(False, "Did not output in the specified format.", "ast_decoder:decoder_wrong_output_format")
    language = {"python": Language.PYTHON, "java": Language.JAVA, "javascript": Language.JAVASCRIPT}[
        language_of(category)
    ]
    try:
        result = ast_checker(functions, calls, ground_truth, language, category, CHECKER_MODEL_NAME)
    except Exception as exc:  # the official checker raises on some malformed values; that output is wrong
        return CheckResult(False, f"checker raised {type(exc).__name__}: {exc}"[:500], "checker_exception")
    errors = result.get("error") or []
    return CheckResult(bool(result["valid"]), "; ".join(map(str, errors))[:1000], result.get("error_type", ""))
