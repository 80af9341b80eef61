"""Benchmark (not a test): random and adversarial model text through every env and every generation parser.

    python scripts/bench_fuzz.py [--texts 10000] [--seed 0] [--tasks 4] [--data-dir DIR] [--only NAME ...]

Every registered env (:data:`genenv.envs.ENVS`) is made on the first ``--tasks`` tasks of its first split and
wrapped in :class:`~genenv.envs.wrappers.TextActionWrapper`; each text is one ``step`` after a ``reset`` (an
episode that ends is reset, so multi-step envs see texts at their first and later steps). Every registered
benchmark spec's ``parse_generated`` (the environment policy's generation parser) gets every text too. The
contract checked (``docs/adding-an-env.md``): no text raises; a text is an action, or an invalid action that
scores 0 with ``info["error"]``, or a generated task, or a :class:`~genenv.benchmarks.task_writer.Rejection`.

The texts (:func:`fuzz_texts`) mix: random printable / Unicode / control-character strings; integer literals of
thousands of digits (beyond Python's 4,300-digit int-string limit) and huge hexadecimal literals inside JSON,
Python-literal, ``<tool_call>``, ``API-Request:`` and ReAct forms; nesting thousands of levels deep; ``NaN`` /
``Infinity`` / ``1e999``; oversized texts; and mutations (truncation, splices, repeats, injected fragments) of
each env's gold texts, so that parsers reach their deeper branches.

Prints one line per env (texts, invalid actions, exceptions, wall s) and per generation parser (texts, tasks
admitted, rejections, exceptions, wall s), then the totals; exit status 1 when any text raised.
"""
from __future__ import annotations

import argparse
import contextlib
import random
import re
import string
import time
import traceback
from collections import Counter
from typing import Any, Callable, Sequence

ADVERSARIAL_FRAGMENTS = (
    "9" * 5000, "1" * 4301, "-" + "7" * 6000, "0x" + "f" * 20000, "1e999", "-1e999", "NaN", "Infinity", "-Infinity",
    "1" * 300 + "." + "2" * 300, "1_000_000", "0b" + "1" * 5000, "10**10**10", "True", "None", "null",
    "[" * 3000, "{" * 3000, "(" * 3000, "]" * 50, "}" * 50, "\\u0000", "\\ud800", "\x00", "\u202e", "\ufeff",
    "<tool_call>", "</tool_call>", "<think>", "</think>", "<answer>", "</answer>", "```json", "```", "API-Request:",
    "Action:", "Answer:", "Finish[", "]", "'", '"', "\\", "\n", "\t", "\r\n", "f(x=", "a.b.c(", "**{}", "lambda: 0",
    "__import__('os')", "{'days': ", '"days": ', "Day 1:", "Current City: from A to B", "Flight Number: F",
    "Transportation: Taxi", "-", ";", ",", "😀" * 50,
)


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
    """Step the registered env ``name`` once per text (reset first, and again whenever an episode ends).

    Returns:
        ``{"texts", "invalid", "exceptions", "errors" (first 3 tracebacks), "wall_s"}``.
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
    """Every text through the spec ``name``'s ``parse_generated`` (parent: the first task of its first split).

    Returns:
        ``{"texts", "admitted", "rejected" (reason -> count), "exceptions", "errors", "wall_s"}``.
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
    """The gold texts of the first ``per_env`` tasks of every env (seeds for mutation), and their generation
    form (``spec.as_generation`` as JSON) where the spec has one."""
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


def run(n: int, seed: int = 0, tasks: int = 4, data_dir: str | None = None, only: Sequence[str] = (),
        echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Fuzz every env and generation parser (or those named in ``only``) with ``n`` texts; print and return
    ``{"envs": {name: fuzz_env result}, "parsers": {name: fuzz_generation result}, "texts": n}``."""
    from genenv.benchmarks.registry import BENCHMARKS
    from genenv.envs import ENVS

    texts = fuzz_texts(n, seed, gold_texts(data_dir))
    chars = sum(map(len, texts))
    echo(f"{len(texts)} texts ({chars:,} characters, longest {max(map(len, texts)):,})")
    results: dict[str, Any] = {"envs": {}, "parsers": {}, "texts": len(texts)}
    echo(f"{'env':26} {'texts':>6} {'invalid':>7} {'exceptions':>10} {'wall s':>8}")
    for name in sorted(ENVS):
        if only and name not in only:
            continue
        r = fuzz_env(name, texts, tasks, data_dir)
        results["envs"][name] = r
        echo(f"{name:26} {r['texts']:6d} {r['invalid']:7d} {r['exceptions']:10d} {r['wall_s']:8.1f}")
        for e in r["errors"]:
            echo("  " + e.replace("\n", "\n  "))
    echo(f"{'generation parser':26} {'texts':>6} {'admitted':>8} {'rejected':>8} {'exceptions':>10} {'wall s':>8}")
    for name in sorted(BENCHMARKS):
        if only and name not in only:
            continue
        r = fuzz_generation(name, texts, data_dir)
        results["parsers"][name] = r
        echo(f"{name:26} {r['texts']:6d} {r['admitted']:8d} {sum(r['rejected'].values()):8d} "
             f"{r['exceptions']:10d} {r['wall_s']:8.1f}")
        for e in r["errors"]:
            echo("  " + e.replace("\n", "\n  "))
    every = list(results["envs"].values()) + list(results["parsers"].values())
    echo(f"total: {sum(r['texts'] for r in every)} text evaluations, "
         f"{sum(r['exceptions'] for r in every)} exceptions, {sum(r['wall_s'] for r in every):.1f} s")
    return results


def main(argv: list[str] | None = None) -> int:
    """Command line: run :func:`run`; exit 1 when any text raised."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--texts", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tasks", type=int, default=4, help="tasks per env (the first of its first split)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--only", nargs="*", default=(), help="env / spec names (default: all)")
    args = p.parse_args(argv)
    results = run(args.texts, args.seed, args.tasks, args.data_dir, args.only)
    every = list(results["envs"].values()) + list(results["parsers"].values())
    return 1 if any(r["exceptions"] for r in every) else 0


if __name__ == "__main__":
    raise SystemExit(main())
