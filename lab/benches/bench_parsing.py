"""Both readings of model text side by side: every metric under ``parsing=official`` and ``parsing=lenient``.

Usage:

    python lab/benches/bench_parsing.py --benchmarks bamboogle --policy smollm2
    python lab/benches/bench_parsing.py --benchmarks alfworld --policy smollm2 --max-new-tokens 16 \\
        --option alfworld.splits=valid_unseen --option alfworld.protocol=single_step [--out DIR]

Where every episode is one turn (single-step benchmarks, ALFWorld's single-step protocol) the policy generates
once (greedy, under the lenient setting) and the very same outputs are read again under the official setting
(`ReplayPolicy`), so the difference is the reading alone. Episodes of several turns are played once per
setting: the reading changes what the env does, so the trajectories differ.
Prints a Markdown table ``metric | n | official | lenient | lenient - official`` (percent) and, with ``--out``,
writes ``parsing.json`` (both results' metrics and timing) and ``<benchmark>-<setting>.jsonl`` (the per-task rows
of ``genenv-eval``'s ``tasks.jsonl``). The rules of each reading:
``docs/official-differences.md``.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from genenv.envs.data import resolve_data_dir, write_json, write_jsonl
from genenv.eval.leaderboard import add_eval_arguments, parse_options, policy_from_args
from genenv.runtime.episodes import RolloutSpec
from genenv.runtime.evaluation import EvalResult, evaluate
from genenv.runtime.policies import Generation, Prompt


class ReplayPolicy:
    """Answers each prompt with the text recorded for its task (``texts``: task id -> model text), so that
    recorded outputs can be read again under another setting. Single-step tasks only (one turn per task).

    Raises:
        KeyError: a prompt whose task has no recorded text.
    """

    def __init__(self, texts: dict[str, str], name: str = "replay"):
        self.texts, self.name = dict(texts), name

    def generate(self, prompts: Sequence[Prompt], n: int = 1, temperature: float = 0.0,
                 max_new_tokens: int = 256) -> list[list[Generation]]:
        """``n`` copies of the recorded text of each prompt's task (shape ``[len(prompts)][n]``)."""
        return [[Generation(self.texts[p.task.id])] * n for p in prompts]


def compare(policy, benchmark: str, **eval_kwargs: Any) -> tuple[EvalResult, EvalResult]:
    """``(official result, lenient result)`` of ``policy`` on one benchmark (see the module docstring for how
    one-turn and longer episodes differ). ``eval_kwargs`` go to `evaluate`."""
    lenient = evaluate(policy, [benchmark], parsing="lenient", **eval_kwargs)
    if any(row["turns"] != 1 for row in lenient.rows):
        official = evaluate(policy, [benchmark], parsing="official", **eval_kwargs)
    else:
        replay = ReplayPolicy({row["task_id"]: row["raw_output"] for row in lenient.rows}, name=lenient.policy)
        official = evaluate(replay, [benchmark], parsing="official", **eval_kwargs)
    return official, lenient


def table(official: EvalResult, lenient: EvalResult) -> str:
    """Markdown table of the metrics both results have, in the official result's order (percent)."""
    other = {m.key: m for m in lenient.metrics}
    lines = ["| metric | n | official (%) | lenient (%) | lenient - official |", "|---|---|---|---|---|"]
    for m in official.metrics:
        if m.key in other:
            o, le = 100 * m.value, 100 * other[m.key].value
            lines.append(f"| {m.key} | {m.n} | {o:.1f} | {le:.1f} | {le - o:+.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_eval_arguments(p)
    p.set_defaults(benchmarks="bamboogle")
    p.add_argument("--out", default=None, help="folder for parsing.json")
    args = p.parse_args(argv)
    root = resolve_data_dir(args.data_dir)
    policy = policy_from_args(args)
    report: dict[str, Any] = {}
    for bench in [b.strip() for b in args.benchmarks.split(",") if b.strip()]:
        official, lenient = compare(policy, bench, split=args.split, data_dir=None if root is None else str(root),
                                    limit=args.limit, options=parse_options(args.option),
                                    spec=RolloutSpec(max_new_tokens=args.max_new_tokens,
                                                     env_kwargs=parse_options(args.env_option),
                                                     env_workers=args.env_workers))
        print(f"\n### {bench} ({policy.name}, greedy)\n\n{table(official, lenient)}")
        report[bench] = {name: {"metrics": [asdict(m) for m in r.metrics], "timing": r.timing}
                         for name, r in (("official", official), ("lenient", lenient))}
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            for name, r in (("official", official), ("lenient", lenient)):
                write_jsonl(Path(args.out) / f"{bench}-{name}.jsonl", r.rows)
    if args.out:
        write_json(Path(args.out) / "parsing.json", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
