"""``genenv-eval``: run a policy over benchmarks through the environments and print a leaderboard.

Example:

    genenv-eval --benchmarks bfcl,bamboogle --policy smollm2 --limit 20
    genenv-eval --benchmarks bfcl --categories all --policy gold          # proves env and checker agree
    genenv-eval --benchmarks bamboogle --policy openai:http://localhost:8000/v1#Qwen2.5-7B-Instruct
    genenv-eval --benchmarks paper --policy gold --limit 5                # the paper's protocols, all five columns

Writes ``<out>/tasks.jsonl`` (per task: prompt, raw output, parsed action, reward, error), ``summary.json``,
``summary.csv``, ``summary.md`` and ``leaderboard.png``, and prints two tables (`genenv.eval.report`): beside
the paper's Table 1 rows, our number only where the paper's protocol was measured (else the reason, in the cell);
then every metric of the run with its protocol label. ``--benchmarks paper`` evaluates the paper's protocols on
all five Table 1 benchmarks (`expand_benchmarks`; Bamboogle's cannot run offline, its cell says why). Model
text is read as the official harness reads it (``--parsing official``, the default); ``--parsing lenient`` uses
our forgiving parsers and says so in every label (``docs/official-differences.md``): a lenient number is never
put beside the paper's.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from genenv.benchmarks.registry import get_benchmark, paper_benchmarks
from genenv.envs.data import is_packaged, resolve_data_dir
from genenv.envs.parsing import PARSING_MODES
from genenv.runtime.episodes import RolloutSpec
from genenv.runtime.evaluation import evaluate

__all__ = ["add_eval_arguments", "expand_benchmarks", "main", "parse_options", "policy_from_args"]


def parse_options(items: Sequence[str], base: dict[str, dict[str, Any]] | None = None
                  ) -> dict[str, dict[str, Any]]:
    """``["twx.games=coin", "twx.episodes=5"]`` → ``{"twx": {"games": "coin", "episodes": 5}}`` (values parsed
    as YAML), merged over ``base``.

    Raises:
        SystemExit: an item is not ``BENCH.KEY=VALUE``.
    """
    import yaml

    out = {k: dict(v) for k, v in (base or {}).items()}
    for item in items:
        key, sep, value = item.partition("=")
        bench, dot, name = key.partition(".")
        if not (sep and dot and bench and name):
            raise SystemExit(f"option {item!r} is not BENCH.KEY=VALUE")
        out.setdefault(bench, {})[name] = yaml.safe_load(value)
    return out


def expand_benchmarks(text: str, base: dict[str, dict[str, Any]] | None = None
                      ) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """``--benchmarks`` → (registry names, per-benchmark loader options).

    ``text`` is a comma list of registry names; ``paper`` stands for the benchmarks that evaluate the paper's
    Table 1 protocols (`paper_benchmarks`), each with its ``paper_options``
    merged over ``base``'s options for it. Names are kept in order, once each. The user's ``--option`` values go
    over the returned options (`parse_options` with them as ``base``).

    Raises:
        KeyError: an unknown benchmark name (fail fast, before any model is loaded).
    """
    out = {k: dict(v) for k, v in (base or {}).items()}
    names: list[str] = []
    for item in (b.strip() for b in text.split(",")):
        if item == "paper":
            for name, opts in paper_benchmarks().items():
                names.append(name)
                out[name] = {**out.get(name, {}), **opts}
        elif item:
            get_benchmark(item)
            names.append(item)
    return list(dict.fromkeys(names)), out


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    """The options every evaluation command shares (``genenv-eval``, ``bench_parsing``, ``bench_endpoint``):
    ``--benchmarks``, ``--policy`` and its settings (local: ``--batch-size``, ``--dtype``, ``--device``,
    ``--sampler``;
    endpoint: ``--concurrency``, ``--timeout``, ``--max-retries``), ``--option`` / ``--env-option``, ``--split``,
    ``--limit``, ``--data-dir``, ``--max-new-tokens``, ``--env-workers``, ``--threads``."""
    p.add_argument("--benchmarks", default="bfcl,bamboogle",
                   help="comma-separated registry names; paper = the paper's protocols on all five Table 1 benchmarks")
    p.add_argument("--policy", default="smollm2",
                   help="gold | random[:SEED] (text games) | smollm2 | hf:PATH | PATH | RUN_DIR[/checkpoints/latest] "
                        "(a training run's agent) | openai:BASE_URL#MODEL")
    p.add_argument("--option", action="append", default=[], metavar="BENCH.KEY=VALUE",
                   help="loader option of one benchmark, e.g. twx.games=coin (repeatable; VALUE is YAML)")
    p.add_argument("--env-option", action="append", default=[], metavar="BENCH.KEY=VALUE",
                   help="env constructor option, e.g. twx.max_steps=30 (repeatable; VALUE is YAML)")
    p.add_argument("--split", default="test", choices=["test", "heldout", "train"])
    p.add_argument("--limit", type=int, default=None, help="at most N tasks per category / benchmark")
    p.add_argument("--data-dir", default=None, help="data dir (default $GENENV_DATA_DIR, else packaged samples)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=16, help="local models: prompts per generate call")
    p.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float32"],
                   help="local models: auto = bfloat16 where the device computes it natively, else float32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--sampler", default="builtin", choices=["builtin", "transformers", "llama-server", "vllm"],
                   help="local models: builtin (the project's CPU engine) | transformers (plain generate) | "
                        "llama-server (llama.cpp's server on the float32 weights; --batch-size slots) | vllm "
                        "(vLLM's server; GENENV_VLLM_PYTHON: its interpreter)")
    p.add_argument("--concurrency", type=int, default=32,
                   help="openai endpoint: requests in flight at once (a vLLM server batches them)")
    p.add_argument("--timeout", type=float, default=120.0, help="openai endpoint: seconds per request")
    p.add_argument("--max-retries", type=int, default=4,
                   help="openai endpoint: retries of a request after connection errors, timeouts, 429 and 5xx "
                        "(exponential backoff)")
    p.add_argument("--env-workers", type=int, default=0,
                   help="multi-step envs: worker processes for the episodes (the envs' CPU budget; 0 = in-process)")
    p.add_argument("--env-server", default=None, metavar="URL",
                   help="play the episodes on a genenv-serve server at URL (http://host:port) instead of in this "
                        "process, or on several (URL,URL,...: sessions spread over them); each server's data "
                        "directory must hold the same tasks")
    p.add_argument("--threads", default="auto",
                   help="CPU threads of the local model: a number, or auto = the usable cores less those other "
                        "processes keep busy now (genenv.runtime.threads)")


def policy_from_args(args: argparse.Namespace):
    """The policy that `add_eval_arguments`' options name (`make_policy`; a local model through another
    ``--sampler``: `local_sampler`),
    after this process's CPU threads are set from ``--threads`` (`prepare_cpu`)."""
    from genenv.runtime.policies import make_policy
    from genenv.runtime.threads import prepare_cpu

    threads = prepare_cpu(args.threads)
    sampler = getattr(args, "sampler", "builtin")
    if sampler != "builtin":  # a local model through another sampler (genenv.runtime.samplers.sampler)
        from genenv.runtime.samplers.sampler import local_sampler

        return local_sampler(sampler, args.policy, dtype=args.dtype, device=args.device, batch_size=args.batch_size,
                             threads=threads)
    return make_policy(args.policy, dtype=args.dtype, device=args.device, batch_size=args.batch_size,
                       concurrency=args.concurrency, timeout=args.timeout, max_retries=args.max_retries)


RESUME_KEYS = ("policy", "benchmarks", "categories", "option", "env_option", "split", "parsing", "max_new_tokens")
"""The ``genenv-eval`` settings that must match for a results folder to be resumed (``--limit`` may grow)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``genenv-eval``: `evaluate_main`; an optional dependency that the chosen benchmarks or
    policy need and that is not installed exits with 1 and the message naming its extra
    (`MissingExtra`). SIGTERM ends it through its finalizers, which stop a server it started
    (`genenv.runtime.processes.exit_on_sigterm`)."""
    from genenv.envs.extras import MissingExtra
    from genenv.runtime.processes import exit_on_sigterm

    exit_on_sigterm()  # `kill PID` stops the llama-server it started too
    try:
        return evaluate_main(argv)
    except MissingExtra as exc:
        print(f"genenv-eval: {exc}", file=sys.stderr)
        return 1


def evaluate_main(argv: list[str] | None = None) -> int:
    """Parse ``genenv-eval``'s arguments, evaluate, print the leaderboard; returns the exit status."""
    p = argparse.ArgumentParser(prog="genenv-eval", description="Evaluate a policy and print a leaderboard.")
    add_eval_arguments(p)
    p.add_argument("--categories", default="simple_python",
                   help="BFCL categories: comma list or 'all' (default simple_python)")
    p.add_argument("--parsing", default="official", choices=list(PARSING_MODES),
                   help="how model text is read: official = the official harness's reading (the paper's columns "
                        "are official); lenient = ours (every metric's protocol label says so)")
    p.add_argument("--out", default=None,
                   help="results folder (default results/<policy>-<time>); an existing one with the same settings "
                        "is resumed: its finished tasks are kept, the rest are played")
    p.add_argument("--resume", action="store_true",
                   help="require that --out holds an evaluation to resume (without it an existing --out resumes too)")
    p.add_argument("--save-every", type=int, default=64,
                   help="tasks per chunk: results are appended to <out>/tasks.jsonl after each chunk")
    args = p.parse_args(argv)

    from genenv.eval.report import leaderboard_markdown, write_results

    benchmarks, loader_options = expand_benchmarks(args.benchmarks, {"bfcl": {"category": args.categories}})
    root = resolve_data_dir(args.data_dir)
    data_dir = None if root is None else str(root)
    if is_packaged(data_dir):
        print("note: evaluating on the packaged samples (set GENENV_DATA_DIR or --data-dir for the full data)",
              file=sys.stderr)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out or f"results/{args.policy.replace('/', '_').replace(':', '_')}-{stamp}")
    log = open_results(out, {k: getattr(args, k) for k in RESUME_KEYS}, require=args.resume)
    policy = policy_from_args(args)
    options = parse_options(args.option, loader_options)
    result = evaluate(policy, benchmarks, split=args.split, data_dir=data_dir, limit=args.limit,
                      options=options, spec=RolloutSpec(max_new_tokens=args.max_new_tokens,
                                                        env_kwargs=parse_options(args.env_option),
                                                        env_workers=args.env_workers, env_server=args.env_server),
                      parsing=args.parsing, log=log, save_every=args.save_every)
    write_results(result, out, data_dir=data_dir, split=args.split)
    print(leaderboard_markdown(result, data_dir=data_dir))
    for unit, t in result.timing.items():
        resumed = f", {t['resumed']} resumed from the log" if t.get("resumed") else ""
        print(f"{unit}: {t['tasks']} tasks in {t['seconds']:.1f} s ({t['tasks_per_second']:.2f} tasks/s){resumed}")
    print(f"results: {out}")
    return 0


def open_results(out: Path, settings: dict[str, Any], require: bool = False):
    """The `ResultLog` of results folder ``out`` (``tasks.jsonl``),
    with ``settings`` written to ``out/eval.json``; an existing folder is resumed when its ``eval.json`` holds the
    same ``settings``.

    Raises:
        SystemExit: ``out`` holds an evaluation with other settings (the message lists them), or ``require`` and
            ``out`` holds none.
    """
    import json

    from genenv.runtime.evaluation import ResultLog

    saved_path = Path(out) / "eval.json"
    if saved_path.is_file():
        saved = json.loads(saved_path.read_text())
        differ = {k: (saved.get(k), v) for k, v in settings.items() if saved.get(k) != v}
        if differ:
            raise SystemExit(f"{out} holds an evaluation with other settings ({differ}, as (saved, now)); "
                             f"use another --out")
    elif require:
        raise SystemExit(f"--resume: {out} holds no evaluation (no eval.json)")
    log = ResultLog(Path(out) / "tasks.jsonl")
    if log.rows:
        print(f"resuming {out}: {len(log.rows)} finished tasks are kept", file=sys.stderr)
    Path(out).mkdir(parents=True, exist_ok=True)
    saved_path.write_text(json.dumps(settings, indent=1))
    return log


if __name__ == "__main__":
    sys.exit(main())
