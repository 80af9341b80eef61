"""Speed of llama.cpp builds: tokens/s of one streamed completion from ``llama-server`` on the
embedded GGUF, for each given llama-server build (a benchmark script that prints figures, not a test).

    python lab/benches/bench_llama_build.py --binary portable=.venv/bin/llama-server --binary native=/tmp/native/bin/llama-server

For each build, the server is started (`LlamaServer` with that binary) and asked
``--repeats`` times for a greedy chat completion and a plain-text completion of ``--max-tokens`` tokens
(`stream_speed`); the table gives the median decoding rate (tokens/s, first streamed
token to last) and the median time to the first token. A build that dies is reported with its exit code (a build for
another CPU dies with SIGILL, on chat requests first) and the other figures are still measured where it answers.
The plain-text request (``--prompt``, default ``Once upon a time``) holds none of the chat template's special
tokens; a native build that died on every longer prompt on an AVX-512/AMX host served the one-token prompt
``Hello``, whose stream is decoding alone. ``--out FILE`` writes the rows as JSON.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from genenv.eval.model_server import LlamaServer, ServerError


def measure(binary: str, threads: int | str, max_tokens: int, repeats: int, prompt: str) -> list[dict[str, Any]]:
    """One row per request kind (``chat``, ``text``): median tokens/s and first-token seconds over ``repeats``
    streams, or the failure (``error``) when the server died or would not start (the server is restarted for
    the other kind)."""
    rows = []
    for chat in (False, True):
        kind = "chat" if chat else "text"
        try:
            with LlamaServer(threads=threads, binary=binary, first_chat=chat) as server:
                runs = [server.stream_speed(max_tokens=max_tokens, chat=chat, prompt=prompt) for _ in range(repeats)]
        except ServerError as e:
            rows.append({"kind": kind, "error": " ".join(str(e).split("; log:")[0].split())[:300]})
            continue
        rows.append({"kind": kind, "tokens": statistics.median(r["tokens"] for r in runs),
                     "tokens_per_s": statistics.median(r["tokens_per_s"] for r in runs),
                     "first_token_s": statistics.median(r["first_token_s"] for r in runs), "repeats": repeats})
    return rows


def main(argv: list[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--binary", action="append", required=True, help="LABEL=LLAMA_SERVER (repeatable)")
    p.add_argument("--threads", default="2", help="llama.cpp threads (a number, or auto)")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--prompt", default="Once upon a time", help="the plain-text request's prompt")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    table = []
    print("| build | request | tokens/s (median) | first token s | tokens | error |\n|---|---|---|---|---|---|")
    for spec in args.binary:
        label, _, binary = spec.partition("=")
        for row in measure(binary, args.threads, args.max_tokens, args.repeats, args.prompt):
            row = {"build": label, "binary": binary, **row}
            table.append(row)
            if "error" in row:
                print(f"| {label} | {row['kind']} | | | | {row['error']} |", flush=True)
            else:
                print(f"| {label} | {row['kind']} | {row['tokens_per_s']:.1f} | {row['first_token_s']:.2f} | "
                      f"{row['tokens']:.0f} | |", flush=True)
    if args.out:
        args.out.write_text(json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
