"""Random and adversarial model text for the env contract: no text raises in an env's ``step`` or in a benchmark
spec's ``parse_generated``.

The contract (``docs/adding-an-env.md``): a text is an action, or an invalid action that scores 0 with
``info["error"]``, or a generated task, or a `Rejection`; never an exception.
`fuzz_texts` makes the texts: random printable / Unicode / control-character strings; integer literals of
thousands of digits (beyond Python's 4,300-digit int-string limit) and huge hexadecimal literals inside JSON,
Python-literal, ``<tool_call>``, ``API-Request:`` and ReAct forms; nesting thousands of levels deep; ``NaN`` /
``Infinity`` / ``1e999``; oversized texts; and mutations (truncation, splices, repeats, injected fragments) of
given gold texts (`gold_texts`), so that parsers reach their deeper branches. `fuzz_env` steps one
registered env (`genenv.envs.ENVS`) with them, `fuzz_generation` feeds one registered spec's generation
parser; both count what happened instead of raising. The test suite runs a slice; ``lab/benches/bench_fuzz.py``
runs every env and parser with 10,000 texts and prints the figures.
"""
from __future__ import annotations

import contextlib
import random
import re
import string
import time
import traceback
from collections import Counter
from typing import Any, Sequence

__all__ = ["ADVERSARIAL_FRAGMENTS", "fuzz_env", "fuzz_generation", "fuzz_texts", "gold_texts"]

ADVERSARIAL_FRAGMENTS = (
    "9" * 5000, "1" * 4301, "-" + "7" * 6000, "0x" + "f" * 20000, "1e999", "-1e999", "NaN", "Infinity", "-Infinity",
    "1" * 300 + "." + "2" * 300, "1_000_000", "0b" + "1" * 5000, "10**10**10", "True", "None", "null",
    "[" * 3000, "{" * 3000, "(" * 3000, "]" * 50, "}" * 50, "\\u0000", "\\ud800", "\x00", "\u202e", "\ufeff",
    "<tool_call>", "</tool_call>", "<think>", "</think>", "<answer>", "</answer>", "```json", "```", "API-Request:",
    "Action:", "Answer:", "Finish[", "]", "'", '"', "\\", "\n", "\t", "\r\n", "f(x=", "a.b.c(", "**{}", "lambda: 0",
    "__import__('os')", "{'days': ", '"days": ', "Day 1:", "Current City: from A to B", "Flight Number: F",
    "Transportation: Taxi", "-", ";", ",", "😀" * 50,
)
"""Fragments every fuzz corpus starts with and mutations splice in: huge and non-finite numbers, unbalanced
brackets thousands deep, escapes and control characters, and the markers the envs' parsers look for."""


def _huge_literal_texts(rng: random.Random) -> list[str]:
    """Well-formed calls / plans / generations whose one value is a number no parser may convert naively."""
    n = rng.choice([4301, 5000, 20000])
    big = "9" * n
    hexa = "0x" + "f" * n
    return [
        f'<tool_call>{{"name": "f", "arguments": {{"x": {big}}}}}</tool_call>',
        f'{{"name": "f", "arguments": {{"x": {big}}}}}',
        f'[{{"name": "f", "parameters": {{"x": -{big}}}}}]',
        f"API-Request: [f(x={big})]", f"[f(x={hexa})]", f"f(x={hexa})", f"[f(x=[{big}])]",
        f'[{{"days": {big}, "current_city": "A"}}]', f"[{{'days': {hexa}, 'current_city': 'A'}}]",
        f'```json\n[{{"days": 1, "breakfast": {big}}}]\n```', f"{{'plan': [{{'days': {big}}}]}}",
        f'{{"org": "Austin", "dest": "Texas", "days": {big}, "people_number": {big}, "budget": {big}}}',
        f'{{"question": "q", "answer": {big}}}', f"FlightSearch[{big}, {big}, {big}]",
        f'{{"x": {big}.{big}e{big}}}', f"[{'[' * 5000}{big}{']' * 5000}]", "[" * 100000, "{\"a\":" * 50000,
        "[" * 50 + big + "]" * 50, f'{{"name": "f", "arguments": "{{\\"x\\": {big}}}"}}',
    ]


def _mutate(text: str, rng: random.Random) -> str:
    """``text`` truncated, spliced, cut, repeated, its numbers made huge, characters flipped, or a fragment
    appended (one of these, drawn from ``rng``)."""
    if not text:
        return rng.choice(ADVERSARIAL_FRAGMENTS)
    op = rng.randrange(7)
    i, j = sorted(rng.randrange(len(text) + 1) for _ in range(2))
    if op == 0:  # truncate
        return text[:i]
    if op == 1:  # splice in a fragment
        return text[:i] + rng.choice(ADVERSARIAL_FRAGMENTS) + text[j:]
    if op == 2:  # delete a span
        return text[:i] + text[j:]
    if op == 3:  # repeat a span
        return text[:j] + text[i:j] * rng.randint(2, 50) + text[j:]
    if op == 4:  # replace every digit run by a huge number
        return re.sub(r"\d+", "9" * rng.choice([10, 4400, 9000]), text)
    if op == 5:  # flip characters
        chars = list(text)
        for _ in range(rng.randint(1, 10)):
            chars[rng.randrange(len(chars))] = chr(rng.randint(0, 0x2FFF))
        return "".join(chars)
    return text + rng.choice(ADVERSARIAL_FRAGMENTS) * rng.randint(1, 200)


def _random_text(rng: random.Random) -> str:
    """A random text of 0 to 25,000 characters: printable, Unicode, control characters, JSON punctuation, or
    adversarial fragments joined by spaces."""
    kind = rng.randrange(5)
    n = rng.choice([0, 1, 5, 40, 300, 3000, 25000])
    if kind == 0:
        return "".join(rng.choice(string.printable) for _ in range(n))
    if kind == 1:
        return "".join(chr(rng.randint(0x20, 0x2FFF)) for _ in range(n))
    if kind == 2:
        return "".join(chr(rng.randint(0, 31)) for _ in range(n))
    if kind == 3:
        return "".join(rng.choice("[]{}()\"',:;0123456789-.eE ") for _ in range(n))
    return " ".join(rng.choice(ADVERSARIAL_FRAGMENTS) for _ in range(rng.randint(1, 8)))


def fuzz_texts(n: int, seed: int = 0, golds: Sequence[str] = ()) -> list[str]:
    """``n`` texts: a fixed set of huge-literal / deep-nesting texts first, then, in turn, random texts and
    mutations of ``golds`` (when given) and of earlier texts; deterministic for ``seed``.

    Returns:
        a list of ``n`` strings (lengths 0 to about 200,000 characters).
    """
    rng = random.Random(seed)
    texts: list[str] = list(ADVERSARIAL_FRAGMENTS) + _huge_literal_texts(rng) + list(golds)
    while len(texts) < n:
        r = rng.random()
        if golds and r < 0.45:
            texts.append(_mutate(rng.choice(golds), rng))
        elif r < 0.55:
            texts.append(_mutate(rng.choice(texts), rng))
        elif r < 0.6:
            texts.extend(_huge_literal_texts(rng))
        else:
            texts.append(_random_text(rng))
    return texts[:n]


def fuzz_env(name: str, texts: Sequence[str], tasks: int = 4, data_dir: str | None = None) -> dict[str, Any]:
    """Step the registered env ``name`` once per text, made on the first ``tasks`` tasks of its first split and
    wrapped in `TextActionWrapper` (reset first, and again whenever an episode ends,
    with the next task in turn). An exception of a step is counted, not raised.

    Returns:
        ``{"texts", "invalid" (steps whose text was no action), "exceptions", "errors" (the first 3 texts with
        their tracebacks), "wall_s" (seconds)}``.
    Raises:
        KeyError: ``name`` is not a registered env.
    """
    import gymnasium as gym

    from genenv.envs import ENVS, TextActionWrapper

    entry = ENVS[name]
    loaded = entry.env_class.load_tasks(data_dir=data_dir, **entry.split_options[0])[:tasks]
    env = TextActionWrapper(gym.make(entry.env_id, tasks=loaded, data_dir=data_dir).unwrapped)
    out: dict[str, Any] = {"texts": 0, "invalid": 0, "exceptions": 0, "errors": []}
    t0 = time.perf_counter()
    done, k = True, 0
    for text in texts:
        out["texts"] += 1
        try:
            if done:
                env.reset(options={"task_index": k % len(loaded)})
                k += 1
            _, _, terminated, truncated, info = env.step(text)
            done = terminated or truncated
            out["invalid"] += info.get("parsed_action") is None
        except Exception:  # noqa: BLE001 - the point is to count them
            out["exceptions"] += 1
            done = True
            if len(out["errors"]) < 3:
                out["errors"].append(f"{text[:80]!r}: {traceback.format_exc(limit=4)}")
    out["wall_s"] = time.perf_counter() - t0
    env.close()
    return out


def fuzz_generation(name: str, texts: Sequence[str], data_dir: str | None = None) -> dict[str, Any]:
    """Every text through the spec ``name``'s ``parse_generated`` (parent: the first task of its env's first split,
    ``None`` where the spec has no env of that name). An exception of the parser is counted, not raised.

    Returns:
        ``{"texts", "admitted", "rejected" (reason -> count), "exceptions", "errors" (the first 3 texts with their
        tracebacks), "wall_s" (seconds)}``.
    Raises:
        KeyError: ``name`` is not a registered benchmark.
    """
    from genenv.benchmarks.registry import get_benchmark
    from genenv.benchmarks.task_writer import Rejection
    from genenv.envs import ENVS

    spec = get_benchmark(name, data_dir)
    entry = ENVS.get(name)
    parent = None
    if entry is not None:
        loaded = entry.env_class.load_tasks(data_dir=data_dir, **entry.split_options[0])
        parent = loaded[0] if loaded else None
    out: dict[str, Any] = {"texts": 0, "admitted": 0, "rejected": Counter(), "exceptions": 0, "errors": []}
    t0 = time.perf_counter()
    for i, text in enumerate(texts):
        out["texts"] += 1
        try:
            result = spec.parse_generated(text, f"fuzz-{i}", 0, parent)
            if isinstance(result, Rejection):
                out["rejected"][result.reason] += 1
            else:
                out["admitted"] += 1
        except Exception:  # noqa: BLE001
            out["exceptions"] += 1
            if len(out["errors"]) < 3:
                out["errors"].append(f"{text[:80]!r}: {traceback.format_exc(limit=4)}")
    out["wall_s"] = time.perf_counter() - t0
    return out


def gold_texts(data_dir: str | None = None, per_env: int = 4) -> list[str]:
    """The gold texts of the first ``per_env`` tasks of every registered env's first split (seeds for mutation in
    `fuzz_texts`), and their generation form (``spec.as_generation`` as JSON) where the spec has one; a task
    without a gold text, or one its spec cannot write as a generation, adds nothing.

    Returns:
        a list of strings, env by env in name order.
    """
    import json

    from genenv.benchmarks.registry import BENCHMARKS, get_benchmark
    from genenv.envs import ENVS

    golds: list[str] = []
    for name, entry in sorted(ENVS.items()):
        tasks = entry.env_class.load_tasks(data_dir=data_dir, **entry.split_options[0])[:per_env]
        spec = get_benchmark(name, data_dir) if name in BENCHMARKS else None
        for task in tasks:
            # an env without a gold text, or a spec that cannot write a task as a generation, adds no seed
            with contextlib.suppress(Exception):
                golds.append(entry.env_class.gold_text(task))
            if spec is not None:
                with contextlib.suppress(Exception):
                    golds.append(json.dumps(spec.as_generation(task)))
    return [g for g in golds if isinstance(g, str)]
