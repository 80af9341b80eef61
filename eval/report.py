"""Leaderboard output: result files, the Markdown table beside the paper's rows, and the bar chart."""
from __future__ import annotations

import csv
import json
from dataclasses import asdict
from pathlib import Path

from genenv.envs.data import data_label
from genenv.eval.baselines import load_baselines
from genenv.benchmarks.registry import get_benchmark


def leaderboard_markdown(result, data_dir: str | None = None) -> str:
    """Markdown table: the paper's Table 1 rows and the evaluated policy, one column per evaluated benchmark
    (percent), followed by the protocol of every number in the policy's row."""
    benches = list(result.headlines)
    base = load_baselines(data_dir)
    cols = [get_benchmark(b).baseline_column for b in benches]
    lines = ["| model | " + " | ".join(benches) + " |", "|---|" + "---|" * len(benches)]
    paper_rows = base.iterrows() if any(c in base.columns for c in cols) else iter(())
    for _, row in paper_rows:  # a benchmark without a Table 1 column shows "—" in the paper's rows
        lines.append(f"| {_paper_label(row['model'])} | "
                     + " | ".join(f"{row[c]:.1f}" if c in base.columns else "—" for c in cols) + " |")
    lines.append(f"| **{result.policy}** (this run) | "
                 + " | ".join(f"**{100 * result.headlines[b].value:.1f}**" for b in benches) + " |")
    lines.append("")
    for b in benches:
        m, spec = result.headlines[b], get_benchmark(b)
        paper = f"paper column = {spec.paper_protocol}" if spec.baseline_column in base.columns else "not in the paper"
        lines.append(f"- {b}: this run = {m.key}, {m.protocol} (n={m.n}); {paper}.")
    lines.append("")
    lines.append("| metric | value (%) | n | protocol |")
    lines.append("|---|---|---|---|")
    for m in result.metrics:
        lines.append(f"| {m.key} | {100 * m.value:.1f} | {m.n} | {m.protocol} |")
    return "\n".join(lines)


def _paper_label(model: str) -> str:
    return model if "(paper)" in model else f"{model} (paper)"


def write_results(result, out: Path, data_dir: str | None = None, split: str = "test") -> None:
    """Write ``tasks.jsonl``, ``summary.json``, ``summary.csv``, ``summary.md`` and ``leaderboard.png`` to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "tasks.jsonl", "w", encoding="utf-8") as fh:
        for row in result.rows:
            fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    summary = {"policy": result.policy, "split": split, "data_dir": data_label(data_dir),
               "metrics": [asdict(m) for m in result.metrics],
               "headlines": {b: asdict(m) for b, m in result.headlines.items()}, "timing": result.timing}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    with open(out / "summary.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["metric", "value", "n", "protocol"])
        for m in result.metrics:
            w.writerow([m.key, f"{m.value:.6f}", m.n, m.protocol])
    (out / "summary.md").write_text(leaderboard_markdown(result, data_dir) + "\n")
    plot_leaderboard(result, out / "leaderboard.png", data_dir)


def plot_leaderboard(result, path: Path, data_dir: str | None = None) -> None:
    """Horizontal bar chart per evaluated benchmark: the paper's rows in grey (when Table 1 has the benchmark),
    this run highlighted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    benches = list(result.headlines)
    if not benches:
        return
    base = load_baselines(data_dir)
    fig, axes = plt.subplots(1, len(benches), figsize=(6 * len(benches), 0.35 * (len(base) + 2) + 1.2),
                             squeeze=False)
    for ax, b in zip(axes[0], benches):
        col = get_benchmark(b).baseline_column
        paper = base if col in base.columns else base.iloc[:0]
        names = [_paper_label(m) for m in paper["model"]] + [f"{result.policy} (this run)"]
        values = (list(paper[col]) if len(paper) else []) + [100 * result.headlines[b].value]
        colors = ["#b0b0b0"] * len(paper) + ["#d62728"]
        ax.barh(names, values, color=colors)
        ax.invert_yaxis()
        ax.set_xlim(0, 100)
        ax.set_xlabel("score (%)")
        ax.set_title(f"{b} — grey: paper Table 1 ({get_benchmark(b).paper_protocol})\n"
                     f"red: this run ({result.headlines[b].protocol})", fontsize=7, wrap=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
