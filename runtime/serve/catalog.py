"""The served tasks of ``genenv-serve``: `TaskCatalog` resolves a reset's benchmark, split, loader options and
task (by id, by seed, or inline: a task an outside environment policy wrote, validated by the benchmark's task
writer as the trainer validates generated tasks). Every refusal is a ``ValueError`` or ``KeyError`` whose message
the session answers; nothing a client sends names a path or reaches a loader option it may not set."""
from __future__ import annotations

import itertools
import json
import threading
from typing import Any

from genenv.benchmarks.registry import BENCHMARKS, get_benchmark
from genenv.benchmarks.task_writer import Rejection
from genenv.envs.registry import env_entry, load_plugins
from genenv.envs.task import Task
from genenv.runtime.serve.protocol import task_sha256

__all__ = ["TaskCatalog"]


class TaskCatalog:
    """The benchmarks' tasks as the server serves them, loaded once per (benchmark, split, loader options) from the
    server's data directory and shared by every session (thread-safe).

    Args:
        data_dir: the data directory (``None``: ``$GENENV_DATA_DIR``, else the packaged samples).
        benchmarks: the benchmark names served (``None``: every registered one).
    """

    def __init__(self, data_dir: str | None = None, benchmarks: list[str] | None = None):
        load_plugins()
        self.data_dir = data_dir
        self.benchmarks = sorted(benchmarks or BENCHMARKS)
        unknown = [b for b in self.benchmarks if b not in BENCHMARKS]
        if unknown:
            raise KeyError(f"unknown benchmark(s) {unknown}; registered: {sorted(BENCHMARKS)}")
        self._tasks: dict[tuple[str, str], tuple[list[Task], dict[str, int]]] = {}
        self._digests: dict[tuple[str, str, str], str] = {}
        self._lock = threading.Lock()
        self._inline = itertools.count()

    def check_benchmark(self, name: Any) -> str:
        """``name`` if it is served (``None``: the one benchmark of a server that serves one). Raises
        ``ValueError`` naming the served ones."""
        if name is None and len(self.benchmarks) == 1:
            return self.benchmarks[0]
        if name not in self.benchmarks:
            raise ValueError(f"unknown benchmark {name!r}; this server serves {', '.join(self.benchmarks)}")
        return name

    def loader_options(self, benchmark: str, split: Any, options: Any, every: bool = False) -> list[dict[str, Any]]:
        """The registered splits of ``benchmark`` whose loader options include ``split`` and ``options``, in
        registration order (with neither: the first, the benchmark's default evaluation split; with ``every``:
        all of them).

        Raises:
            ValueError: ``options`` not an object, or no registered split of the benchmark matches.
        """
        if options is not None and not isinstance(options, dict):
            raise ValueError(f"options must be an object of loader options, got {type(options).__name__}")
        wanted = dict(options or {})
        if split is not None:
            wanted["split"] = split
        registered = env_entry(benchmark).split_options
        matches = [dict(c) for c in registered if all(c.get(k) == v for k, v in wanted.items())]
        if not matches:
            raise ValueError(f"{benchmark} has no split matching {wanted}; its splits: {list(registered)}")
        return matches if wanted or every else matches[:1]

    def find(self, benchmark: str, loaders: list[dict[str, Any]], task_id: Any, sha256: str | None = None) -> Task:
        """The task ``task_id`` of the first of ``loaders`` that holds it (with ``sha256``: the first whose record
        has that digest, `task_sha256`).

        Raises:
            ValueError: no such task.
        """
        for loader in loaders:
            tasks, index = self.tasks(benchmark, loader)
            if task_id in index and (sha256 is None or self.digest(benchmark, loader, task_id) == sha256):
                return tasks[index[task_id]]
        digest = f" with task_sha256 {sha256[:12]}... (the server's data differ?)" if sha256 else ""
        raise ValueError(f"unknown task_id {task_id!r}{digest} in {benchmark} {loaders if len(loaders) < 4 else ''}")

    def tasks(self, benchmark: str, loader: dict[str, Any]) -> tuple[list[Task], dict[str, int]]:
        """The tasks of ``benchmark`` under ``loader`` options and their index by id (loaded on first use)."""
        key = (benchmark, json.dumps(loader, sort_keys=True))
        with self._lock:
            if key not in self._tasks:
                tasks = env_entry(benchmark).env_class.load_tasks(data_dir=self.data_dir, **loader)
                self._tasks[key] = (tasks, {t.id: i for i, t in enumerate(tasks)})
            return self._tasks[key]

    def digest(self, benchmark: str, loader: dict[str, Any], task_id: str) -> str:
        """`task_sha256` of a loaded task, computed once (otherwise a large task such as a BFCL multi-turn one
        would be hashed again on every reset that names a digest; figures: ``lab/notes/cpu-profiles.md``,
        "runtime/serve/catalog.py")."""
        key = (benchmark, json.dumps(loader, sort_keys=True), task_id)
        if key not in self._digests:
            tasks, index = self.tasks(benchmark, loader)
            self._digests[key] = task_sha256(tasks[index[task_id]].to_dict())
        return self._digests[key]

    def inline_task(self, benchmark: str, generation: Any, task_id: Any, parent: Task | None) -> Task:
        """An inline task: ``generation`` (the benchmark's generation JSON, an object or its text) parsed and
        validated by the benchmark's spec as the trainer validates generated tasks.

        Raises:
            ValueError: the generation is rejected (the message starts ``task rejected (<reason>)``).
        """
        text = generation if isinstance(generation, str) else json.dumps(generation, ensure_ascii=False)
        name = str(task_id) if task_id is not None else f"inline-{next(self._inline)}"
        out = get_benchmark(benchmark, self.data_dir).parse_generated(text, name, 0, parent)
        if isinstance(out, Rejection):
            raise ValueError(f"task rejected ({out.reason}): {out.detail}")
        return out
