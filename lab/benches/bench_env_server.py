"""Load, faults and bad input of ``genenv-serve``, measured against a server started here in a subprocess.

    python lab/benches/bench_env_server.py --part all --sessions 64 --steps 1000 \\
        --out lab/figures/env_server_figures.json

(``--out`` keeps the parts of an existing file that this run does not measure.)

* ``load``: ``--sessions`` concurrent WebSocket sessions (one asyncio client each) over a mix of benchmarks, each
  playing gold episodes (reset by task id, the gold text turn by turn, again) until it made ``--steps`` steps:
  steps/s over all sessions, p50 / p99 step latency, the server's RSS (with its children: the TextWorldExpress
  JVM) at start and end, errors. Then one Bamboogle step over the wire against the same step in-process (medians).
* ``alfworld``: ``--alfworld-sessions`` (e.g. ``8,32``) ALFWorld-only sessions of ``--alfworld-steps`` messages each,
  with the sessions on worker processes (``--workers``, default the usable cores) and, for comparison, all in
  the server process under one lock (``--workers 0``), run in turn; with ``--before DIR`` also the server of the
  package at ``DIR`` (e.g. a worktree of an older commit, put first on ``PYTHONPATH`` as ``genenv``).
* ``mixed``: ``--sessions`` sessions over the mix plus ALFWorld, ``--mixed-steps`` messages each (with
  ``--before DIR`` also on that tree's server).
* ``replicas``: ``--replicas`` (e.g. ``1,2,4``) servers on this machine, the mixed load's ``--sessions`` sessions
  (``--mixed-steps`` messages each) spread over them in turn.
* ``idle``: ``--sessions`` clients reset and then say nothing, filling every slot; a new client retries until it
  plays (``--session-timeout`` 10 s): the seconds it waited.
* ``echo``: Bamboogle replies/s against an echo env served by OpenEnv's own ``create_app`` (an env whose step
  returns its input), under the same client (``--sessions`` sessions, 300 messages each): the protocol's own cost.
  Three rounds in turn, the ratio of the medians; the echo server as uvicorn serves by default (per-message
  compression offered) and without compression (``genenv-serve``'s default).
* ``faults``: a client that drops without a close frame frees its session (time until a new one opens at
  ``--max-sessions 1``); one session over capacity gets ``CAPACITY_REACHED``; a server killed while its clients
  wait gives them an error (time to it).
* ``bad-input``: each bad message on one session, the server's answer, and whether that session and another open
  one still play.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import time
from pathlib import Path

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from genenv.envs.registry import env_entry, load_plugins
from genenv.envs.wrappers import make_text_env
from genenv.runtime.serve.launch import spawn
from genenv.runtime.serve.client import reset_arguments

MIX = ("bamboogle", "bfcl", "api_bank", "twx", "travelplanner_two_stage", "bfcl_multi_turn")
ALFWORLD = ("alfworld",)


def rss_mib(pid: int) -> float:
    """Resident memory (MiB) of ``pid`` and its child processes (``/proc``)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(next(x for x in status.splitlines() if x.startswith("VmRSS")).split()[1]) / 1024
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except (OSError, StopIteration):
            continue  # the process ended between listing and reading: it holds no memory any more
    return total


def gold_tasks(k: int = 8, mix: tuple[str, ...] = MIX) -> dict[str, list]:
    """``k`` tasks of each benchmark of ``mix`` (its default split) with their env class."""
    load_plugins()
    out = {}
    for b in mix:
        entry = env_entry(b)
        out[b] = (entry.env_class, entry.env_class.load_tasks(**entry.split_options[0])[:k])
    return out


async def ask(ws, message) -> dict:
    """Send ``message`` (an object, its text, or bytes as a binary frame) and return the server's answer."""
    await ws.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
    return json.loads(await ws.recv())


async def session_load(url: str, index: int, tasks: dict, steps: int, latencies: list, errors: list) -> None:
    """One session: gold episodes until ``steps`` messages (resets and steps); every message's latency (s) and
    error answers collected. Its benchmark: the ``index``-th of ``tasks`` (cyclic)."""
    mix = list(tasks)
    bench = mix[index % len(mix)]
    cls, pool = tasks[bench]
    made, episode = 0, index
    async with connect(url.replace("http", "ws") + "/ws", max_size=2**24, proxy=None) as ws:
        while made < steps:
            task = pool[episode % len(pool)]
            episode += 1
            t0 = time.perf_counter()
            answer = await ask(ws, {"type": "reset", "data": reset_arguments(task)})
            latencies.append(time.perf_counter() - t0)
            made += 1
            if answer["type"] == "error":
                errors.append(answer["data"]["message"])
                continue
            done, turn = False, 0
            while not done and made < steps:
                t0 = time.perf_counter()
                answer = await ask(ws, {"type": "step", "data": {"text": cls.gold_text(task, turn)}})
                latencies.append(time.perf_counter() - t0)
                made, turn = made + 1, turn + 1
                if answer["type"] == "error":
                    errors.append(answer["data"]["message"])
                    break
                done = answer["data"]["done"]


def part_load(sessions: int, steps: int, mix: tuple[str, ...] = MIX, server_args: tuple[str, ...] = (),
              both_ways: bool = True, tree: Path | None = None) -> dict:
    """The ``load`` part (see the module docstring); ``mix`` and ``server_args`` serve the ``alfworld`` and
    ``mixed`` parts too (``both_ways``: also the one Bamboogle step over the wire and in-process; ``tree``: the
    server of the package at that folder)."""
    tasks = gold_tasks(mix=mix)
    proc, url = spawn("--max-sessions", str(sessions), *server_args, env=package_at(tree))
    try:
        warm = asyncio.run(_warm(url, tasks))
        rss_start = rss_mib(proc.pid)
        latencies, errors = [], []

        async def run_all():
            await asyncio.gather(*[session_load(url, i, tasks, steps, latencies, errors) for i in range(sessions)])

        t0 = time.perf_counter()
        asyncio.run(run_all())
        seconds = time.perf_counter() - t0
        rss_end = rss_mib(proc.pid)
        wire, local = asyncio.run(_one_step_both_ways(url, tasks["bamboogle"])) if both_ways else (None, None)
    finally:
        proc.terminate()
        proc.wait(30)
    out = {"sessions": sessions, "messages_per_session": steps, **replies(latencies, seconds, errors),
           "server_rss_mib_start": round(rss_start), "server_rss_mib_end": round(rss_end),
           "warm_up_seconds": round(warm, 1), "mix": list(mix), "server_args": list(server_args)}
    if both_ways:
        out["bamboogle_step_median_ms"] = {"over_the_wire": round(1000 * wire, 3), "in_process": round(1000 * local, 3)}
    return out


def replies(latencies: list[float], seconds: float, errors: list[str]) -> dict:
    """Messages, seconds, replies/s, p50 / p99 latency (ms) and errors of one load run."""
    lat = sorted(latencies)
    return {"messages": len(lat), "seconds": round(seconds, 1), "replies_per_second": round(len(lat) / seconds, 1),
            "p50_ms": round(1000 * lat[len(lat) // 2], 2), "p99_ms": round(1000 * lat[int(len(lat) * 0.99)], 2),
            "errors": len(errors), "first_errors": errors[:3]}


def part_replicas(counts: list[int], sessions: int, steps: int) -> list[dict]:
    """The ``replicas`` part: for each count, that many servers on this machine and the mixed load's sessions
    spread over them in turn (as `RemoteEpisodes` spreads a fresh client's
    sessions); replies/s, latency and the servers' RSS together."""
    tasks = gold_tasks(mix=MIX + ALFWORLD)
    rows = []
    for count in counts:
        servers = [spawn("--max-sessions", str(sessions)) for _ in range(count)]
        urls = [url for _, url in servers]
        try:
            for url in urls:
                asyncio.run(_warm(url, tasks))
            latencies, errors = [], []

            async def run_all():
                await asyncio.gather(*[session_load(urls[i % count], i, tasks, steps, latencies, errors)
                                       for i in range(sessions)])

            t0 = time.perf_counter()
            asyncio.run(run_all())
            seconds = time.perf_counter() - t0
            rss = sum(rss_mib(proc.pid) for proc, _ in servers)
        finally:
            for proc, _ in servers:
                proc.terminate()
                proc.wait(30)
        rows.append({"replicas": count, "sessions": sessions, "messages_per_session": steps,
                     **replies(latencies, seconds, errors), "servers_rss_mib_end": round(rss),
                     "mix": list(MIX + ALFWORLD)})
        print(json.dumps(rows[-1]))
    return rows


async def _warm(url: str, tasks: dict) -> float:
    """Two messages of each benchmark per worker core first (loads each task list, starts the worker processes),
    so the load part measures steady state."""
    t0 = time.perf_counter()
    await asyncio.gather(*[session_load(url, i, tasks, 2, [], []) for i in range(len(tasks) * (os.cpu_count() or 1))])
    return time.perf_counter() - t0


def package_at(tree: Path | None) -> dict[str, str] | None:
    """Environment variables that make a subprocess import the package at ``tree`` as ``genenv`` (``None``: the
    installed one)."""
    if tree is None:
        return None
    import tempfile

    shim = Path(tempfile.mkdtemp())
    (shim / "genenv").symlink_to(Path(tree).resolve())
    return {"PYTHONPATH": os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def tree_commit(tree: Path) -> str:
    """The short commit of the git work tree ``tree`` (its path when it is not one)."""
    import subprocess

    out = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or str(tree)


def part_alfworld(sessions: list[int], steps: int, workers: int | None, before: Path | None = None) -> list[dict]:
    """The ``alfworld`` part: each session count with the sessions on worker processes, in the server process
    under one lock, and (``before``) on the server of another tree (see the module docstring)."""
    rows = []
    for n in sessions:
        runs = [("this tree, workers " + ("default" if workers is None else str(workers)),
                 [] if workers is None else ["--workers", str(workers)], None),
                ("this tree, workers 0", ["--workers", "0"], None)]
        if before is not None:
            runs.append((f"before ({tree_commit(before)})", [], before))
        for name, extra, tree in runs:
            row = part_load(n, steps, ALFWORLD, ("--benchmarks", "alfworld", *extra), both_ways=False, tree=tree)
            row["server"] = name
            print(json.dumps(row))
            rows.append(row)
    return rows


def part_idle(sessions: int, timeout: float = 10.0) -> dict:
    """The ``idle`` part (see the module docstring)."""
    proc, url = spawn("--max-sessions", str(sessions), "--benchmarks", "bamboogle", "--session-timeout", f"{timeout:g}")
    ws_url = url.replace("http", "ws") + "/ws"
    reset = {"type": "reset", "data": {"benchmark": "bamboogle", "seed": 0}}

    async def run() -> dict:
        idle = [await connect(ws_url, proxy=None) for _ in range(sessions)]
        for ws in idle:
            await ask(ws, reset)
        t0, tries, refusals = time.perf_counter(), 0, []
        while True:
            tries += 1
            try:
                async with connect(ws_url, proxy=None) as ws:
                    answer = await ask(ws, reset)
                    if answer["type"] == "observation":
                        played = (await ask(ws, {"type": "step", "data": {"text": "<answer>x</answer>"}}))["type"]
                        break
            except ConnectionClosed as closed:  # over capacity: OpenEnv answers CAPACITY_REACHED and closes
                refusals.append(closed.rcvd.code if closed.rcvd else None)
            await asyncio.sleep(0.5)
        waited = time.perf_counter() - t0
        closes = []
        for ws in idle:
            try:
                await asyncio.wait_for(ws.recv(), 1)
            except Exception as exc:  # noqa: BLE001 - the close each idle client saw
                closes.append(getattr(getattr(exc, "rcvd", None), "code", type(exc).__name__))
        return {"idle_sessions": sessions, "session_timeout_s": timeout, "new_client_played_after_s": round(waited, 2),
                "tries": tries, "refused_close_codes": sorted(set(map(str, refusals))), "played": played,
                "idle_close_codes": sorted(set(map(str, closes)))}

    try:
        return asyncio.run(run())
    finally:
        proc.kill()
        proc.wait(30)


ECHO_SERVER = """
import sys, uvicorn
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

class EchoAction(Action):
    text: str = ""

class EchoObservation(Observation):
    text: str = ""

class Echo(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    def reset(self, seed=None, episode_id=None, **kw):
        return EchoObservation(text="", reward=None, done=False)
    def step(self, action, timeout_s=None, **kw):
        return EchoObservation(text=action.text, reward=0.0, done=False)
    @property
    def state(self):
        return State()

app = create_app(Echo, EchoAction, EchoObservation, env_name="echo", max_concurrent_envs=int(sys.argv[2]))
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
            ws_per_message_deflate=sys.argv[3] == "deflate")
"""


def part_echo(sessions: int, steps: int, rounds: int = 3) -> dict:
    """The ``echo`` part: Bamboogle replies/s (gold episodes) and an OpenEnv echo env's replies/s under the same
    client (see the module docstring), ``rounds`` times in turn; the ratio of the medians."""
    bamboogle, echo, plain = [], [], []
    for _ in range(rounds):
        bamboogle.append(part_load(sessions, steps, ("bamboogle",), ("--benchmarks", "bamboogle"), both_ways=False))
        echo.append(_echo_round(sessions, steps, deflate=True))
        plain.append(_echo_round(sessions, steps, deflate=False))
    b_med = statistics.median(r["replies_per_second"] for r in bamboogle)
    e_med, p_med = statistics.median(echo), statistics.median(plain)
    return {"sessions": sessions, "messages_per_session": steps, "rounds": rounds,
            "bamboogle_replies_per_second": b_med, "echo_replies_per_second": e_med,
            "echo_without_compression_replies_per_second": p_med,
            "bamboogle_rounds": [r["replies_per_second"] for r in bamboogle], "echo_rounds": echo,
            "echo_without_compression_rounds": plain,
            "bamboogle_p99_ms": statistics.median(r["p99_ms"] for r in bamboogle), "ratio": round(b_med / e_med, 3),
            "ratio_to_echo_without_compression": round(b_med / p_med, 3)}


def _echo_round(sessions: int, steps: int, deflate: bool) -> float:
    """Replies/s of OpenEnv's own server over `ECHO_SERVER` (an env whose step returns its input; ``deflate``:
    WebSocket per-message compression offered, uvicorn's default): each of ``sessions`` sessions resets once, then
    sends ``steps`` steps."""
    import socket
    import subprocess
    import sys
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(port), str(sessions),
                             "deflate" if deflate else "plain"])
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(url + "/health", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        answered = 0

        async def echo_session():
            nonlocal answered
            async with connect(url.replace("http", "ws") + "/ws", proxy=None) as ws:
                await ask(ws, {"type": "reset", "data": {}})
                for _ in range(steps):
                    await ask(ws, {"type": "step", "data": {"text": "<answer>x</answer>"}})
                    answered += 1

        async def run_all():
            await asyncio.gather(*[echo_session() for _ in range(sessions)])

        t0 = time.perf_counter()
        asyncio.run(run_all())
        seconds = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(30)
    return round(answered / seconds, 1)


async def _one_step_both_ways(url: str, bamboogle, repeats: int = 200) -> tuple[float, float]:
    """Median seconds of one Bamboogle step over one WebSocket and of the same step in-process."""
    cls, pool = bamboogle
    task, text = pool[0], cls.gold_text(pool[0])
    wire = []
    async with connect(url.replace("http", "ws") + "/ws", proxy=None) as ws:
        for _ in range(repeats):
            await ask(ws, {"type": "reset", "data": reset_arguments(task)})
            t0 = time.perf_counter()
            await ask(ws, {"type": "step", "data": {"text": text}})
            wire.append(time.perf_counter() - t0)
    env, local = make_text_env([task]), []
    for _ in range(repeats):
        env.reset(options={"task_id": task.id})
        t0 = time.perf_counter()
        env.step(text)
        local.append(time.perf_counter() - t0)
    return statistics.median(wire), statistics.median(local)


def part_faults() -> dict:
    """The ``faults`` part (see the module docstring)."""
    proc, url = spawn("--max-sessions", "1", "--benchmarks", "bamboogle")
    ws_url = url.replace("http", "ws") + "/ws"
    reset = {"type": "reset", "data": {"benchmark": "bamboogle", "seed": 0}}

    async def run() -> dict:
        first = await connect(ws_url, proxy=None)
        await ask(first, reset)
        async with connect(ws_url, proxy=None) as over:
            capacity = json.loads(await over.recv())["data"]
        first.transport.abort()  # a client that drops: no close frame
        t0 = time.perf_counter()
        while True:
            ws = await connect(ws_url, proxy=None)
            if (await ask(ws, reset))["type"] == "observation":
                break
            await ws.close()
            await asyncio.sleep(0.05)
        freed = time.perf_counter() - t0
        os.kill(proc.pid, signal.SIGKILL)  # the server dies while this client waits for an answer
        t0 = time.perf_counter()
        try:
            await asyncio.wait_for(ws.recv(), timeout=60)
            seen = "an answer"
        except Exception as exc:  # noqa: BLE001 - what the client sees
            seen = f"{type(exc).__name__}: {exc}"
        return {"capacity": capacity, "dropped_client_slot_freed_after_s": round(freed, 3),
                "killed_server": seen, "killed_server_error_after_s": round(time.perf_counter() - t0, 3)}

    try:
        return asyncio.run(run())
    finally:
        proc.kill()
        proc.wait(30)


BAD = {
    "malformed JSON": "{not json",
    "not an object": "[1, 2]",
    "over 1 MiB": json.dumps({"type": "reset", "data": {"benchmark": "bamboogle", "pad": "x" * (2 << 20)}}),
    "5,000-digit integer": '{"type": "reset", "data": {"benchmark": "bamboogle", "seed": ' + "9" * 5000 + "}}",
    "unknown message type": {"type": "dance"},
    "arrays nested 300 deep (634 bytes)": '{"type": "step", "data": {"text": "a", "x": ' + "[" * 300 + "]" * 300 + "}}",
    "100,000 [": "[" * 100_000,
    "binary frame": b'{"type": "state"}',
    "unknown benchmark": {"type": "reset", "data": {"benchmark": "nope"}},
    "unknown task id": {"type": "reset", "data": {"benchmark": "bamboogle", "task_id": "nope"}},
    "unknown reset argument": {"type": "reset", "data": {"benchmark": "bamboogle", "sed": 1}},
    "task_id given as a list": {"type": "reset", "data": {"benchmark": "bamboogle", "task_id": ["bamboogle_1"]}},
    "seed given as a string": {"type": "reset", "data": {"benchmark": "bamboogle", "seed": "1"}},
    "inline task that fails validation": {"type": "reset", "data": {"benchmark": "bamboogle",
                                                                   "task": {"question": "Who?", "answer": ""}}},
    "wrong action type": {"type": "step", "data": {"text": 5}},
    "action of no kind": {"type": "step", "data": {"foo": 1}},
    "code payload and a 5,000-digit integer in model text": {
        "type": "step", "data": {"text": "__import__('os').system('touch /tmp/genenv-pwned') " + "9" * 5000}},
    "step after done": {"type": "step", "data": {"text": "x"}},
    "reset again": {"type": "reset", "data": {"benchmark": "bamboogle", "seed": 1}},
    "lone surrogate escape in model text": '{"type": "step", "data": {"text": "<answer>\\ud800</answer>"}}',
}


def part_bad_input() -> list[dict]:
    """The ``bad-input`` part (see the module docstring)."""
    proc, url = spawn("--benchmarks", "bamboogle")
    ws_url = url.replace("http", "ws") + "/ws"
    reset = {"type": "reset", "data": {"benchmark": "bamboogle", "seed": 1}}

    async def run():
        rows = []
        async with connect(ws_url, max_size=2**24, proxy=None) as ws, connect(ws_url, proxy=None) as other:
            await ask(other, reset)
            first = await ask(ws, {"type": "step", "data": {"text": "x"}})
            rows.append({"case": "step before reset", "answer": first["data"].get("code"),
                         "message": first["data"].get("message", "")[:120]})
            await ask(ws, reset)
            for case, message in BAD.items():
                answer = await ask(ws, message)
                data = answer["data"]
                rows.append({"case": case, "answer": data.get("code") or f"reward {data.get('reward')}",
                             "message": (data.get("message") or data.get("observation", {}).get("info", {}).get(
                                 "error", ""))[:120]})
            session_ok = (await ask(ws, reset))["type"] == "observation"
            answer = await ask(other, {"type": "step", "data": {"text": "<answer>x</answer>"}})
            other_ok = answer["type"] == "observation"
            for row in rows:
                row["session_goes_on"], row["other_session_goes_on"] = session_ok, other_ok
            return rows

    try:
        rows = asyncio.run(run())
    finally:
        proc.terminate()
        proc.wait(30)
    rows.append({"case": "payload executed", "answer": str(os.path.exists("/tmp/genenv-pwned"))})
    return rows


def main() -> None:
    """The command line of the module docstring: prints each part's figures and writes them to ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", default="all",
                    choices=["all", "load", "alfworld", "mixed", "replicas", "idle", "echo", "faults", "bad-input"])
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--alfworld-sessions", default="8,32")
    ap.add_argument("--alfworld-steps", type=int, default=30)
    ap.add_argument("--mixed-steps", type=int, default=60)
    ap.add_argument("--replicas", default="1,2,4", help="the replicas part's server counts")
    ap.add_argument("--workers", type=int, default=None, help="the server's --workers (default: its own default)")
    ap.add_argument("--before", type=Path, default=None, help="the alfworld part also runs this tree's server")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    figures = json.loads(Path(args.out).read_text()) if args.out and Path(args.out).is_file() else {}
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), os.uname().machine) if Path("/proc/cpuinfo").is_file() else ""
    figures.setdefault("hosts", {})
    if args.part in ("all", "load"):
        figures["load"] = part_load(args.sessions, args.steps)
        print(json.dumps(figures["load"], indent=1))
    if args.part in ("all", "alfworld"):
        figures["alfworld"] = part_alfworld([int(n) for n in args.alfworld_sessions.split(",")], args.alfworld_steps,
                                            args.workers, args.before)
    if args.part in ("all", "mixed"):
        figures["mixed"] = [part_load(args.sessions, args.mixed_steps, MIX + ALFWORLD, both_ways=False)]
        if args.before is not None:
            figures["mixed"].append(part_load(args.sessions, args.mixed_steps, MIX + ALFWORLD, both_ways=False,
                                              tree=args.before))
        for row, name in zip(figures["mixed"], ("this tree", f"before ({tree_commit(args.before)})")):
            row["server"] = name
            print(json.dumps(row))
    if args.part in ("all", "replicas"):
        figures["replicas"] = part_replicas([int(n) for n in args.replicas.split(",")], args.sessions,
                                            args.mixed_steps)
    if args.part in ("all", "idle"):
        figures["idle"] = part_idle(args.sessions)
        print(json.dumps(figures["idle"], indent=1))
    if args.part in ("all", "echo"):
        figures["echo"] = part_echo(args.sessions, 300)
        print(json.dumps(figures["echo"], indent=1))
    if args.part in ("all", "faults"):
        figures["faults"] = part_faults()
        print(json.dumps(figures["faults"], indent=1))
    if args.part in ("all", "bad-input"):
        figures["bad_input"] = part_bad_input()
        for row in figures["bad_input"]:
            print(f"{row['case']:<55} {row['answer']:<22} {row.get('message', '')[:70]}")
    for part in ("load", "alfworld", "mixed", "replicas", "idle", "echo", "faults", "bad_input"):
        if args.part in ("all", part.replace("_", "-")):
            figures["hosts"][part] = f"{cpu}, {os.cpu_count()} cores"
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
