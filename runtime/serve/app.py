"""``genenv-serve``: every registered benchmark behind one OpenEnv session server.

Built on OpenEnv's own server (``openenv`` 0.10, ``openenv.core.env_server.http_server.create_app``): WebSocket
sessions at ``/ws`` (one `BenchmarkSession` per connection: reset, step, state, close; a connection over
``max_sessions`` gets OpenEnv's ``CAPACITY_REACHED`` error), ``/health``, ``/schema``, ``/metadata``, OpenEnv's
stateless HTTP ``/reset`` and ``/step``, and MCP JSON-RPC (``tools/list``, ``tools/call``) over ``/mcp`` and as
``{"type": "mcp"}`` messages on a session, where its task's tools are listed and a call is one step.
This module is the app and its command line; the wire types and reset arguments are in
`protocol`, the tasks in `catalog`, the sessions in
`environment`.

A session's episode is exactly the in-process one: the env is made by
`make_text_env` over the task, as `LocalEpisodes` makes
it for evaluation and training, and reset with ``options={"task_id": ...}``; so a step over the wire returns the
reward, observation and info of the same step in-process. Inline tasks are validated by the benchmark's spec
(`parse_generated`, as `genenv.trainer.generation.write_tasks`
validates generated tasks); a rejected one is answered with its rejection reason and leaves its session as it was.

Around OpenEnv's app, `WireGuard` (ASGI middleware) answers, without passing them on and with their session
kept: a message over `MAX_MESSAGE_BYTES`, text that is not a JSON object, and
JSON that Python refuses to read (e.g. an integer over 4,300 digits); it reads a lone UTF-16 surrogate escape
(``"\\ud800"``, not a character) as U+FFFD, so such model text scores 0 with the env's reason instead of breaking
the answer; it closes a WebSocket that sent no message for ``--session-timeout`` seconds (close code
`IDLE_CLOSE_CODE`, the reason says why), which frees its session slot; with a bearer token set it refuses
every request and connection without ``Authorization: Bearer <token>`` (HTTP 401; a WebSocket is closed before it
opens). The server binds 127.0.0.1 unless ``--host`` names another interface, which needs ``GENENV_SERVE_TOKEN``.

Sessions of envs that are not thread-safe (ALFWorld) run in ``--workers`` worker processes
(`SessionWorkers`).
"""
from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import logging
import os
import re
from typing import Any

from genenv.runtime.serve.catalog import TaskCatalog
from genenv.runtime.serve.environment import BenchmarkSession, SessionWorkers
from genenv.runtime.serve.protocol import (MAX_MESSAGE_BYTES, MAX_NESTING, TOKEN_ENV, SessionAction,
                                           SessionObservation)

__all__ = ["WireGuard", "main"]

log = logging.getLogger(__name__)
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_JSON_MARKS = re.compile(r'\\.|[\[\]{}"]', re.S)
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# json.loads raises ValueError, not the JSONDecodeError OpenEnv's endpoint catches, on integers over 4,300 digits
_LONG_NUMBER = re.compile(r"\d{4000}")
IDLE_CLOSE_CODE = 4000  # WebSocket close code of a session closed for idleness (4000-4999: the application's own)
DEFAULT_SESSION_TIMEOUT = 300.0  # seconds without a client message before a session is closed


class WireGuard:
    """ASGI middleware in front of OpenEnv's app (see the module docstring): message checks on WebSocket
    sessions, idle sessions closed, and the bearer token on every request when ``token`` is set.

    Args:
        app: the ASGI app. token: the bearer token (``None``: no check). max_bytes: the largest client message.
        session_timeout: seconds a WebSocket may stay without a client message before it is closed
            (``None`` or ``0``: never).
    """

    def __init__(self, app: Any, token: str | None = None, max_bytes: int = MAX_MESSAGE_BYTES,
                 session_timeout: float | None = DEFAULT_SESSION_TIMEOUT):
        self.app, self.token, self.max_bytes = app, token, max_bytes
        self.session_timeout = session_timeout or None

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
        closed = False  # set once the socket is closed (here, or the client left): the app's later sends are dropped

        async def guarded_send(message: dict[str, Any]) -> None:
            if not closed:
                await send(message)

        async def checked_receive() -> dict[str, Any]:
            nonlocal closed
            while True:
                try:
                    async with asyncio.timeout(self.session_timeout):  # no task per message, unlike wait_for
                        message = await receive()
                except TimeoutError:
                    reason = (f"idle for {self.session_timeout:g} s without a message: session closed "
                              "(genenv-serve --session-timeout)")
                    await send({"type": "websocket.close", "code": IDLE_CLOSE_CODE, "reason": reason})
                    closed = True
                    return {"type": "websocket.disconnect", "code": IDLE_CLOSE_CODE, "reason": reason}
                if message.get("type") != "websocket.receive":
                    closed = closed or message.get("type") == "websocket.disconnect"  # nothing can be sent now
                    return message
                problem = self.problem(message)
                if problem is None:
                    return readable(message)
                await send({"type": "websocket.send", "text": json.dumps(
                    {"type": "error", "data": {"message": problem[1], "code": problem[0]}})})

        return await self.app(scope, checked_receive, guarded_send)

    def problem(self, message: dict[str, Any]) -> tuple[str, str] | None:
        """``(code, message)`` for a client message that is answered here, else ``None``."""
        raw = message.get("text")
        if raw is None:
            return "INVALID_JSON", "send messages as text frames of JSON, not binary frames"
        if len(raw.encode("utf-8", errors="replace")) > self.max_bytes:
            return "MESSAGE_TOO_LARGE", f"message of {len(raw)} characters is over the limit of {self.max_bytes} bytes"
        if raw.count("[") + raw.count("{") > MAX_NESTING and nesting(raw) > MAX_NESTING:
            return "INVALID_JSON", f"JSON nested deeper than {MAX_NESTING} levels"
        if raw.lstrip()[:1] == "{" and not _LONG_NUMBER.search(raw):
            return None  # an object, or JSON OpenEnv's own parse refuses with INVALID_JSON: parsed once, there
        try:
            data = json.loads(raw)
        except ValueError as exc:  # JSONDecodeError, and numbers Python refuses (over 4,300 digits)
            return "INVALID_JSON", f"Invalid JSON: {str(exc)[:200]}"
        if not isinstance(data, dict):
            return "INVALID_JSON", "a message is a JSON object {\"type\": ..., \"data\": {...}}"
        return None


def readable(message: dict[str, Any]) -> dict[str, Any]:
    """A ``websocket.receive`` message of valid JSON with every lone UTF-16 surrogate escape (``\\ud800`` not
    part of a pair: no character, and no JSON encoder can write it back) read as U+FFFD; other messages as they
    are. A surrogate pair (``\\ud83d\\ude00``) is one character and stays."""
    raw = message["text"]
    if not _SURROGATE_ESCAPE.search(raw):
        return message
    data = json.loads(raw)
    cleaned = _without_surrogates(data)
    return message if cleaned == data else {**message, "text": json.dumps(cleaned, ensure_ascii=False)}


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    return value


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
                      token: str | None = None, max_bytes: int = MAX_MESSAGE_BYTES, workers: int | None = None,
                      session_timeout: float | None = DEFAULT_SESSION_TIMEOUT) -> WireGuard:
    """The ASGI app of ``genenv-serve``: OpenEnv's ``create_app`` over `BenchmarkSession`, behind
    `WireGuard`.

    Args:
        data_dir: the server's data directory. benchmarks: the served names (``None``: every registered one).
        max_sessions: concurrent sessions (OpenEnv's ``max_concurrent_envs``). token: bearer token or ``None``.
        workers: worker processes for sessions of envs that are not thread-safe (``None``: the usable cores;
            ``0``: none, such sessions take turns in this process). session_timeout: seconds without a client
            message before a session is closed (``None`` / ``0``: never).
    Raises:
        KeyError: an unknown benchmark name.
    """
    from openenv.core.env_server.http_server import create_app

    catalog = TaskCatalog(data_dir, benchmarks)
    pool = SessionWorkers(workers)
    app = create_app(lambda: BenchmarkSession(catalog, pool), SessionAction, SessionObservation, env_name="genenv",
                     max_concurrent_envs=int(max_sessions))
    app.router.on_shutdown.append(pool.shutdown)
    return WireGuard(app, token=token, max_bytes=max_bytes, session_timeout=session_timeout)


def __getattr__(name: str) -> Any:
    """``app``: the ASGI app built from the environment, for servers that import an app object rather than call
    a factory (``uvicorn genenv.runtime.serve.app:app``, OpenEnv's deployment tools reading ``openenv.yaml``):
    every benchmark, data from ``$GENENV_DATA_DIR`` (else the packaged samples), the token from
    ``$GENENV_SERVE_TOKEN``, the defaults of `create_server_app` otherwise. Built on first access and kept.
    ``genenv-serve``'s refusal to bind another interface than loopback without a token is its command line's:
    whoever serves ``app`` on another interface sets the token.

    Raises:
        AttributeError: any other name.
    """
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    app = globals().get("_app")
    if app is None:
        app = globals()["_app"] = create_server_app(os.environ.get("GENENV_DATA_DIR") or None,
                                                    token=os.environ.get(TOKEN_ENV) or None)
    return app


def main(argv: list[str] | None = None) -> None:
    """``genenv-serve [--host H] [--port P] [--benchmarks a,b] [--max-sessions N] [--workers W]
    [--session-timeout S] [--data-dir D]``.

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
    ap.add_argument("--workers", type=int, default=None,
                    help="worker processes for sessions of envs that are not thread-safe, e.g. ALFWorld (default: "
                         "the usable cores; 0: run them in the server process, one step at a time)")
    ap.add_argument("--session-timeout", type=float, default=DEFAULT_SESSION_TIMEOUT,
                    help=f"close a session after this many seconds without a message (default "
                         f"{DEFAULT_SESSION_TIMEOUT:g}; 0: never)")
    ap.add_argument("--data-dir", default=None, help="data directory (default: $GENENV_DATA_DIR, else the samples)")
    ap.add_argument("--ws-compression", action=argparse.BooleanOptionalAction, default=False,
                    help="offer WebSocket per-message deflate (default off: on loopback and LANs it costs more CPU "
                         "per message than the bytes it saves)")
    ap.add_argument("--log-level", default="warning")
    args = ap.parse_args(argv)
    token = os.environ.get(TOKEN_ENV) or None
    if args.host not in LOOPBACK and not token:
        raise SystemExit(f"genenv-serve: binding {args.host} needs a bearer token: set {TOKEN_ENV}")
    app = create_server_app(args.data_dir, [b for b in args.benchmarks.split(",") if b] or None,
                            args.max_sessions, token, workers=args.workers,
                            session_timeout=args.session_timeout)
    print(f"genenv-serve on http://{args.host}:{args.port} (WebSocket /ws, MCP /mcp; token "
          f"{'required' if token else 'off'})", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, ws_max_size=4 * MAX_MESSAGE_BYTES,
                ws_per_message_deflate=args.ws_compression)


if __name__ == "__main__":
    main()
