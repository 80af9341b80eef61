"""Greedy evaluation of a policy on benchmarks' units, through the one episode loop: what ``genenv-eval`` prints
and what a training run's held-out evaluations record.

An evaluation can keep a `ResultLog` (``tasks.jsonl``): each task's record is appended as soon as its
chunk of episodes finishes, and a later evaluation with the same log plays only the tasks it lacks, rebuilding the
others' results from their records, so an interrupted evaluation resumes to the same metrics.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.spec import Metric
from genenv.envs.data import jsonl_line, write_jsonl
from genenv.envs.parsing import check_parsing
from genenv.runtime.episodes import RolloutSpec, Trajectory, play_episodes

__all__ = ["EvalResult", "LENIENT_LABEL", "ResultLog", "evaluate", "output_agreement", "row_trajectory"]


LENIENT_LABEL = "LENIENT parsing (ours, not the official reading of model text)"
"""Added to the protocol label of every metric of a benchmark evaluated with ``parsing="lenient"``."""


@dataclass
class EvalResult:
    """Outcome of `evaluate`: ``metrics`` (labelled), ``headlines`` (benchmark → metric beside the paper's
    column), ``rows`` (per-task records, as the log holds them), ``trajectories`` (the episodes, in the same
    order, with their turns; a task taken from a log has only what its record holds), ``timing`` per unit
    (``tasks``, ``seconds``, ``tasks_per_second``)."""

    policy: str
    metrics: list[Metric] = field(default_factory=list)
    headlines: dict[str, Metric] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list)
    timing: dict[str, dict[str, float]] = field(default_factory=dict)


def output_agreement(reference: EvalResult, other: EvalResult) -> dict[str, float]:
    """How often ``other``'s raw outputs equal ``reference``'s, over the tasks both have (matched by unit and task
    id; texts compared stripped).

    Returns:
        ``{"n": tasks compared, "exact": share (0-1) whose whole texts are equal, "first_word": share whose first
        whitespace-separated words are equal}``; both shares are 0.0 when no task matches.
    Raises:
        KeyError: a row of either result lacks ``unit``, ``task_id`` or ``raw_output``.
    """
    ref = {(r["unit"], r["task_id"]): r["raw_output"].strip() for r in reference.rows}
    pairs = [(ref[(r["unit"], r["task_id"])], r["raw_output"].strip()) for r in other.rows
             if (r["unit"], r["task_id"]) in ref]
    n = len(pairs)
    first = [(a.split()[:1], b.split()[:1]) for a, b in pairs]
    return {"n": n, "exact": sum(a == b for a, b in pairs) / n if n else 0.0,
            "first_word": sum(a == b for a, b in first) / n if n else 0.0}


class ResultLog:
    """Per-task records of an evaluation in a JSON-lines file, appended as tasks finish.

    One record per task and unit (`task_row`): ``unit``, ``index`` (the task's position in the unit's
    list), ``task_id``, the scores, the raw output, token usage and the env's final ``info``. A record cut off by
    a kill (a last line that is not JSON) is dropped when the log is opened, so appends stay well-formed.

    Args:
        path: the file (created with its folder on the first append).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.rows: list[dict[str, Any]] = []
        if self.path.is_file():  # read here, not with iter_jsonl: a torn record is expected, not a data error
            lines = self.path.read_text(encoding="utf-8").splitlines()
            for line in lines:
                try:
                    self.rows.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a torn last record: drop it and everything after it
            if len(self.rows) < len(lines):
                write_jsonl(self.path, self.rows)

    def finished(self, unit: str) -> dict[tuple[int, str], dict[str, Any]]:
        """The unit's records keyed by ``(index, task_id)``."""
        return {(r["index"], r["task_id"]): r for r in self.rows if r.get("unit") == unit and "index" in r}

    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append ``rows`` and flush them to disk."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.writelines(jsonl_line(row) for row in rows)
        self.rows += rows


def task_row(unit: str, index: int, t: Trajectory) -> dict[str, Any]:
    """The record of one evaluated episode: ``unit``, ``index``, ``task_id``, ``prompt``, ``raw_output``,
    ``parsed_action``, ``reward``, ``success``, ``error``, ``turns``, token usage summed over the turns
    (``prompt_tokens``, ``completion_tokens``), ``em`` / ``f1`` / ``error_type`` where the env reports them, and
    the env's final ``info`` (JSON; what `row_trajectory` rebuilds the metrics from)."""
    usage = {k: sum(turn.usage.get(k, 0) for turn in t.turns) for k in ("prompt_tokens", "completion_tokens")}
    return {"unit": unit, "index": index, "task_id": t.task.id, "prompt": t.task.prompt, "raw_output": t.text,
            "parsed_action": t.info.get("parsed_action"), "reward": t.reward, "success": t.success,
            "error": t.info.get("error", ""), "turns": len(t.turns), **usage,
            **{k: t.info[k] for k in ("em", "f1", "error_type") if k in t.info},
            "info": json.loads(json.dumps(t.info, default=str))}


def row_trajectory(task, row: dict[str, Any]) -> Trajectory:
    """A `Trajectory` of ``task`` rebuilt from its `task_row` record (no turns or messages: what
    the benchmarks' ``summarize`` reads is the task, ``reward``, ``success`` and ``info``)."""
    return Trajectory(task, 0, [], row.get("raw_output", ""), float(row["reward"]), bool(row["success"]),
                      dict(row.get("info") or {}))


def evaluate(policy, benchmarks: Sequence[str], split: str = "test", data_dir: str | None = None,
             limit: int | None = None, options: dict[str, dict[str, Any]] | None = None,
             spec: RolloutSpec = RolloutSpec(), progress: bool = True, parsing: str = "official",
             log: ResultLog | None = None, save_every: int = 64) -> EvalResult:
    """Greedy single-sample evaluation of ``policy`` on each benchmark's units (multi-step envs: one episode
    per task, played to the end).

    Args:
        policy: a `Policy`.
        benchmarks: registry names.
        split: ``"test"`` (official) or ``"heldout"`` (the co-evolution held-out split).
        data_dir: data directory of the tasks, the envs' backends and databases (default ``$GENENV_DATA_DIR``,
            else the packaged samples).
        limit: at most this many tasks per unit (first ones, file order).
        options: per-benchmark loader options, e.g. ``{"bfcl": {"category": "all"}}``.
        spec: how each episode is played (`RolloutSpec`): ``max_new_tokens``,
            ``max_response_tokens``, ``env_kwargs`` (per-benchmark env constructor options, e.g.
            ``{"twx": {"max_steps": 30}}``), ``env_workers`` (worker processes for the envs) and ``env_server`` (a
            ``genenv-serve`` URL: the same rewards as in this process); one greedy episode per task, so ``n`` must
            be 1 and ``temperature`` 0.
        parsing: how the envs read model text (`PARSING_MODES`); ``"official"``
            (default) is the official harness's reading. A benchmark read otherwise (this argument or its
            ``spec.env_kwargs``) gets every metric's protocol label marked `LENIENT_LABEL`.
        log: a `ResultLog`: tasks it already holds are not played again (their records give their
            results), the others' records are appended every ``save_every`` tasks.
        save_every: tasks per chunk of episodes (the most work a kill can lose when ``log`` is given).
    Returns:
        the `EvalResult`; ``rows`` in task order, ``timing`` over the tasks played now (``resumed``: how
        many came from the log).
    Raises:
        KeyError: an unknown benchmark. DataError: missing or malformed data. ValueError: unknown ``parsing``, or
        ``spec`` asks for more than one episode per task or a nonzero temperature.
    """
    if spec.n != 1 or spec.group_sizes is not None or spec.temperature != 0.0:
        raise ValueError(f"evaluation plays one greedy episode per task, not n={spec.n} (group sizes "
                         f"{spec.group_sizes}) at temperature {spec.temperature}")
    result = EvalResult(policy=getattr(policy, "name", type(policy).__name__))
    per_call = max(16, int(getattr(policy, "concurrency", 0) or 0), int(getattr(policy, "batch_size", 0) or 0))
    for bench in benchmarks:
        bench_spec = get_benchmark(bench, data_dir)
        kwargs = with_data_dir(spec.env_kwargs, [bench], data_dir)
        bench_parsing = check_parsing(kwargs[bench].setdefault("parsing", parsing))
        bench_metrics: list[Metric] = []
        for unit, opts in bench_spec.eval_units((options or {}).get(bench, {})):
            tasks = bench_spec.load(**{"split": split, **opts})[:limit]  # a unit may fix its split
            done = log.finished(unit) if log is not None else {}
            rows = {i: done[(i, t.id)] for i, t in enumerate(tasks) if (i, t.id) in done}
            played = {i: row_trajectory(tasks[i], r) for i, r in rows.items()}  # from the log: its record only
            todo = [i for i in range(len(tasks)) if i not in rows]
            bar = _bar(unit, len(tasks), len(rows)) if progress else None
            start = time.perf_counter()
            try:
                for k in range(0, len(todo), max(1, save_every)):
                    chunk = todo[k:k + max(1, save_every)]
                    trajs = play_episodes([tasks[i] for i in chunk], policy, replace(spec, env_kwargs=kwargs),
                                          progress=bar,
                                          chunk_size=per_call).trajectories
                    played.update(zip(chunk, trajs))
                    new = [task_row(unit, i, t) for i, t in zip(chunk, trajs)]
                    if log is not None:
                        log.append(new)
                    rows.update(zip(chunk, new))
            finally:
                if bar is not None:
                    bar.close()
            seconds = time.perf_counter() - start
            result.timing[unit] = {"tasks": len(todo), "resumed": len(tasks) - len(todo), "seconds": seconds,
                                   "tasks_per_second": len(todo) / seconds if seconds > 0 else float("inf")}
            episodes = [played[i] for i in range(len(tasks))]
            bench_metrics += bench_spec.summarize(unit, episodes)
            result.rows += [rows[i] for i in range(len(tasks))]
            result.trajectories += episodes
        if bench_parsing != "official":
            bench_metrics = [replace(m, protocol=f"{m.protocol}; {LENIENT_LABEL}") for m in bench_metrics]
        result.metrics += bench_metrics
        head = bench_spec.headline(bench_metrics)
        if head:
            result.headlines[bench] = head
    return result


def _bar(unit: str, total: int, done: int):
    """A tqdm bar over a unit's tasks (rate in tasks/s), started at the ``done`` tasks taken from a log."""
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc=unit, unit="task")


def with_data_dir(env_kwargs: dict[str, dict[str, Any]] | None, benchmarks: Sequence[str],
                  data_dir: str | None) -> dict[str, dict[str, Any]]:
    """Per-benchmark env options with ``data_dir`` set for each of ``benchmarks`` (an explicit ``data_dir`` in
    the options wins), so that every env reads its backends and databases from the tasks' data directory."""
    out = {b: dict(v) for b, v in (env_kwargs or {}).items()}
    for bench in benchmarks:
        out.setdefault(bench, {}).setdefault("data_dir", None if data_dir is None else str(data_dir))
    return out
