"""verifiers' OpenEnv taskset against a ``genenv-serve`` server: one episode scored by verifiers' own code.

Runs in the verifiers client venv that ``.ci/install`` builds (``verifiers[openenv]==0.4.0``; its pins conflict
with the project's, so it has a venv of its own and imports nothing of ``genenv``)::

    ~/.cache/genenv/venvs/verifiers-0.4.0/bin/python tests/clients/client_verifiers.py \\
        --base-url http://127.0.0.1:8011 --reset '{"benchmark": "bamboogle", "task_id": "bamboogle_1"}' \\
        --reply '{"text": "<answer>James Madison</answer>"}'

What it does, all with verifiers' classes (``verifiers.v1.tasksets.openenv``): builds ``OpenEnvTaskset`` with the
reset arguments as its one task, reads the server's ``/schema`` as verifiers does, parses each scripted model
reply with verifiers' ``parse_action`` against that schema, and plays the episode with verifiers' own
``OpenEnvEnv.run``, the replies given by a scripted player in place of an LLM (verifiers has no offline model).
Prints one JSON line: ``{"action_schema_title", "parsed", "reward", "user_turns", "stop_reason"}``; the reward is
verifiers' ``openenv_reward`` (the sum of the step rewards the server returned).
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from types import SimpleNamespace

import httpx
from verifiers.v1.tasksets.openenv import OpenEnvConfig, OpenEnvEnv, OpenEnvTaskset
from verifiers.v1.tasksets.openenv.taskset import parse_action


class ScriptedPlayer:
    """Stands in for verifiers' player: each user turn is answered with the next scripted reply (the last one
    repeats); after ``max_turns`` the interaction ends. Keeps verifiers' trace calls (``stop``, ``record_reward``)."""

    def __init__(self, replies: list[str], max_turns: int):
        self.replies, self.max_turns = replies, max_turns
        self.turns: list[str] = []
        self.rewards: dict[str, float] = {}
        self.stop_reason = None

    def stop(self, reason) -> None:
        """verifiers' trace: the episode stopped for ``reason``."""
        self.stop_reason = str(reason)

    def record_reward(self, name: str, value: float, weight: float = 1.0) -> None:
        """verifiers' trace: reward ``name`` is ``value`` (``openenv_reward``: the sum of the step rewards)."""
        self.rewards[name] = float(value)

    async def turn(self, message: str):
        """One user turn (the observation and action schema as JSON): the next scripted reply."""
        self.turns.append(message)
        if len(self.turns) > self.max_turns:
            return SimpleNamespace(terminated=True, last_reply="")
        return SimpleNamespace(terminated=False, last_reply=self.replies[min(len(self.turns), len(self.replies)) - 1])

    @contextlib.asynccontextmanager
    async def interaction(self, task):
        """verifiers' player interaction for ``task``: this player, which is also its own trace."""
        self.trace = self
        yield self


async def main(argv: list[str] | None = None) -> int:
    """The command line of the module docstring; prints the result line and returns 0 (verifiers' errors raise)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--reset", default="{}", help="the reset arguments (JSON object)")
    ap.add_argument("--reply", action="append", required=True, help="a scripted model reply (repeatable)")
    ap.add_argument("--max-turns", type=int, default=8)
    args = ap.parse_args(argv)
    taskset = OpenEnvTaskset(OpenEnvConfig(id="genenv", base_url=args.base_url, resets=[json.loads(args.reset)]))
    task = list(taskset)[0]
    async with httpx.AsyncClient(timeout=10) as http:
        schema = (await http.get(f"{args.base_url}/schema")).json()["action"]
    parsed = [parse_action(r, schema) for r in args.reply]
    player = ScriptedPlayer(args.reply, args.max_turns)
    await OpenEnvEnv.run(None, task, SimpleNamespace(player=player))  # verifiers' episode; it reads no `self`
    print(json.dumps({"action_schema_title": schema.get("title"), "parsed": parsed,
                      "reward": player.rewards.get("openenv_reward"), "user_turns": len(player.turns),
                      "stop_reason": player.stop_reason}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
