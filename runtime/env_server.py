"""``genenv-serve``: every registered benchmark behind one OpenEnv session server.

Built on ``openenv-core``'s own server (``openenv.core.env_server.http_server.create_app``): WebSocket sessions at
``/ws`` (one :class:`BenchmarkSession` per connection: reset, step, state, close; a connection over
``max_sessions`` gets OpenEnv's ``CAPACITY_REACHED`` error), ``/health``, ``/schema``, ``/metadata``, OpenEnv's
stateless HTTP ``/reset`` and ``/step``, and MCP JSON-RPC (``tools/list``, ``tools/call``) over ``/mcp`` and as
``{"type": "mcp"}`` messages on a session, where its task's tools are listed and a call is one step.
The wire types and the reset arguments are in :mod:`genenv.runtime.env_protocol`.

A session's episode is exactly the in-process one: the env is made by
:func:`~genenv.envs.wrappers.make_text_env` over the task, as :class:`~genenv.envs.workers.LocalEpisodes` makes
it for evaluation and training, and reset with ``options={"task_id": ...}``; so a step over the wire returns the
reward, observation and info of the same step in-process. Inline tasks are validated by the benchmark's spec
(:meth:`~genenv.benchmarks.spec.BenchmarkSpec.parse_generated`, as :func:`genenv.trainer.generation.write_tasks`
validates generated tasks); a rejected one is answered with its rejection reason and leaves its session as it was.

Around OpenEnv's app, :class:`WireGuard` (ASGI middleware) answers, without passing them on and with their session
kept: a message over :data:`~genenv.runtime.env_protocol.MAX_MESSAGE_BYTES`, text that is not a JSON object, and
JSON that Python refuses to read (e.g. an integer over 4,300 digits); with a bearer token set it refuses every
request and connection without ``Authorization: Bearer <token>`` (HTTP 401; a WebSocket is closed before it opens).
The server binds 127.0.0.1 unless ``--host`` names another interface, which needs ``GENENV_SERVE_TOKEN``.
"""
from __future__ import annotations

import argparse
import contextlib
import hmac
import itertools
import json
import logging
import os
import re
import threading
import uuid
from typing import Any

from gymnasium.utils import seeding
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from genenv.benchmarks.registry import BENCHMARKS, get_benchmark
from genenv.benchmarks.spec import Rejection
from genenv.envs.parsing import PARSING_MODES, ToolCall
from genenv.envs.registry import env_entry, load_plugins
from genenv.envs.task import Task
from genenv.envs.wrappers import make_text_env
from genenv.runtime.env_protocol import (MAX_MESSAGE_BYTES, MAX_NESTING, RESET_KEYS, SessionAction, SessionObservation,
                                         SessionState, json_safe, openai_tools, task_sha256)

log = logging.getLogger(__name__)
TOKEN_ENV = "GENENV_SERVE_TOKEN"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_FORBIDDEN_ENV_OPTIONS = {"tasks", "data_dir", "split", "limit", "render_mode", "parsing"}
_CLASS_LOCKS: dict[type, threading.Lock] = {}
_JSON_MARKS = re.compile(r'\\.|[\[\]{}"]', re.S)


def env_lock(env: Any) -> Any:
    """A lock shared by every session of ``env``'s class when the class is not ``thread_safe`` (ALFWorld), else
    a no-op context."""
    cls = type(env.unwrapped)
    if getattr(cls, "thread_safe", True):
        return contextlib.nullcontext()
    return _CLASS_LOCKS.setdefault(cls, threading.Lock())


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
        has that digest, :func:`~genenv.runtime.env_protocol.task_sha256`).

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
        """:func:`~genenv.runtime.env_protocol.task_sha256` of a loaded task, computed once (1.2 ms for a BFCL
        multi-turn task, measured, on every reset that names a digest otherwise)."""
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
    docstring and :mod:`genenv.runtime.env_protocol` for the arguments).

    Errors (each answered to the client as OpenEnv's error message, their session unchanged): ``ValueError`` for an
    unknown reset key, benchmark, split, task id, reading or env option, a rejected inline task or a task whose
    digest differs from ``task_sha256``; ``RuntimeError`` for a step before reset or after the episode ended.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, catalog: TaskCatalog):
        super().__init__()
        self.catalog = catalog
        self.env = None
        self.task: Task | None = None
        self.mcp_server = SessionTools(self)
        self._state = SessionState()
        self._rng, _ = seeding.np_random(None)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> SessionObservation:
        """Start an episode (arguments: :data:`~genenv.runtime.env_protocol.RESET_KEYS`)."""
        unknown = sorted(set(kwargs) - set(RESET_KEYS))
        if unknown:
            raise ValueError(f"unknown reset argument(s) {unknown}; reset takes {', '.join(RESET_KEYS)}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        benchmark = self.catalog.check_benchmark(kwargs.get("benchmark"))
        reading = kwargs.get("reading", "official")
        if reading not in PARSING_MODES:
            raise ValueError(f"reading must be one of {list(PARSING_MODES)}, got {reading!r}")
        env_options = kwargs.get("env_options") or {}
        if not isinstance(env_options, dict) or _FORBIDDEN_ENV_OPTIONS & set(env_options):
            raise ValueError(f"env_options must be an object without {sorted(_FORBIDDEN_ENV_OPTIONS)}")
        task = self._pick_task(benchmark, kwargs, seed)
        try:
            env = make_text_env([task], {"data_dir": self.catalog.data_dir, "parsing": reading, **env_options})
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
        with env_lock(self.env):
            obs, reward, terminated, truncated, info = self.env.step(act)
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
        """Its :class:`~genenv.runtime.env_protocol.SessionState`."""
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


class WireGuard:
    """ASGI middleware in front of OpenEnv's app (see the module docstring): message checks on WebSocket
    sessions, and the bearer token on every request when ``token`` is set.

    Args:
        app: the ASGI app. token: the bearer token (``None``: no check). max_bytes: the largest client message.
    """

    def __init__(self, app: Any, token: str | None = None, max_bytes: int = MAX_MESSAGE_BYTES):
        self.app, self.token, self.max_bytes = app, token, max_bytes

    def _authorized(self, scope: dict[str, Any]) -> bool:
        if not self.token:
            return True
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"").decode("latin-1")
        return hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode())

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope.get("type")
        if kind in ("http", "websocket") and not self._authorized(scope):
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": "bearer token required"})
            else:
                body = b'{"detail": "bearer token required (Authorization: Bearer <token>)"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": body})
            return
        if kind != "websocket":
            return await self.app(scope, receive, send)

        async def checked_receive() -> dict[str, Any]:
            while True:
                message = await receive()
                if message.get("type") != "websocket.receive":
                    return message
                problem = self.problem(message)
                if problem is None:
                    return message
                await send({"type": "websocket.send", "text": json.dumps(
                    {"type": "error", "data": {"message": problem[1], "code": problem[0]}})})

        return await self.app(scope, checked_receive, send)

    def problem(self, message: dict[str, Any]) -> tuple[str, str] | None:
        """``(code, message)`` for a client message that is answered here, else ``None``."""
        raw = message.get("text")
        if raw is None:
            return "INVALID_JSON", "send messages as text frames of JSON, not binary frames"
        if len(raw.encode("utf-8", errors="replace")) > self.max_bytes:
            return "MESSAGE_TOO_LARGE", f"message of {len(raw)} characters is over the limit of {self.max_bytes} bytes"
        if nesting(raw) > MAX_NESTING:
            return "INVALID_JSON", f"JSON nested deeper than {MAX_NESTING} levels"
        try:
            data = json.loads(raw)
        except ValueError as exc:  # JSONDecodeError, and numbers Python refuses (over 4,300 digits)
            return "INVALID_JSON", f"Invalid JSON: {str(exc)[:200]}"
        if not isinstance(data, dict):
            return "INVALID_JSON", "a message is a JSON object {\"type\": ..., \"data\": {...}}"
        return None


def nesting(text: str) -> int:
    """The deepest nesting of JSON arrays and objects in ``text`` (brackets inside strings not counted), read in
    one pass over its brackets, quotes and escapes without parsing (a message of 100,000 ``[`` costs no recursion)."""
    depth = deepest = 0
    in_string = False
    for match in _JSON_MARKS.finditer(text):
        mark = match.group()
        if in_string:
            in_string = mark != '"'  # escapes are matched whole (\\ and \"), so a lone quote ends the string
        elif mark == '"':
            in_string = True
        elif mark in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif mark in "]}":
            depth -= 1
    return deepest


def create_server_app(data_dir: str | None = None, benchmarks: list[str] | None = None, max_sessions: int = 64,
                      token: str | None = None, max_bytes: int = MAX_MESSAGE_BYTES) -> WireGuard:
    """The ASGI app of ``genenv-serve``: OpenEnv's ``create_app`` over :class:`BenchmarkSession`, behind
    :class:`WireGuard`.

    Args:
        data_dir: the server's data directory. benchmarks: the served names (``None``: every registered one).
        max_sessions: concurrent sessions (OpenEnv's ``max_concurrent_envs``). token: bearer token or ``None``.
    Raises:
        KeyError: an unknown benchmark name.
    """
    from openenv.core.env_server.http_server import create_app

    catalog = TaskCatalog(data_dir, benchmarks)
    app = create_app(lambda: BenchmarkSession(catalog), SessionAction, SessionObservation, env_name="genenv",
                     max_concurrent_envs=int(max_sessions))
    return WireGuard(app, token=token, max_bytes=max_bytes)


def spawn(*args: str, env: dict[str, str] | None = None, timeout: float = 120.0):
    """Start ``genenv-serve`` with ``args`` in a subprocess on a free loopback port; returns ``(process, base URL)``
    once ``/health`` answers (with ``GENENV_SERVE_TOKEN`` from ``env`` when set). Its output goes to a temporary
    file (``process.log_path``): a pipe nobody reads would block it once full.

    Raises:
        RuntimeError: it exited first (with its output's tail) or did not answer within ``timeout`` seconds.
    """
    import socket
    import subprocess
    import sys
    import tempfile
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, **(env or {})}
    log = tempfile.NamedTemporaryFile("w+", prefix="genenv-serve-", suffix=".log", delete=False)
    proc = subprocess.Popen([sys.executable, "-m", "genenv.runtime.env_server", "--port", str(port), *args],
                            stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
    proc.log_path = log.name
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {env[TOKEN_ENV]}"} if env.get(TOKEN_ENV) else {}
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"genenv-serve exited with {proc.returncode}: {open(log.name).read()[-3000:]}")
        try:
            with urllib.request.urlopen(urllib.request.Request(url + "/health", headers=headers), timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"genenv-serve did not answer /health within {timeout:.0f} s; its log: {log.name}")


def main(argv: list[str] | None = None) -> None:
    """``genenv-serve [--host H] [--port P] [--benchmarks a,b] [--max-sessions N] [--data-dir D]``.

    Raises:
        SystemExit: another interface than loopback without ``GENENV_SERVE_TOKEN`` set.
    """
    import uvicorn

    ap = argparse.ArgumentParser(prog="genenv-serve", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1",
                    help="interface to bind (default 127.0.0.1; another one needs GENENV_SERVE_TOKEN)")
    ap.add_argument("--port", type=int, default=8011)
    ap.add_argument("--benchmarks", default="", help="comma-separated names (default: every registered one)")
    ap.add_argument("--max-sessions", type=int, default=64, help="concurrent sessions (default 64)")
    ap.add_argument("--data-dir", default=None, help="data directory (default: $GENENV_DATA_DIR, else the samples)")
    ap.add_argument("--log-level", default="warning")
    args = ap.parse_args(argv)
    token = os.environ.get(TOKEN_ENV) or None
    if args.host not in LOOPBACK and not token:
        raise SystemExit(f"genenv-serve: binding {args.host} needs a bearer token: set {TOKEN_ENV}")
    app = create_server_app(args.data_dir, [b for b in args.benchmarks.split(",") if b] or None,
                            args.max_sessions, token)
    print(f"genenv-serve on http://{args.host}:{args.port} (WebSocket /ws, MCP /mcp; token "
          f"{'required' if token else 'off'})", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, ws_max_size=4 * MAX_MESSAGE_BYTES)


if __name__ == "__main__":
    main()
