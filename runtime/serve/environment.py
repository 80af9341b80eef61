"""The session side of ``genenv-serve`` (OpenEnv's ``Environment``): `BenchmarkSession`, one per WebSocket
connection (reset, step, state, close), and its MCP adapter (`SessionTools`: the task's tools listed, a call
is one step). A session's episode is exactly the in-process one: the env is made by
`make_text_env` over the task, as `LocalEpisodes` makes it,
so a step over the wire returns the reward, observation and info of the same step in-process.

Sessions of a benchmark whose env class is not ``thread_safe`` (ALFWorld: TextWorld's game loading and PDDL state
are shared by the games of one process) run in the server's worker processes (`SessionWorkers`, over
`ProcessEpisodes`), so they step in parallel instead of taking turns under one lock."""
from __future__ import annotations

import contextlib
import inspect
import itertools
import logging
import threading
import uuid
from typing import Any

from gymnasium.utils import seeding
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from genenv.envs.parsing import PARSING_MODES, ToolCall
from genenv.envs.registry import env_entry
from genenv.envs.task import Task
from genenv.envs.workers import ProcessEpisodes, WorkerDied
from genenv.envs.wrappers import make_text_env
from genenv.runtime.serve.catalog import TaskCatalog
from genenv.runtime.threads import usable_cores
from genenv.runtime.serve.protocol import (RESET_KEYS, SessionAction, SessionObservation, SessionState,
                                           check_reset_types, json_safe, openai_tools, task_sha256)

__all__ = ["BenchmarkSession", "SessionWorkers"]

log = logging.getLogger(__name__)
_CLASS_LOCKS: dict[type, threading.Lock] = {}
_FORBIDDEN_ENV_OPTIONS = {"tasks", "data_dir", "split", "limit", "render_mode", "parsing"}  # never set by a client


def env_lock(env: Any) -> Any:
    """A lock shared by every session of ``env``'s class when the class is not ``thread_safe`` (ALFWorld), else
    a no-op context."""
    cls = type(env.unwrapped)
    if getattr(cls, "thread_safe", True):
        return contextlib.nullcontext()
    return _CLASS_LOCKS.setdefault(cls, threading.Lock())


class SessionWorkers:
    """The server's worker processes for sessions of envs that are not ``thread_safe``: one
    `ProcessEpisodes` of ``workers`` processes, started on first use (a server that
    never serves such a benchmark starts none) and shared by every session. A session's episode lives on the
    least-loaded worker; episodes on different workers step in parallel.

    Args:
        workers: worker processes (default `usable_cores`); ``0`` runs such
            sessions in the server process under one lock per env class (one step at a time).
    """

    def __init__(self, workers: int | None = None):
        self.workers = usable_cores() if workers is None else max(0, int(workers))
        self._pool: ProcessEpisodes | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count()

    def pool(self) -> ProcessEpisodes:
        """The shared `ProcessEpisodes` (started on the first call)."""
        with self._lock:
            if self._pool is None:
                self._pool = ProcessEpisodes(self.workers, recycle_after=200)
            return self._pool

    def env(self, task: Task, env_kwargs: dict[str, Any]) -> "WorkerEnv":
        """A `WorkerEnv` for one episode of ``task`` (nothing runs until its ``reset``)."""
        return WorkerEnv(self.pool(), next(self._ids), task, env_kwargs)

    def shutdown(self) -> None:
        """Stop the worker processes (if any were started)."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None


class WorkerEnv:
    """One session's episode on a worker process, with the env's ``reset`` / ``step`` / ``close`` (a text env as
    `make_text_env` builds it, built and run in the worker).

    Raises (from ``reset``):
        ValueError: the env could not be built or reset (e.g. an env option it does not take); the message is the
            worker's error line.
        ~genenv.envs.workers.WorkerDied: the worker process died (from ``reset`` and ``step``); the session's
            episode is lost, the worker is replaced.
    """

    thread_safe = True  # each call goes through the pool, which serialises calls per worker

    def __init__(self, pool: ProcessEpisodes, eid: int, task: Task, env_kwargs: dict[str, Any]):
        self._pool, self._eid, self._task, self._kwargs = pool, eid, task, env_kwargs
        self.unwrapped = self

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        """Build the env on a worker and reset it on the task (``options`` is the task id, as in-process)."""
        try:
            return self._pool.open([(self._eid, self._task, self._kwargs, seed)])[0]
        except WorkerDied:
            raise
        except RuntimeError as exc:  # the worker's error: the request's fault (e.g. an env option it does not take)
            raise ValueError(f"{self._task.benchmark}: {worker_error_line(str(exc))}") from None

    def step(self, action: Any):
        """One step on the worker: ``(observation, reward, terminated, truncated, info)``."""
        return self._pool.step([(self._eid, action)])[0]

    def close(self) -> None:
        """Close the episode on its worker (a lost one is ignored)."""
        self._pool.close(self._eid)


def worker_error_line(message: str) -> str:
    """The last line of a worker's traceback (``"TypeError: ... unexpected keyword argument 'x'"``)."""
    lines = [line for line in message.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else message


class McpTool:
    """One of a session task's tools as OpenEnv's MCP handler reads a tool (``name``, ``description``,
    ``parameters``, ``fn``); calling it is one step of its session with that call."""

    def __init__(self, session: "BenchmarkSession", schema: dict[str, Any]):
        self.name = str(schema.get("name", ""))
        self.description = str(schema.get("description", ""))
        self.parameters = schema.get("parameters") or {"type": "object", "properties": {}}
        self._session = session

    def fn(self, **arguments: Any) -> dict[str, Any]:
        """Step its session with this call; an MCP ``tools/call`` result (``content``, ``structuredContent`` with
        ``reward``, ``done`` and ``info``, ``isError`` when the step reported an error)."""
        obs = self._session.step(SessionAction(tool_calls=[{"name": self.name, "arguments": arguments}]))
        error = obs.info.get("error", "")
        return {"content": [{"type": "text", "text": obs.prompt or error or ("done" if obs.done else "")}],
                "structuredContent": {"reward": obs.reward, "done": obs.done, "info": obs.info},
                "isError": bool(error)}


class SessionTools:
    """The ``mcp_server`` OpenEnv's MCP handler asks for tools: its session task's tools (none before reset)."""

    def __init__(self, session: "BenchmarkSession"):
        self._session = session

    async def get_tools(self) -> dict[str, McpTool]:
        """``{name: tool}`` of the current task."""
        task = self._session.task
        tools = task.tools if task is not None else []
        return {t["name"]: McpTool(self._session, t) for t in tools if isinstance(t, dict) and t.get("name")}


class BenchmarkSession(Environment):
    """One client's session: the episode of one task at a time, of any served benchmark (see the module
    docstring and `genenv.runtime.serve.protocol` for the arguments).

    Errors (each answered to the client as OpenEnv's error message, their session unchanged): ``ValueError`` for an
    unknown reset key, benchmark, split, task id, reading or env option, a reset argument of the wrong type (the
    message names it), a rejected inline task or a task whose digest differs from ``task_sha256``;
    ``RuntimeError`` for a step before reset or after the episode ended;
    `WorkerDied` when the worker process of its episode died (the session then waits
    for a reset).

    Args:
        catalog: the served tasks. workers: the server's `SessionWorkers` (``None``: every env in this
            process).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, catalog: TaskCatalog, workers: SessionWorkers | None = None):
        super().__init__()
        self.catalog = catalog
        self.workers = workers
        self.env = None
        self.task: Task | None = None
        self.mcp_server = SessionTools(self)
        self._state = SessionState()
        self._rng, _ = seeding.np_random(None)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> SessionObservation:
        """Start an episode (arguments: `RESET_KEYS`)."""
        unknown = sorted(set(kwargs) - set(RESET_KEYS))
        if unknown:
            raise ValueError(f"unknown reset argument(s) {unknown}; reset takes {', '.join(RESET_KEYS)}")
        check_reset_types({**kwargs, "seed": seed, "episode_id": episode_id})
        if seed is not None and seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        benchmark = self.catalog.check_benchmark(kwargs.get("benchmark"))
        reading = kwargs.get("reading", "official")
        if reading not in PARSING_MODES:
            raise ValueError(f"reading must be one of {list(PARSING_MODES)}, got {reading!r}")
        env_options = kwargs.get("env_options") or {}
        if not isinstance(env_options, dict) or _FORBIDDEN_ENV_OPTIONS & set(env_options):
            raise ValueError(f"env_options must be an object without {sorted(_FORBIDDEN_ENV_OPTIONS)}")
        task = self._pick_task(benchmark, kwargs, seed)
        env_kwargs = {"data_dir": self.catalog.data_dir, "parsing": reading, **env_options}
        try:
            if self.workers is not None and self.workers.workers > 0 and not getattr(
                    env_entry(benchmark).env_class, "thread_safe", True):
                env = self.workers.env(task, env_kwargs)
            else:
                env = make_text_env([task], env_kwargs)
        except TypeError as exc:  # an env option the benchmark's env does not take
            raise ValueError(f"{benchmark}: {exc}") from exc
        try:
            with env_lock(env):
                obs, info = env.reset(seed=seed, options={"task_id": task.id})
        except Exception:
            with env_lock(env):
                env.close()
            raise
        self.close()
        self.env, self.task = env, task
        self._state = SessionState(episode_id=episode_id or str(uuid.uuid4()), benchmark=benchmark,
                                   task_id=task.id, reading=reading)
        return self._observation(obs, info, reward=None, done=False)

    def _pick_task(self, benchmark: str, kwargs: dict[str, Any], seed: int | None) -> Task:
        """The task of a reset: inline, by id, or drawn (with ``seed``: as the benchmark's env draws it)."""
        loaders = self.catalog.loader_options(benchmark, kwargs.get("split"), kwargs.get("options"))
        sha = kwargs.get("task_sha256")
        if kwargs.get("task") is not None:
            parent_id = kwargs.get("parent_task_id")
            everywhere = self.catalog.loader_options(benchmark, kwargs.get("split"), kwargs.get("options"), every=True)
            parent = self.catalog.find(benchmark, everywhere, parent_id) if parent_id is not None else None
            task = self.catalog.inline_task(benchmark, kwargs["task"], kwargs.get("task_id"), parent)
        elif kwargs.get("task_id") is not None:
            return self.catalog.find(benchmark, loaders, kwargs["task_id"], sha)
        else:
            tasks, _ = self.catalog.tasks(benchmark, loaders[0])
            rng = seeding.np_random(seed)[0] if seed is not None else self._rng
            task = tasks[int(rng.integers(len(tasks)))]
        if sha is not None and task_sha256(task.to_dict()) != sha:
            raise ValueError(f"task {task.id!r} differs from the client's (task_sha256 mismatch)")
        return task

    def step(self, action: SessionAction, timeout_s: float | None = None, **kwargs: Any) -> SessionObservation:
        """One step with model text or structured calls; the reward and ``info`` are the env's."""
        if self.env is None:
            raise RuntimeError("no episode: send reset before step")
        if self._state.done:
            raise RuntimeError("the episode is over: send reset to start another")
        if action.tool_calls is not None:
            act: Any = [ToolCall(c.name, dict(c.arguments)) for c in action.tool_calls]
        else:
            act = action.text
        try:
            with env_lock(self.env):
                obs, reward, terminated, truncated, info = self.env.step(act)
        except WorkerDied:  # the episode is gone with its worker: the session waits for a reset
            self.close()
            raise
        done = bool(terminated or truncated)
        self._state.step_count += 1
        self._state.done = done
        self._state.total_reward += float(reward)
        return self._observation(obs, info, reward=float(reward), done=done, truncated=bool(truncated))

    def _observation(self, obs: str, info: dict[str, Any], reward: float | None, done: bool,
                     truncated: bool = False) -> SessionObservation:
        messages = info.pop("messages", [])
        info.pop("tools", None)  # the task's tools, sent below as OpenAI function schemas
        return SessionObservation(
            benchmark=self._state.benchmark, task_id=self.task.id, prompt=obs, messages=messages,
            tools=openai_tools(self.task.tools), done=done, reward=reward,
            info=json_safe({**info, "truncated": truncated} if reward is not None else info))

    @property
    def state(self) -> SessionState:
        """Its `SessionState`."""
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        """Name, description and the served benchmarks."""
        return EnvironmentMetadata(
            name="genenv", version="0.1.0",
            description="GenEnv suite benchmarks (" + ", ".join(self.catalog.benchmarks) + ") scored as their "
                        "official harnesses score them; reset arguments: " + ", ".join(RESET_KEYS))

    def close(self) -> None:
        """Close the episode's env."""
        if self.env is not None:
            with env_lock(self.env):
                self.env.close()
            self.env = None


# OpenEnv's endpoint calls inspect.signature(session.reset) on every reset message (to filter its arguments); the
# function's signature, computed once here, spares it from deriving one each time (a visible share of a Bamboogle
# server's CPU under load, py-spy; figures: lab/notes/cpu-profiles.md, "runtime/serve/environment.py").
BenchmarkSession.reset.__signature__ = inspect.signature(BenchmarkSession.reset)
