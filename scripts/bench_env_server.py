"""Load, faults and bad input of ``genenv-serve``, measured against a server started here in a subprocess.

    python scripts/bench_env_server.py --part all --sessions 64 --steps 1000 --out docs/env_server_figures.json

* ``load``: ``--sessions`` concurrent WebSocket sessions (one asyncio client each) over a mix of benchmarks, each
  playing oracle episodes (reset by task id, the gold text turn by turn, again) until it made ``--steps`` steps:
  steps/s over all sessions, p50 / p99 step latency, the server's RSS (with its children: the TextWorldExpress
  JVM) at start and end, errors. Then one Bamboogle step over the wire against the same step in-process (medians).
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

from genenv.envs.registry import env_entry, load_plugins
from genenv.envs.wrappers import make_text_env
from genenv.runtime.serve.launch import spawn
from genenv.runtime.serve.client import reset_arguments

MIX = ("bamboogle", "bfcl", "api_bank", "twx", "travelplanner_two_stage", "bfcl_multi_turn")


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


def oracle_tasks(k: int = 8) -> dict[str, list]:
    """``k`` tasks of each benchmark of :data:`MIX` (its default split) with their env class."""
    load_plugins()
    out = {}
    for b in MIX:
        entry = env_entry(b)
        out[b] = (entry.env_class, entry.env_class.load_tasks(**entry.split_options[0])[:k])
    return out


async def ask(ws, message) -> dict:
    """Send ``message`` (an object, its text, or bytes as a binary frame) and return the server's answer."""
    await ws.send(message if isinstance(message, (str, bytes)) else json.dumps(message))
    return json.loads(await ws.recv())


async def session_load(url: str, index: int, tasks: dict, steps: int, latencies: list, errors: list) -> None:
    """One session: oracle episodes until ``steps`` steps; step latencies (s) and error answers collected."""
    bench = MIX[index % len(MIX)]
    cls, pool = tasks[bench]
    made, episode = 0, index
    async with connect(url.replace("http", "ws") + "/ws", max_size=2**24, proxy=None) as ws:
        while made < steps:
            task = pool[episode % len(pool)]
            episode += 1
            answer = await ask(ws, {"type": "reset", "data": reset_arguments(task)})
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


def part_load(sessions: int, steps: int) -> dict:
    """The ``load`` part (see the module docstring)."""
    tasks = oracle_tasks()
    proc, url = spawn("--max-sessions", str(sessions))
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
        wire, local = asyncio.run(_one_step_both_ways(url, tasks["bamboogle"]))
    finally:
        proc.terminate()
        proc.wait(30)
    lat = sorted(latencies)
    return {"sessions": sessions, "steps_per_session": steps, "steps": len(lat), "seconds": round(seconds, 1),
            "steps_per_second": round(len(lat) / seconds, 1), "p50_ms": round(1000 * lat[len(lat) // 2], 2),
            "p99_ms": round(1000 * lat[int(len(lat) * 0.99)], 2), "server_rss_mib_start": round(rss_start),
            "server_rss_mib_end": round(rss_end), "errors": len(errors), "first_errors": errors[:3],
            "warm_up_seconds": round(warm, 1), "mix": list(MIX),
            "bamboogle_step_median_ms": {"over_the_wire": round(1000 * wire, 3), "in_process": round(1000 * local, 3)}}


async def _warm(url: str, tasks: dict) -> float:
    """One episode of each benchmark first (loads each task list once), so the load part measures steady state."""
    t0 = time.perf_counter()
    await asyncio.gather(*[session_load(url, i, tasks, 1, [], []) for i in range(len(MIX))])
    return time.perf_counter() - t0


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
    "inline task that fails validation": {"type": "reset", "data": {"benchmark": "bamboogle",
                                                                   "task": {"question": "Who?", "answer": ""}}},
    "wrong action type": {"type": "step", "data": {"text": 5}},
    "action of no kind": {"type": "step", "data": {"foo": 1}},
    "code payload and a 5,000-digit integer in model text": {
        "type": "step", "data": {"text": "__import__('os').system('touch /tmp/genenv-pwned') " + "9" * 5000}},
    "step after done": {"type": "step", "data": {"text": "x"}},
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
    ap.add_argument("--part", default="all", choices=["all", "load", "faults", "bad-input"])
    ap.add_argument("--sessions", type=int, default=64)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    figures = {"host": os.uname().machine, "cores": os.cpu_count()}
    if args.part in ("all", "load"):
        figures["load"] = part_load(args.sessions, args.steps)
        print(json.dumps(figures["load"], indent=1))
    if args.part in ("all", "faults"):
        figures["faults"] = part_faults()
        print(json.dumps(figures["faults"], indent=1))
    if args.part in ("all", "bad-input"):
        figures["bad_input"] = part_bad_input()
        for row in figures["bad_input"]:
            print(f"{row['case']:<55} {row['answer']:<22} {row.get('message', '')[:70]}")
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
