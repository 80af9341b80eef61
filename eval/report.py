"""Leaderboard output: result files, the two Markdown tables, and the bar chart.

Table 1 sets the run beside the paper's Table 1 rows: one column per Table 1 column a benchmark of the run belongs
to (``baseline_column``), the paper's rows as published, and our row, whose cell holds our number only where a
benchmark measured that column's protocol (`paper_metric`, official
parsing). Elsewhere the cell says why in words: ``n/a offline: ...`` (the spec's ``paper_unavailable``), ``not
measured: ran <our headline>``, or ``not measured: lenient parsing``, then ``(see below)``; a note per column
below the table names both protocols and how to measure the paper's. Table 2 lists every metric of the run with
value, n and protocol, each benchmark's headline first. ``summary.json`` carries the same split
(``headlines``, ``paper_metrics``).
"""
from __future__ import annotations

import csv
import json
import textwrap
from dataclasses import asdict
from pathlib import Path

from genenv.benchmarks.registry import get_benchmark, paper_benchmarks
from genenv.benchmarks.spec import Metric
from genenv.envs.data import data_label, folders_read, write_jsonl
from genenv.eval.baselines import load_baselines
from genenv.runtime.evaluation import LENIENT_LABEL

__all__ = ["leaderboard_markdown", "write_results"]


def paper_result(spec, metrics: list[Metric], headline: Metric) -> Metric | str:
    """``spec``'s metric measured under its Table 1 column's protocol, or why there is none, in the words the
    table cell shows: the protocol cannot run offline (``paper_unavailable``); it was not evaluated (the run's
    ``headline`` is named instead); or it was read with lenient parsing (`LENIENT_LABEL` in the label),
    which the paper's harnesses do not do."""
    if spec.paper_unavailable:
        return f"n/a offline: {spec.paper_unavailable}"
    found = spec.paper_metric(metrics)
    if found is None:
        return f"not measured: ran {headline.key}"
    if LENIENT_LABEL in found.protocol:
        return "not measured: lenient parsing"
    return found


def paper_cells(result, data_dir: str | None = None) -> dict[str, dict[str, Metric | str]]:
    """Table 1 column → {benchmark of the run in that column → `paper_result`}, for the columns of the
    paper's Table 1 (in its order) that the run's benchmarks belong to; benchmarks outside Table 1 are left out."""
    columns = list(load_baselines(data_dir).columns)
    cells: dict[str, dict[str, Metric | str]] = {}
    for bench, head in result.headlines.items():
        spec = get_benchmark(bench, data_dir)
        if spec.baseline_column in columns:
            cells.setdefault(spec.baseline_column, {})[bench] = paper_result(spec, result.metrics, head)
    return {c: cells[c] for c in columns if c in cells}


def _cell(entries: dict[str, Metric | str]) -> str:
    """Our row's cell of one column: the measured number(s) in percent with n (several benchmarks measured:
    each named), else the reasons."""
    measured = {b: m for b, m in entries.items() if isinstance(m, Metric)}
    if len(measured) == 1:
        m = next(iter(measured.values()))
        return f"**{100 * m.value:.1f}** (n={m.n})"
    if measured:
        return " / ".join(f"**{100 * m.value:.1f}** (n={m.n}, {b})" for b, m in measured.items())
    return _reasons(entries) + " (see below)"


def _reasons(entries: dict[str, Metric | str]) -> str:
    """The distinct reasons among a column's entries, joined."""
    return "; ".join(dict.fromkeys(r for r in entries.values() if isinstance(r, str)))


def _outside(result, cells: dict[str, dict[str, Metric | str]]) -> list[str]:
    """The run's benchmarks in no Table 1 column of ``cells``."""
    return [b for b in result.headlines if not any(b in entries for entries in cells.values())]


def _how_to_measure(column: str, data_dir: str | None) -> str:
    """The command-line flags that measure ``column``'s paper protocol (from the specs' ``paper_options``)."""
    for name, opts in paper_benchmarks(data_dir).items():
        if get_benchmark(name, data_dir).baseline_column == column:
            flags = "".join(f" --option {name}.{k}={v}" for k, v in opts.items())
            return f"`--benchmarks {name}{flags}` (or `--benchmarks paper`) measures it"
    return "no benchmark of this project measures it"


def _column_note(column: str, entries: dict[str, Metric | str], result, data_dir: str | None) -> str:
    """The note below table 1 for one column: the paper's protocol, then for each benchmark of the run in it
    what was measured, under which protocol, and (not measured) how to measure the paper's."""
    specs = {b: get_benchmark(b, data_dir) for b in entries}
    parts = [f"- **{column}**: the paper's column = {next(iter(specs.values())).paper_protocol}."]
    for b, found in entries.items():
        head = result.headlines[b]
        if isinstance(found, Metric):
            parts.append(f"`{b}` measured it: {found.key} = {100 * found.value:.1f} % (n={found.n}; {found.protocol}).")
            continue
        ran = f"`{b}` ran {head.key} = {100 * head.value:.1f} % (n={head.n}; {head.protocol})"
        if specs[b].paper_unavailable:
            parts.append(f"{ran}: another protocol; the paper's protocol {specs[b].paper_unavailable}, which an "
                         f"offline run does not have.")
        elif specs[b].paper_metric(result.metrics) is not None:  # measured, but read leniently
            parts.append(f"{ran}: read with lenient parsing; `--parsing official` measures the paper's protocol.")
        elif any(isinstance(m, Metric) for m in entries.values()):
            parts.append(f"{ran}: another protocol.")
        else:
            parts.append(f"{ran}: another protocol; {_how_to_measure(column, data_dir)}.")
    return " ".join(parts)


def leaderboard_markdown(result, data_dir: str | None = None) -> str:
    """Table 1 beside the paper's rows and table 2 of every metric (see the module docstring), Markdown."""
    cells = paper_cells(result, data_dir)
    lines = ["### 1. Beside the paper's Table 1 (our number only where the paper's protocol was measured; %)", ""]
    if cells:
        base = load_baselines(data_dir)
        cols = list(cells)
        lines += ["| model | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
        for _, row in base.iterrows():
            lines.append(f"| {_paper_label(row['model'])} | " + " | ".join(f"{row[c]:.1f}" for c in cols) + " |")
        lines.append(f"| **{result.policy}** (this run) | " + " | ".join(_cell(cells[c]) for c in cols) + " |")
        lines.append("")
        lines += [_column_note(c, cells[c], result, data_dir) for c in cols]
    else:
        lines.append("No benchmark of this run is in the paper's Table 1.")
    outside = _outside(result, cells)
    if outside:
        lines.append(f"- not in the paper's Table 1: {', '.join(outside)} (table 2).")
    lines += ["", "### 2. This run's metrics, each under the protocol its label names (headlines first)", "",
              "| metric | value (%) | n | protocol |", "|---|---|---|---|"]
    heads = {m.key for m in result.headlines.values()}
    for b, m in result.headlines.items():
        lines.append(f"| **{m.key}** ({b} headline) | {100 * m.value:.1f} | {m.n} | {m.protocol} |")
    for m in result.metrics:
        if m.key not in heads:
            lines.append(f"| {m.key} | {100 * m.value:.1f} | {m.n} | {m.protocol} |")
    return "\n".join(lines)


def _paper_label(model: str) -> str:
    return model if "(paper)" in model else f"{model} (paper)"


def write_results(result, out: Path, data_dir: str | None = None, split: str = "test") -> None:
    """Write ``tasks.jsonl``, ``summary.json``, ``summary.csv``, ``summary.md`` and ``leaderboard.png`` to ``out``.

    ``summary.json``: ``policy``, ``split``, ``data_dir``, ``data_folders`` (data folder name → the folder actually
    read: ``<data_dir>/<name>`` or a packaged sample, `folders_read`), ``metrics``, ``headlines`` (benchmark → metric),
    ``paper_metrics`` (Table 1 column → {benchmark → the metric measured under the paper's protocol, or
    ``{"reason": ...}``}: `paper_cells`), ``timing``.
    """
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "tasks.jsonl", result.rows)  # the records in task order (a resumed log's order may differ)
    paper = {col: {b: asdict(m) if isinstance(m, Metric) else {"reason": m} for b, m in entries.items()}
             for col, entries in paper_cells(result, data_dir).items()}
    summary = {"policy": result.policy, "split": split, "data_dir": data_label(data_dir),
               "data_folders": folders_read(),
               "metrics": [asdict(m) for m in result.metrics],
               "headlines": {b: asdict(m) for b, m in result.headlines.items()}, "paper_metrics": paper,
               "timing": result.timing}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    with open(out / "summary.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["metric", "value", "n", "protocol"])
        for m in result.metrics:
            w.writerow([m.key, f"{m.value:.6f}", m.n, m.protocol])
    (out / "summary.md").write_text(leaderboard_markdown(result, data_dir) + "\n")
    plot_leaderboard(result, out / "leaderboard.png", data_dir)


def plot_leaderboard(result, path: Path, data_dir: str | None = None) -> None:
    """Horizontal bar chart, one panel per Table 1 column the run touched: the paper's rows in grey, our bar in
    red only where the paper's protocol was measured (else the reason written in the panel); then one panel per
    benchmark outside Table 1 with our headline alone."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = paper_cells(result, data_dir)
    outside = _outside(result, cells)
    if not cells and not outside:
        return
    base = load_baselines(data_dir)
    panels = len(cells) + len(outside)
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 0.35 * (len(base) + 2) + 1.2), squeeze=False)
    ours = f"{result.policy} (this run)"
    for ax, (col, entries) in zip(axes[0], cells.items()):
        measured = {b: m for b, m in entries.items() if isinstance(m, Metric)}
        names = [_paper_label(m) for m in base["model"]]
        values = list(base[col])
        if measured:
            names += [ours if len(measured) == 1 else f"{ours}, {b}" for b in measured]
            values += [100 * m.value for m in measured.values()]
        else:
            names.append(ours)
            values.append(0.0)
            ax.text(2, len(names) - 1, textwrap.fill(_reasons(entries) + " (see summary.md)", 60), va="center",
                    fontsize=7, color="#d62728")
        ax.barh(names, values, color=["#b0b0b0"] * len(base) + ["#d62728"] * (len(names) - len(base)))
        protocols = "; ".join(m.protocol for m in measured.values()) or "not measured"
        _finish(ax, f"{col}: grey = paper Table 1 ({get_benchmark(next(iter(entries)), data_dir).paper_protocol})"
                    f"\nred = this run ({protocols})")
    for ax, b in zip(axes[0][len(cells):], outside):
        head = result.headlines[b]
        ax.barh([ours], [100 * head.value], height=0.5, color="#d62728")
        ax.set_ylim(-3, 3)  # one bar as thick as the other panels' bars
        _finish(ax, f"{b}: not in the paper's Table 1\nred = this run, {head.key} ({head.protocol})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _finish(ax, title: str) -> None:
    """Axis settings shared by the panels: top-down rows, 0-100 %, a small wrapped title."""
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("score (%)")
    ax.set_title("\n".join(textwrap.fill(line, 95) for line in title.splitlines()), fontsize=7)
