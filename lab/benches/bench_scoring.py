"""Benchmark (not a test): our BFCL scoring throughput against calling bfcl-eval's checker directly.

    python lab/benches/bench_scoring.py [--repeats 3] [--data-dir DIR]

For every AST category it scores the gold answers twice: (a) ours, from raw model text
(``<tool_call>`` JSON) through `TextActionWrapper` → parser → env step →
`genenv.benchmarks.bfcl.checker.bfcl_check`; (b) direct, bfcl-eval's own prompt-mode decoder
(``default_decode_ast_prompting`` on Python call syntax) plus ``ast_checker``, as its eval runner does. Prints
answers/s of both, the ratio ours/direct, and that both verdicts agree.
"""
from __future__ import annotations

import argparse
import time

from genenv.benchmarks.bfcl.env import BFCLEnv, gold_calls, load_bfcl_tasks
from genenv.envs.wrappers import TextActionWrapper
from genenv.benchmarks.bfcl.checker import CHECKER_MODEL_NAME, IRRELEVANCE_CATEGORIES, RELEVANCE_CATEGORIES, language_of
from genenv.benchmarks.bfcl.data import SINGLE_TURN_CATEGORIES


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one line per category plus the total."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--data-dir", default=None)
    args = p.parse_args(argv)
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.model_handler.utils import default_decode_ast_prompting

    cats = [c for c in SINGLE_TURN_CATEGORIES if c not in IRRELEVANCE_CATEGORIES + RELEVANCE_CATEGORIES
            and language_of(c) == "python"]
    tot_ours = tot_direct = tot_n = 0.0
    print(f"{'category':24} {'answers':>7} {'ours/s':>10} {'direct/s':>10} {'ratio':>6} agree")
    for cat in cats:
        tasks = load_bfcl_tasks(cat, data_dir=args.data_dir)
        env = TextActionWrapper(BFCLEnv(tasks=tasks))
        texts = [BFCLEnv.gold_text(t) for t in tasks]
        pythons = ["[" + ", ".join(c.to_python() for c in gold_calls(t)) + "]" for t in tasks]
        ours, direct = [], []
        t0 = time.perf_counter()
        for _ in range(args.repeats):
            ours = []
            for i, text in enumerate(texts):
                env.reset(options={"task_index": i})
                ours.append(env.step(text)[1] == 1.0)
        t1 = time.perf_counter()
        for _ in range(args.repeats):
            direct = []
            for t, src in zip(tasks, pythons):
                decoded = default_decode_ast_prompting(src, ReturnFormat.PYTHON)
                direct.append(ast_checker(t.tools, decoded, t.gold, Language.PYTHON, cat, CHECKER_MODEL_NAME)["valid"])
        t2 = time.perf_counter()
        n = len(tasks) * args.repeats
        tot_ours += t1 - t0
        tot_direct += t2 - t1
        tot_n += n
        print(f"{cat:24} {len(tasks):7d} {n / (t1 - t0):10.0f} {n / (t2 - t1):10.0f} "
              f"{(t2 - t1) / (t1 - t0):6.2f} {ours == direct}")
    print(f"{'total':24} {int(tot_n / args.repeats):7d} {tot_n / tot_ours:10.0f} {tot_n / tot_direct:10.0f} "
          f"{tot_direct / tot_ours:6.2f}   (ratio = our throughput / direct checker throughput)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
