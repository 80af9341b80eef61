"""Episodes played against a ``genenv-serve`` session server instead of in this process.

`RemoteEpisodes` has the interface of `LocalEpisodes` (``open``, ``step``,
``close``, ``shutdown``; reset and step outputs in Gymnasium's form, ``info["messages"]`` the next turn's prompt),
so `play_episodes` (evaluation and local training) and the veRL agent loop play
the same episodes either way. Each episode is one WebSocket session of OpenEnv's own client
(``openenv.core.generic_client.GenericEnvClient``); the sessions of one round are stepped concurrently on one event
loop in a background thread.

Several servers (replicas of one ``genenv-serve``, e.g. the ``docker compose`` file's, or servers on several
machines) are given as a comma-separated list of URLs: each new episode's session opens on the server with the
fewest of this runner's sessions open (ties: the first listed), so a round's sessions spread evenly; a session stays
on its server (sessions are sticky, as behind a WebSocket-aware load balancer).

A task travels as the server needs it (`reset_arguments`): a seed task by its id and split, a generated one
as its generation JSON (`as_generation`, validated again on the
server) with its parent's id; both with the task's digest (`task_sha256`), so a
server whose data differ from the client's refuses the task instead of playing another one. Env options travel
as ``reading`` (``parsing``) and ``env_options``; ``data_dir`` stays on each side (the server has its own).
"""
from __future__ import annotations

import asyncio
import json
import os
import threading
from typing import Any, Sequence

from openenv.core.generic_client import GenericEnvClient
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from genenv.benchmarks.registry import get_benchmark
from genenv.envs.task import Task
from genenv.runtime.serve.protocol import MAX_MESSAGE_BYTES, TOKEN_ENV, task_sha256

__all__ = ["RemoteEpisodes", "SessionClient", "reset_arguments", "server_urls"]



class SessionClient(GenericEnvClient):
    """OpenEnv's generic client that also sends ``Authorization: Bearer <token>`` (``token``, default
    ``$GENENV_SERVE_TOKEN``) when it opens its WebSocket, and says more when something fails.

    Raises (from its methods): ``ConnectionError`` naming the URL when the server cannot be reached, refuses, or
    closes the session (a killed server; an error the server sent just before closing, such as
    ``CAPACITY_REACHED``, is named); ``RuntimeError`` with the server's message, code and validation details.
    """

    def __init__(self, base_url: str, token: str | None = None, message_timeout_s: float = 600.0, **kwargs: Any):
        token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        headers = {"Authorization": f"Bearer {token}"} if token else None
        super().__init__(base_url, message_timeout_s=message_timeout_s, headers=headers, **kwargs)

    async def _connect_async(self) -> "SessionClient":
        """Open its WebSocket (OpenEnv's connect, with the bearer token as a header), naming the URL on failure.

        A session the server has closed (killed server, ``--session-timeout``) is not silently replaced by a new
        one, as OpenEnv's client would: its episode is gone, so the call fails naming the close code and reason."""
        ws = self._ws
        if ws is not None and ws.state in (State.CLOSING, State.CLOSED):
            reason = f"close code {ws.close_code}" + (f": {ws.close_reason}" if ws.close_reason else "")
            raise ConnectionError(f"the session at {self._ws_url} was closed{await self._last_words()} ({reason}); "
                                  "its episode is lost: close this client and open another")
        try:
            return await super()._connect_async()
        except ConnectionError as exc:
            raise ConnectionError(f"cannot open a session at {self._ws_url}: {exc.__cause__ or exc}") from exc

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            await self._send(message)
            response = await self._receive()
        except ConnectionClosed as exc:
            raise ConnectionError(f"the session at {self._ws_url} was closed"
                                  f"{await self._last_words()}: {exc}") from exc
        if response.get("type") == "error":
            raise RuntimeError(server_error(response.get("data") or {}))
        return response

    async def _last_words(self) -> str:
        """The error the server sent before it closed the connection (e.g. ``CAPACITY_REACHED``), if one is
        still buffered."""
        try:
            data = json.loads(await asyncio.wait_for(self._ws.recv(), timeout=1)).get("data") or {}
        except Exception:  # noqa: BLE001 - nothing buffered: the connection just ended
            return ""
        return f" after the server's error: {server_error(data)}"


def server_error(data: dict[str, Any]) -> str:
    """OpenEnv's error ``data`` as one line: ``Server error: <message> (code: <code>)`` and the validation
    details (``field: reason``) when there are any."""
    details = "; ".join(f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg', '')}"
                        for e in data.get("errors") or [] if isinstance(e, dict))
    return (f"Server error: {data.get('message', 'unknown error')} (code: {data.get('code', 'UNKNOWN')})"
            + (f" [{details}]" if details else ""))


def reset_arguments(task: Task, env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``reset`` data that starts ``task``'s episode on the server (see the module docstring).

    Raises:
        ValueError: a generated task whose benchmark cannot write it as generation JSON.
    """
    options = dict(env_kwargs or {})
    options.pop("data_dir", None)
    data: dict[str, Any] = {"benchmark": task.benchmark, "split": task.split,
                            "reading": options.pop("parsing", "official"), "task_sha256": task_sha256(task.to_dict())}
    if options:
        data["env_options"] = options
    if task.origin == "generated":
        data.update(task=get_benchmark(task.benchmark).as_generation(task), task_id=task.id,
                    parent_task_id=task.parent_id)
        data.pop("split")  # the parent may come from any split
    else:
        data["task_id"] = task.id
    return data


def server_urls(url: str | Sequence[str]) -> list[str]:
    """The base URLs in ``url``: a comma-separated string or a sequence of URLs, blanks dropped, order kept.

    Raises:
        ValueError: no URL, or one that does not start with ``http://`` or ``https://``.
    """
    parts = url.split(",") if isinstance(url, str) else list(url)
    urls = [str(u).strip().rstrip("/") for u in parts if str(u).strip()]
    if not urls:
        raise ValueError(f"no env server URL in {url!r}")
    bad = [u for u in urls if not u.startswith(("http://", "https://"))]
    if bad:
        raise ValueError(f"env server URLs start with http:// or https://, got {bad}")
    return urls


class RemoteEpisodes:
    """Episodes on ``genenv-serve`` servers (see the module docstring).

    Args:
        url: a server's base URL (``http://host:port``) or several, comma-separated (or a sequence): each new
            session opens on the one with the fewest of this runner's sessions. token: bearer token (default
            ``$GENENV_SERVE_TOKEN``), the same for every server. timeout_s: the longest wait for one answer.
    Raises (from its methods):
        ConnectionError: a server cannot be reached or closed a session. RuntimeError: a server answered an
            error (OpenEnv's ``Server error: <message> (code: <code>)``). ValueError (constructor): no valid URL.
    """

    def __init__(self, url: str | Sequence[str], token: str | None = None, timeout_s: float = 600.0):
        self.urls = server_urls(url)
        self.url, self.token, self.timeout_s = self.urls[0], token, timeout_s
        self.clients: dict[int, SessionClient] = {}
        self.open_on: dict[str, int] = {u: 0 for u in self.urls}  # this runner's open sessions per server
        self._server_of: dict[int, str] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="genenv-remote-episodes", daemon=True)
        self._thread.start()

    def _run(self, coro) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _gather(self, coros) -> list[Any]:
        results = await asyncio.gather(*coros, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return results

    def _pick_server(self, eid: int) -> str:
        """The server for a new session: fewest of this runner's sessions open (ties: first listed)."""
        url = min(self.urls, key=lambda u: self.open_on[u])
        self.open_on[url] += 1
        self._server_of[eid] = url
        return url

    async def _open_one(self, eid: int, task: Task, reset: dict[str, Any]) -> tuple[str, dict]:
        client = SessionClient(self._server_of[eid], token=self.token, message_timeout_s=self.timeout_s,
                               max_message_size_mb=64 * MAX_MESSAGE_BYTES / 2**20)
        self.clients[eid] = client
        await client.connect()
        result = await client.reset(**reset)
        obs = result.observation
        return obs["prompt"], {**obs["info"], "task_id": obs["task_id"], "messages": obs["messages"],
                               "tools": task.tools}

    async def _step_one(self, eid: int, text: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        result = await self.clients[eid].step({"text": text})
        obs = result.observation
        info = dict(obs["info"])
        truncated = bool(info.pop("truncated", False))
        if not result.done:
            info["messages"] = obs["messages"]
        return obs["prompt"], float(result.reward or 0.0), bool(result.done) and not truncated, truncated, info

    def open(self, items: Sequence[tuple[int, Task, dict[str, Any] | None]]) -> list[tuple[str, dict[str, Any]]]:
        """Open one session per ``(episode id, task, env kwargs)`` and reset it; returns each reset output. A
        group's ``n`` episodes of one task share its reset arguments (the digest is computed once)."""
        resets: dict[tuple[int, int], dict[str, Any]] = {}
        for eid, task, kw in items:
            resets.setdefault((id(task), id(kw)), reset_arguments(task, kw))
            self._pick_server(eid)
        return self._run(self._gather([self._open_one(eid, task, resets[id(task), id(kw)])
                                       for eid, task, kw in items]))

    def step(self, items: Sequence[tuple[int, str]]) -> list[tuple[str, float, bool, bool, dict[str, Any]]]:
        """One step per ``(episode id, text)``, all sessions at once; results in input order."""
        return self._run(self._gather([self._step_one(eid, text) for eid, text in items]))

    @staticmethod
    async def _close_one(client: SessionClient) -> None:
        await client.close()

    def close(self, eid: int) -> None:
        """Close one episode's session."""
        client = self.clients.pop(eid, None)
        url = self._server_of.pop(eid, None)
        if url is not None:
            self.open_on[url] -= 1
        if client is not None:
            self._run(self._close_one(client))

    def shutdown(self) -> None:
        """Close every session and stop the event loop thread."""
        for eid in list(self.clients):
            self.close(eid)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
