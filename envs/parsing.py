"""The one parser from raw model text to actions, shared by every environment, reward and generator.

Structured actions (tool / API calls) are accepted in three surface forms, tried in this order:

1. ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks (Qwen / Hermes chat templates),
   one call per block, or one call per line inside a block (ToolRL's format);
2. JSON: one call object or a list of them, optionally in a ```json fence (``arguments`` or ``parameters``);
3. Python call syntax, ``[f(a=1), g.h(b='x')]`` or ``f(a=1)``, optionally after ``API-Request:`` (API-Bank; an
   ``API-Request: [...]`` line inside longer text is found too), parsed with `ast` and
   `ast.literal_eval` only: model text is never executed.

Free-text answers: the content of ``<answer>...</answer>``, else the text after the last ``Answer:``, else the
whole text, stripped (``<think>`` blocks removed first).

Two more surface forms, for structured outputs that are not tool calls: `parse_literal` (the first JSON or
Python-literal list / object in the text, e.g. a TravelPlanner plan as JSON or in its annotated
``[{'days': 1, ...}]`` form) and `parse_bracket_call` (a ReAct action ``Name[arg1, arg2]``, e.g.
TravelPlanner's ``FlightSearch[New York, London, 2022-10-01]``).

**Parsing settings** (`PARSING_MODES`, the envs' ``parsing`` option): ``official`` reads model text exactly as
the benchmark's official harness (or the reference the paper cites) reads it; ``lenient`` is this module's
forgiving reading above. Each env documents its official reading (``TaskEnv.parse_official``) and
``docs/official-differences.md`` lists, per benchmark, every place where we differ from the official harness.

Every failure raises `ActionParseError` with a human-readable reason; environments turn that into
reward 0 and ``info["error"]``. Nothing in here raises anything else, whatever the input (fuzz-tested:
``python lab/benches/bench_fuzz.py``). Bounds: text length `MAX_ACTION_CHARS`, numeric literals
`MAX_NUMBER_CHARS` characters, nesting `MAX_NESTING` levels (`loads_json`,
`literal_eval`, `check_value`: use them, not ``json.loads`` / ``ast.literal_eval``, on model text).
"""
from __future__ import annotations

import ast
import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ActionParseError", "MAX_ACTION_CHARS", "MAX_NESTING", "MAX_NUMBER_CHARS", "PARSING_MODES", "ToolCall",
    "check_parsing", "check_value", "loads_json", "parse_bracket_call", "parse_command", "parse_free_text",
    "parse_literal", "parse_tool_calls", "raw_decode_json", "raw_text", "strip_think",
]

MAX_ACTION_CHARS = 20_000  # longer model outputs are rejected before parsing (bounded cost per action)
MAX_NUMBER_CHARS = 100  # longest numeric literal accepted (characters; Python refuses int strings > 4,300 digits)
MAX_NESTING = 32  # deepest list / object nesting accepted in a decoded value
PARSING_MODES = ("official", "lenient")
"""The two readings of model text an env offers (its ``parsing`` option; see the module docstring)."""

_TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE_RE = re.compile(r"```(?:json|python|tool_code)?\s*(.*?)```", re.DOTALL)
# API-Bank's request line inside longer text; the official extractor also searches for it anywhere
_API_REQUEST_RE = re.compile(r"API-Request:\s*(\[.*\])", re.MULTILINE)
_API_REQUEST_SHORT_RE = re.compile(r"API-Request:\s*(\[.*?\)\])", re.MULTILINE)
_THINK_RE = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_ANSWER_TAG_RE = re.compile(r"<answer>\s*(.*?)\s*(?:</answer>|$)", re.DOTALL)


class ActionParseError(ValueError):
    """Model text could not be turned into an action; ``str(exc)`` is the reason shown in ``info["error"]``."""


def check_parsing(parsing: str) -> str:
    """``parsing`` if it is one of `PARSING_MODES`.

    Raises:
        ValueError: any other value (the message lists the choices).
    """
    if parsing not in PARSING_MODES:
        raise ValueError(f"unknown parsing setting {parsing!r}; choose one of {PARSING_MODES}")
    return parsing


def _bounded_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise ActionParseError(f"numeric literal of {len(text)} characters (at most {MAX_NUMBER_CHARS})")
    return int(text)


def _bounded_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise ActionParseError(f"numeric literal of {len(text)} characters (at most {MAX_NUMBER_CHARS})")
    return float(text)


JSON_DECODER = json.JSONDecoder(parse_int=_bounded_int, parse_float=_bounded_float)
"""Strict JSON with bounded numbers: an integer or float literal longer than `MAX_NUMBER_CHARS` raises
`ActionParseError` (plain `json.loads` raises a bare ``ValueError`` past Python's 4,300-digit
int-string limit, and converts anything shorter at quadratic cost)."""


def check_value(value: Any, what: str = "value") -> Any:
    """``value`` (decoded from model text) unchanged, after checking its bounds.

    Checks: nesting of lists / tuples / sets / dicts at most `MAX_NESTING` deep; every ``int`` (``bool``
    aside) fits in `MAX_NUMBER_CHARS` decimal digits (tested on ``bit_length``, never by converting it to
    text, which raises past 4,300 digits; Python literals such as ``0xfff...`` are not covered by the length
    bound of the text). Iterative, so a deep value cannot exhaust the stack.

    Raises:
        ActionParseError: a bound is exceeded; the message names ``what``.
    """
    max_bits = int(MAX_NUMBER_CHARS * 3.33)
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            if item.bit_length() > max_bits:
                raise ActionParseError(f"{what}: integer of more than {MAX_NUMBER_CHARS} digits")
        elif isinstance(item, (list, tuple, set, frozenset, dict)):
            if depth >= MAX_NESTING:
                raise ActionParseError(f"{what}: nested more than {MAX_NESTING} levels deep")
            children = list(item.keys()) + list(item.values()) if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value


def loads_json(text: str) -> Any:
    """``json.loads`` for model text: strict JSON through `JSON_DECODER`, then `check_value`.

    Raises:
        ActionParseError: too long a number or too deep a nesting; ``json.JSONDecodeError`` (a ``ValueError``):
            not JSON; ``RecursionError``: nesting deeper than the interpreter's stack.
    """
    return check_value(JSON_DECODER.decode(text), "JSON")


def raw_decode_json(text: str, start: int = 0) -> tuple[Any, int]:
    """`json.JSONDecoder.raw_decode` of ``text`` from index ``start`` with `loads_json`'s bounds;
    returns ``(value, end index)``. Raises as `loads_json`."""
    value, end = JSON_DECODER.raw_decode(text, start)
    return check_value(value, "JSON"), end


def literal_eval(text: Any) -> Any:
    """`ast.literal_eval` with `check_value`'s bounds (``text``: source or an ``ast`` node).

    Raises:
        ActionParseError: a bound is exceeded; otherwise what `ast.literal_eval` raises (``ValueError``,
            ``TypeError``, ``SyntaxError``, ``MemoryError``, ``RecursionError``).
    """
    if isinstance(text, str) and len(text) > MAX_ACTION_CHARS:
        raise ActionParseError(f"literal too long ({len(text)} > {MAX_ACTION_CHARS} characters)")
    with warnings.catch_warnings():  # model text with odd escapes must not print compiler warnings
        warnings.simplefilter("ignore")
        return check_value(ast.literal_eval(text), "literal")


@dataclass(frozen=True)
class ToolCall:
    """One function call: a (possibly dotted) function name and keyword arguments (JSON-like values)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_bfcl(self) -> dict[str, dict[str, Any]]:
        """The call in bfcl-eval's decoded form ``{name: {param: value}}``."""
        return {self.name: dict(self.arguments)}

    def to_python(self) -> str:
        """The call as Python syntax, ``name(k=v, ...)`` with ``repr`` values (parseable by this module)."""
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        return f"{self.name}({args})"

    def to_json(self) -> dict[str, Any]:
        """The call as ``{"name": ..., "arguments": {...}}`` (the ``<tool_call>`` payload)."""
        return {"name": self.name, "arguments": dict(self.arguments)}


def strip_think(text: str) -> str:
    """``text`` without ``<think>...</think>`` blocks (an unclosed block runs to the end)."""
    return _THINK_RE.sub("", text)


def checked_text(text: Any) -> str:
    """``text`` with its ``<think>`` blocks removed (`strip_think`), after the checks every parser makes.

    Raises:
        ActionParseError: ``text`` is not a string, or longer than `MAX_ACTION_CHARS`.
    """
    return strip_think(raw_text(text))


def raw_text(text: Any) -> str:
    """``text`` unchanged, for official readings that pass model text on as it is (e.g. ALFWorld's game).

    Raises:
        ActionParseError: ``text`` is not a string, or longer than `MAX_ACTION_CHARS` (our bound).
    """
    if not isinstance(text, str):
        raise ActionParseError(f"model output must be a string, got {type(text).__name__}")
    if len(text) > MAX_ACTION_CHARS:
        raise ActionParseError(f"model output too long ({len(text)} > {MAX_ACTION_CHARS} characters)")
    return text


def _call_from_obj(obj: Any) -> ToolCall:
    if not isinstance(obj, dict):
        raise ActionParseError(f"a call must be a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if name is None and "function" in obj and isinstance(obj["function"], dict):  # OpenAI tool_calls shape
        return _call_from_obj(obj["function"])
    if not isinstance(name, str) or not name.strip():
        raise ActionParseError("a call needs a non-empty string 'name'")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # OpenAI puts arguments as a JSON string
        try:
            args = loads_json(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            raise ActionParseError(f"arguments of {name!r} are not valid JSON: {exc.msg}") from None
        except RecursionError:
            raise ActionParseError(f"arguments of {name!r} are nested too deeply") from None
    if not isinstance(args, dict):
        raise ActionParseError(f"arguments of {name!r} must be an object, got {type(args).__name__}")
    if not all(isinstance(k, str) for k in args):
        raise ActionParseError(f"argument names of {name!r} must be strings")
    return ToolCall(name.strip(), args)


def _calls_from_json(text: str) -> list[ToolCall]:
    try:
        obj = loads_json(text)
    except json.JSONDecodeError:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if len(lines) > 1 and all(ln.startswith("{") for ln in lines):  # JSON Lines: one call per line (ToolRL)
            return [_call_from_obj(loads_json(ln)) for ln in lines]
        raise
    if isinstance(obj, list):
        return [_call_from_obj(o) for o in obj]
    if isinstance(obj, dict) and isinstance(obj.get("tool_calls"), list):
        return [_call_from_obj(o) for o in obj["tool_calls"]]
    return [_call_from_obj(obj)]


def _dotted_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted_name(node.value)}.{node.attr}"
    raise ActionParseError("a function name must be a dotted identifier")


def _call_from_ast(node: ast.AST) -> ToolCall:
    if not isinstance(node, ast.Call):
        raise ActionParseError(f"expected a function call, got {type(node).__name__}")
    name = _dotted_name(node.func)
    if node.args:
        raise ActionParseError(f"{name}: positional arguments are not allowed, use keyword=value")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise ActionParseError(f"{name}: **kwargs unpacking is not allowed")
        try:
            args[kw.arg] = literal_eval(kw.value)
        except ActionParseError:
            raise
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise ActionParseError(f"{name}: value of {kw.arg!r} is not a literal") from None
    return ToolCall(name, args)


def _calls_from_python(text: str) -> list[ToolCall]:
    text = text.strip()
    if text.startswith("API-Request:"):
        text = text[len("API-Request:"):].strip()
    with warnings.catch_warnings():  # model text with odd escapes must not print compiler warnings
        warnings.simplefilter("ignore")
        tree = ast.parse(text, mode="eval").body
    if isinstance(tree, (ast.List, ast.Tuple)):
        return [_call_from_ast(e) for e in tree.elts]
    return [_call_from_ast(tree)]


def parse_tool_calls(text: str, last_block_only: bool = False) -> list[ToolCall]:
    """Parse model text into a list of tool calls (see the module docstring for the accepted forms).

    Args:
        text: raw model output (any string).
        last_block_only: of several ``<tool_call>`` blocks read only the last (ToolRL's reading); default: all.
    Returns:
        the calls in order; ``[]`` when the text is an explicit empty list (``[]``), which means "no call".
    Raises:
        ActionParseError: no accepted form parses; the message says why.
    """
    text = checked_text(text).strip()
    if not text:
        raise ActionParseError("empty model output")
    errors: list[str] = []
    try:
        blocks = _TOOL_CALL_RE.findall(text)
        if blocks and last_block_only:
            blocks = blocks[-1:]
        if blocks:
            calls: list[ToolCall] = []
            for block in blocks:
                calls.extend(_calls_from_json(block))
            return calls
        candidates = ([m.strip() for m in _FENCE_RE.findall(text)] + [text]
                      + [m.strip() for rx in (_API_REQUEST_RE, _API_REQUEST_SHORT_RE) for m in rx.findall(text)])
        for cand in candidates:
            for parser in (_calls_from_json, _calls_from_python):
                try:
                    return parser(cand)
                except ActionParseError as exc:
                    errors.append(str(exc))
                except (ValueError, SyntaxError, TypeError):
                    continue  # not this surface form: try the next parser / candidate
    except ActionParseError:
        raise
    except (json.JSONDecodeError, ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise ActionParseError(f"malformed tool call: {type(exc).__name__}") from None
    reason = errors[0] if errors else "no tool call found (expected <tool_call>{json}</tool_call>, JSON or f(k=v))"
    raise ActionParseError(reason)


def _final_line(text: str, marker: str, what: str) -> str:
    """The first non-empty line of the ``<answer>`` content, else of the text after the last ``marker``
    (case-insensitive), else of the whole text; ``<think>`` blocks removed.

    Raises:
        ActionParseError: not a string, longer than `MAX_ACTION_CHARS`, or no line.
    """
    text = checked_text(text)
    tag = _ANSWER_TAG_RE.search(text)
    if tag:
        text = tag.group(1)
    else:
        idx = text.lower().rfind(marker)
        text = text[idx + len(marker):] if idx >= 0 else text
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        raise ActionParseError(f"no {what} in model output")
    return lines[0]


def parse_free_text(text: str) -> str:
    """Extract the final answer from free-text model output.

    Returns the ``<answer>`` content, else the text after the last ``Answer:`` (first line), else the first
    non-empty line of the whole text, stripped.

    Raises:
        ActionParseError: the output is not a string, too long, or has no answer text (no letter or digit).
    """
    answer = _final_line(text, "answer:", "answer text")
    if not any(ch.isalnum() for ch in answer):
        raise ActionParseError(f"answer {answer[:40]!r} has no letter or digit")
    return answer


_COMMAND_PREFIX_RE = re.compile(r"^\s*(?:>\s*|(?:action|command|next action)\s*:\s*)", re.IGNORECASE)


def parse_command(text: str) -> str:
    """Extract one game command from model output (text-game envs: TextWorldExpress, ALFWorld-style).

    Takes the ``<answer>`` content or the text after the last ``Action:`` if present, else the whole output;
    then its first non-empty line, without a ``>`` / ``Action:`` / ``Command:`` prefix, surrounding quotes or
    backticks, or trailing ``.``/``!``; whitespace collapsed and lower-cased (matching against the admissible
    commands is the env's job).

    Raises:
        ActionParseError: not a string, longer than `MAX_ACTION_CHARS`, or no command text.
    """
    line = _final_line(text, "action:", "command")
    command = _COMMAND_PREFIX_RE.sub("", line).strip().strip("`'\"").rstrip(".!").strip()
    command = " ".join(command.lower().split())
    if not any(ch.isalnum() for ch in command):
        raise ActionParseError(f"no command in model output {line[:40]!r}")
    return command


def _closing_bracket(text: str, start: int) -> int:
    """Index of the bracket that closes ``text[start]`` (``[`` or ``{``), skipping quoted strings (single or
    double quotes, backslash escapes), or -1 when it is never closed."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


MAX_LITERAL_STARTS = 4  # opening brackets tried per candidate text (bounded cost on long outputs)


def parse_literal(text: str, openers: str = "[{") -> Any:
    """The first list or object in model text, as JSON or as a Python literal.

    Candidates are the contents of ``` fences, then the whole text (``<think>`` blocks removed). In each, up to
    `MAX_LITERAL_STARTS` opening brackets of ``openers`` are tried in order: first strict JSON
    (`json.JSONDecoder.raw_decode`), then `ast.literal_eval` of the text up to the matching closing
    bracket (Python literals such as ``[{'days': 1, 'breakfast': '-'}]``; never ``eval``).

    Returns:
        the decoded value (a ``list`` or ``dict``).
    Raises:
        ActionParseError: not a string, longer than `MAX_ACTION_CHARS`, or no candidate decodes (the
            message names the first decoding error).
    """
    text = checked_text(text)
    errors: list[str] = []
    for cand in [m.strip() for m in _FENCE_RE.findall(text)] + [text]:
        starts = [i for i, ch in enumerate(cand) if ch in openers][:MAX_LITERAL_STARTS]
        for start in starts:
            try:
                value, _ = raw_decode_json(cand, start)
                if isinstance(value, (list, dict)):
                    return value
            except ActionParseError as exc:
                errors.append(str(exc))
                continue
            except (json.JSONDecodeError, RecursionError) as exc:
                errors.append(f"not JSON ({str(exc)[:80]})")
            end = _closing_bracket(cand, start)
            if end < 0:
                errors.append("unclosed bracket")
                continue
            try:
                value = literal_eval(cand[start:end + 1])
            except ActionParseError as exc:
                errors.append(str(exc))
                continue
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
                errors.append(f"not a Python literal ({type(exc).__name__})")
                continue
            if isinstance(value, (list, dict)):
                return value
    raise ActionParseError(errors[0] if errors else f"no list or object (starting with one of {openers!r}) found")


def parse_bracket_call(text: str, signatures: dict[str, tuple[str, ...]],
                       aliases: dict[str, str] | None = None) -> ToolCall:
    """A ReAct action ``Name[arg1, arg2, ...]`` (optionally after ``Action:``) as a `ToolCall`.

    The first ``Name[...]`` whose name is a key of ``signatures`` (or of ``aliases``, mapped to its target) is
    taken; its bracket content is split on commas and stripped, and the values are named by the signature's
    parameters. Only names the caller declares are recognised, so JSON text is never mistaken for a call.

    Args:
        text: raw model output.
        signatures: tool name -> parameter names, in order.
        aliases: other accepted names -> the tool name they mean.
    Raises:
        ActionParseError: not a string, too long, no declared ``Name[...]``, or the wrong number of arguments.
    """
    text = checked_text(text)
    aliases = aliases or {}
    names = sorted(set(signatures) | set(aliases), key=len, reverse=True)
    if not names:
        raise ActionParseError("no tool names declared")
    match = re.search(r"\b(" + "|".join(map(re.escape, names)) + r")\s*\[([^\[\]]*)\]", text)
    if not match:
        raise ActionParseError(f"no action of the form Name[arguments], Name one of {', '.join(sorted(signatures))}")
    name = aliases.get(match.group(1), match.group(1))
    params = signatures[name]
    raw = match.group(2).strip()
    values = [v.strip().strip("'\"").strip() for v in raw.split(",")] if raw else []
    if len(values) != len(params):
        raise ActionParseError(f"{name} takes {len(params)} argument(s) [{', '.join(params)}], got {len(values)}")
    return ToolCall(name, dict(zip(params, values)))
