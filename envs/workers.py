"""Playing many episodes at once: in this process, or spread over worker processes.

The lock-step episode loop (`genenv.runtime.episodes.play_episodes`) opens one episode per (task,
rollout) and, every round, steps all unfinished episodes with the texts the policy generated. `LocalEpisodes`
does that in this process (one env instance per episode). `ProcessEpisodes` does it in ``workers`` worker
processes (``multiprocessing`` with the ``spawn`` start method, like ``gymnasium.vector.AsyncVectorEnv``): the
episodes are spread over the workers, and one round sends each worker its share of the actions at once, so the
workers step in parallel. Engines whose step is CPU-heavy Python (ALFWorld: TextWorld's PDDL translation on
reset, and slow steps; figures: ``lab/notes/cpu-measurements.md``, "envs/workers.py") gain up to ``workers``-fold;
``workers`` is the CPU budget and is never exceeded (capped at ``os.cpu_count()``). A worker that played
``recycle_after`` episodes is replaced once its episodes are closed (ALFWorld's engine leaks memory across many
games in one process).

Episodes are text-level: each env is opened with `make_text_env` (model text in,
the next turn's prompt in ``info["messages"]``); ``open`` returns ``(observation, info)`` of ``env.reset`` and
``step`` takes model text (or, from the session server, a list of structured tool calls).

`ProcessEpisodes` may be called from many threads at once (the session server's sessions): calls that touch
different workers run in parallel, calls to one worker take turns in the order they came (`FairLock`). A
worker that dies fails the call in flight and every episode it held with `WorkerDied`, and is replaced by a
fresh one.
"""
from __future__ import annotations

import collections
import contextlib
import multiprocessing as mp
import os
import threading
import traceback
from typing import Any, Protocol, Sequence, runtime_checkable

from genenv.envs.task import Task

__all__ = ["EpisodeRunner", "LocalEpisodes", "ProcessEpisodes", "WorkerDied"]

StepResult = tuple[str, float, bool, bool, dict[str, Any]]


@runtime_checkable
class EpisodeRunner(Protocol):
    """What plays the episode loop's envs: `LocalEpisodes` (this process), `ProcessEpisodes` (worker
    processes) and `RemoteEpisodes` (a ``genenv-serve`` server). The one place
    a runner is chosen is `genenv.runtime.episodes.episode_runner`. Episode ids are the caller's ints, unique
    among its open episodes."""

    def open(self, items: Sequence[tuple[int, Task, dict[str, Any] | None]]) -> list[tuple[str, dict[str, Any]]]:
        """Open one env per ``(episode id, task, env constructor options or None)`` and reset it on its task
        (an optional fourth element is the reset's ``seed``); returns each reset's ``(observation, info)`` in order
        (``info["messages"]``: the first prompt)."""

    def step(self, items: Sequence[tuple[int, str]]) -> list[StepResult]:
        """One step per ``(episode id, model text)``; returns ``(observation, reward, terminated, truncated, info)``
        each, in order. Model text that is not a valid action scores 0 with its reason in ``info``."""

    def close(self, eid: int) -> None:
        """Close one episode's env (a finished episode; unknown ids are ignored)."""

    def shutdown(self) -> None:
        """Close every env and release what the runner holds (processes, connections)."""


def _make(task: Task, env_kwargs: dict[str, Any] | None):
    from genenv.envs.wrappers import make_text_env

    return make_text_env([task], env_kwargs)


class LocalEpisodes:
    """Episodes in this process: one env instance each (see module docstring)."""

    def __init__(self):
        self.envs: dict[int, Any] = {}

    def open(self, items: Sequence[tuple[int, Task, dict[str, Any] | None]]) -> list[tuple[str, dict[str, Any]]]:
        """Create and reset one env per ``(episode id, task, env kwargs)``; returns each ``reset`` output."""
        out = []
        for eid, task, kwargs, *seed in items:
            env = self.envs[eid] = _make(task, kwargs)
            try:
                out.append(env.reset(seed=seed[0] if seed else None, options={"task_id": task.id}))
            except Exception:
                self.close(eid)
                raise
        return out

    def step(self, items: Sequence[tuple[int, str]]) -> list[StepResult]:
        """One ``step(text)`` per ``(episode id, text)``."""
        return [self.envs[eid].step(text) for eid, text in items]

    def close(self, eid: int) -> None:
        """Close and forget one episode's env."""
        env = self.envs.pop(eid, None)
        if env is not None:
            env.close()

    def shutdown(self) -> None:
        """Close every env."""
        for eid in list(self.envs):
            self.close(eid)


def _worker(conn) -> None:
    """Worker loop: ``("open", [(eid, task_json, kwargs)])``, ``("step", [(eid, text)])``, ``("close", eid)``,
    ``("quit",)``; answers ``("ok", result)`` or ``("error", traceback text)``."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    local = LocalEpisodes()
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            break
        kind = msg[0]
        try:
            if kind == "quit":
                local.shutdown()
                conn.send(("ok", None))
                break
            if kind == "open":
                result = local.open([(eid, Task.from_json(tj), *rest) for eid, tj, *rest in msg[1]])
            elif kind == "step":
                result = local.step(msg[1])
            elif kind == "close":
                result = local.close(msg[1])
            else:
                raise ValueError(f"unknown worker command {kind!r}")
            conn.send(("ok", result))
        except Exception:  # noqa: BLE001 - the parent re-raises with the worker's traceback
            conn.send(("error", traceback.format_exc()))


class FairLock:
    """A lock granted in request order (first come, first served), as a context manager. ``threading.Lock`` lets a
    thread that just released it take it again before threads that have been waiting, so under many concurrent
    sessions a few wait far longer than the rest; the standard library has no FIFO lock."""

    def __init__(self):
        self._guard = threading.Lock()
        self._waiting: collections.deque[threading.Event] = collections.deque()
        self._held = False

    def __enter__(self) -> "FairLock":
        with self._guard:
            if not self._held:
                self._held = True
                return self
            turn = threading.Event()
            self._waiting.append(turn)
        turn.wait()  # the releasing thread hands the lock over, still held
        return self

    def __exit__(self, *exc: Any) -> None:
        with self._guard:
            if self._waiting:
                self._waiting.popleft().set()
            else:
                self._held = False


class WorkerDied(RuntimeError):
    """An env worker process ended (killed, out of memory, a crash in native code): the call in flight and every
    episode that worker held are lost; the worker is replaced, other workers' episodes go on."""


class ProcessEpisodes:
    """Episodes spread over worker processes (see module docstring).

    Args:
        workers: the CPU budget: worker processes at most (capped at ``os.cpu_count()``; at least 1).
        recycle_after: replace a worker once it has played this many episodes and has none open (``None``: never).
    Raises (from its methods):
        RuntimeError: a worker failed; the message carries the worker's traceback.
        WorkerDied: a worker process ended; also raised for a later call on one of its lost episodes.
        KeyError: an episode id that is not open.
    """

    def __init__(self, workers: int, recycle_after: int | None = 200):
        self.size = max(1, min(int(workers), os.cpu_count() or 1))
        self.recycle_after = recycle_after
        self._ctx = mp.get_context("spawn")
        self._books = threading.Lock()  # guards the bookkeeping below (never held while waiting on a worker)
        self._workers: list[dict[str, Any]] = [self._spawn() for _ in range(self.size)]
        self._where: dict[int, int] = {}  # episode id → worker index
        self._lost: dict[int, str] = {}  # episode id → why (its worker died)

    def _spawn(self) -> dict[str, Any]:
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_worker, args=(child,), daemon=True)
        proc.start()
        child.close()
        return {"proc": proc, "conn": parent, "open": 0, "played": 0, "lock": FairLock()}

    def _call_many(self, batches: dict[int, tuple]) -> dict[int, Any]:
        """Send one message per worker, then collect the answers (the workers run concurrently). Each worker's
        lock is held from its send to its answer (taken in worker order, so concurrent callers cannot deadlock).

        Raises:
            RuntimeError: a worker answered with an error (its traceback in the message).
            WorkerDied: a worker's process ended before it answered (it is replaced).
        """
        workers = {w: self._workers[w] for w in sorted(batches)}
        with contextlib.ExitStack() as held:
            for worker in workers.values():
                held.enter_context(worker["lock"])
            out, errors, died = {}, [], []
            sent = {}
            for w, worker in workers.items():
                try:
                    worker["conn"].send(batches[w])
                    sent[w] = worker
                except OSError:
                    died.append(w)
            for w, worker in sent.items():
                try:
                    status, result = worker["conn"].recv()
                except (EOFError, OSError):
                    died.append(w)
                    continue
                if status == "error":
                    errors.append(result)
                out[w] = result
            reasons = [self._replace_dead(w, workers[w]) for w in died]
        if reasons:
            raise WorkerDied(reasons[0])
        if errors:
            raise RuntimeError("an env worker failed:\n" + errors[0])
        return out

    def _replace_dead(self, w: int, worker: dict[str, Any]) -> str:
        """Mark a dead worker's episodes lost and put a fresh worker in its place (its lock is held); returns why
        they were lost, the message of `WorkerDied`."""
        worker["proc"].join(timeout=5)
        reason = (f"env worker process {worker['proc'].pid} died (exit code {worker['proc'].exitcode}); "
                  "its episodes are lost: reset to start another")
        with self._books:
            for eid in [e for e, where in self._where.items() if where == w]:
                del self._where[eid]
                self._lost[eid] = reason
            fresh = self._spawn()
            fresh["lock"] = worker["lock"]  # callers waiting on the old lock get the new worker
            self._workers[w] = fresh
        return reason

    def _worker_of(self, eid: int) -> int:
        with self._books:
            if eid in self._lost:
                raise WorkerDied(self._lost.pop(eid))
            return self._where[eid]

    def processes(self) -> list[Any]:
        """The live worker processes (never more than `size`)."""
        return [w["proc"] for w in self._workers if w["proc"].is_alive()]

    def open(self, items: Sequence[tuple[int, Task, dict[str, Any] | None]]) -> list[tuple[str, dict[str, Any]]]:
        """Open episodes on the least-loaded workers; returns each ``reset`` output in input order."""
        batches: dict[int, list] = {}
        order = []
        with self._books:
            for eid, task, kwargs, *seed in items:
                w = min(range(self.size), key=lambda i: (self._workers[i]["open"], i))
                self._workers[w]["open"] += 1
                self._workers[w]["played"] += 1
                self._where[eid] = w
                self._lost.pop(eid, None)
                batches.setdefault(w, []).append((eid, task.to_json(), kwargs, *seed))
                order.append((w, len(batches[w]) - 1))
        try:
            results = self._call_many({w: ("open", b) for w, b in batches.items()})
        except WorkerDied:
            raise
        except Exception:  # the envs that did open on other workers are closed again: none is left half-open
            for eid, *_ in items:
                with contextlib.suppress(Exception):
                    self.close(eid)
            raise
        return [results[w][i] for w, i in order]

    def step(self, items: Sequence[tuple[int, str]]) -> list[StepResult]:
        """Step each ``(episode id, text)``; every worker steps its share in parallel. Results in input order."""
        batches: dict[int, list] = {}
        order = []
        for eid, text in items:
            w = self._worker_of(eid)
            batches.setdefault(w, []).append((eid, text))
            order.append((w, len(batches[w]) - 1))
        results = self._call_many({w: ("step", b) for w, b in batches.items()})
        return [results[w][i] for w, i in order]

    def close(self, eid: int) -> None:
        """Close one episode (an unknown or lost one is ignored); a worker past ``recycle_after`` episodes with none
        open is replaced."""
        with self._books:
            self._lost.pop(eid, None)
            w = self._where.pop(eid, None)
            if w is None:
                return
            worker = self._workers[w]
            worker["open"] -= 1
        with contextlib.suppress(WorkerDied):
            self._call_many({w: ("close", eid)})
        with worker["lock"], self._books:
            if (self.recycle_after and worker is self._workers[w] and worker["open"] == 0
                    and worker["played"] >= self.recycle_after):
                self._stop(worker)
                fresh = self._spawn()
                fresh["lock"] = worker["lock"]
                self._workers[w] = fresh

    def _stop(self, worker: dict[str, Any]) -> None:
        with contextlib.suppress(EOFError, OSError):  # a worker that already died has closed its pipe: join it
            worker["conn"].send(("quit",))
            worker["conn"].recv()
        worker["proc"].join(timeout=10)
        if worker["proc"].is_alive():
            worker["proc"].terminate()

    def shutdown(self) -> None:
        """Stop every worker."""
        for worker in self._workers:
            self._stop(worker)
        self._workers = []
