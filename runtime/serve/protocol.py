"""The wire types of the benchmark session server (``genenv-serve``): OpenEnv's ``Action`` / ``Observation`` /
``State`` models (``openenv``, ``openenv.core.env_server.types``) for every benchmark, and the arguments a
``reset`` message takes.

Messages follow OpenEnv's WebSocket protocol at ``/ws``: ``{"type": "reset" | "step" | "state" | "close" | "mcp",
"data": {...}}``; the server answers ``{"type": "observation", "data": {"observation": {...}, "reward", "done"}}``,
``{"type": "state", ...}`` or ``{"type": "error", "data": {"message", "code"}}``.

* **reset** ``data`` (`RESET_KEYS`): ``benchmark`` (a registered name: ``bfcl``, ``bfcl_multi_turn``,
  ``api_bank``, ``api_bank_plan``, ``api_bank_response``, ``alfworld``, ``bamboogle``, ``travelplanner``,
  ``travelplanner_two_stage``, ``twx``, or a plugin's; optional on a server of one benchmark), ``split`` (the loader's split name; default: the
  benchmark's default evaluation split), ``options`` (other loader options of that split, e.g.
  ``{"category": "simple_python"}`` for BFCL, ``{"level": 2}`` for API-Bank), then one of ``task_id`` (a task of that
  split), ``task`` (an *inline* task: a generated task in the benchmark's generation JSON, the format its
  environment policy writes, validated as the trainer validates generated tasks; ``parent_task_id`` names the
  seed task it derives from where the benchmark's validation uses one) or ``seed`` alone (the task drawn as the
  benchmark's Gymnasium env draws it after ``reset(seed=seed)``; the episode is seeded with it too). ``reading``:
  ``"official"`` (default; the official harness's reading of model text) or ``"lenient"``. ``env_options``: env
  constructor options (``max_steps``, Bamboogle's ``metric``, ...). ``task_sha256``: when given, the server
  refuses a task whose record differs (so a remote trainer knows both sides hold the same data).
* **step** ``data``: `SessionAction`: ``{"text": "<model text>"}`` (read under its session's reading) or
  ``{"tool_calls": [{"name": ..., "arguments": {...}}]}`` (structured calls, for the tool benchmarks).
* **observation**: `SessionObservation`: ``prompt`` (the latest observation text), ``messages`` (the chat
  messages of the agent's next turn), ``tools`` (the task's tools as OpenAI function schemas), ``task_id``,
  ``benchmark``, ``info`` (the benchmark's breakdown: ``success``, ``error`` and its metric parts), ``reward``,
  ``done``.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

__all__ = [
    "MAX_MESSAGE_BYTES", "MAX_NESTING", "RESET_KEYS", "SessionAction", "SessionObservation", "SessionState",
    "TOKEN_ENV", "check_reset_types", "json_safe", "openai_tools", "task_sha256",
]

TOKEN_ENV = "GENENV_SERVE_TOKEN"  # the environment variable holding the bearer token (server and clients)
RESET_KEYS = ("benchmark", "split", "options", "task_id", "task", "parent_task_id", "seed", "episode_id", "reading",
              "env_options", "task_sha256")
RESET_TYPES: dict[str, tuple[type, ...]] = {  # the JSON types each reset argument takes (None: leave it out)
    "benchmark": (str,), "split": (str,), "options": (dict,), "task_id": (str, int), "task": (dict, str),
    "parent_task_id": (str, int), "seed": (int,), "episode_id": (str,), "reading": (str,), "env_options": (dict,),
    "task_sha256": (str,)}
_JSON_NAMES = {str: "a string", int: "an integer", dict: "an object"}
MAX_MESSAGE_BYTES = 1 << 20  # a client message over this is refused with an error (its session goes on)
MAX_NESTING = 64  # arrays / objects nested deeper are refused (OpenEnv's error answer cannot serialize ~300 levels)


class ToolCallModel(BaseModel):
    """One structured call: ``name`` and JSON ``arguments``."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=200)
    arguments: dict[str, Any] = Field(default_factory=dict)


class SessionAction(Action):
    """One agent action: model ``text`` or structured ``tool_calls`` (exactly one of the two)."""

    text: str | None = Field(default=None, description="model text, read under its session's reading")
    tool_calls: list[ToolCallModel] | None = Field(default=None, max_length=64,
                                                   description="structured calls (the tool benchmarks)")

    @model_validator(mode="after")
    def _one_kind(self) -> "SessionAction":
        if (self.text is None) == (self.tool_calls is None):
            # a custom error keeps the error list JSON (a ValueError would sit in it as an object)
            raise PydanticCustomError("one_action_kind",
                                      "give exactly one of 'text' (model text) or 'tool_calls' (structured calls)")
        return self


class SessionObservation(Observation):
    """What the agent sees after reset or step (see the module docstring)."""

    benchmark: str = ""
    task_id: str = ""
    prompt: str = Field(default="", description="the latest observation text")
    messages: list[dict[str, str]] = Field(default_factory=list, description="chat messages of the next turn")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="OpenAI function schemas")
    info: dict[str, Any] = Field(default_factory=dict, description="success, error and the metric parts")


class SessionState(State):
    """A session's episode: ``benchmark``, ``task_id``, ``reading``, ``done`` and ``total_reward`` beside OpenEnv's
    ``episode_id`` and ``step_count``."""

    benchmark: str = ""
    task_id: str = ""
    reading: str = "official"
    done: bool = False
    total_reward: float = 0.0


BOOKKEEPING = ("id", "origin", "parent_id", "admitted_iteration")  # not part of the episode


def task_sha256(task_dict: dict[str, Any]) -> str:
    """SHA-256 (hex) of a task record's canonical JSON (keys sorted) without its bookkeeping fields (``id``,
    ``origin``, ``parent_id``, ``admitted_iteration``): two tasks with this digest present the same episode."""
    core = {k: v for k, v in task_dict.items() if k not in BOOKKEEPING}
    return hashlib.sha256(json.dumps(core, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def openai_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A task's tool descriptions as OpenAI function schemas ``{"type": "function", "function": {...}}`` (those
    already in that form are kept)."""
    out = []
    for tool in tools:
        if tool.get("type") == "function" and "function" in tool:
            out.append(tool)
        else:
            out.append({"type": "function", "function": tool})
    return out


def check_reset_types(arguments: dict[str, Any]) -> None:
    """Refuse a reset argument of the wrong JSON type (`RESET_TYPES`; ``null`` is always allowed, ``true`` /
    ``false`` are not integers).

    Raises:
        ValueError: naming the first such argument, the type it takes and the type it got.
    """
    for key, types in RESET_TYPES.items():
        value = arguments.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, types):
            wanted = " or ".join(_JSON_NAMES[t] for t in types)
            raise ValueError(f"reset argument {key!r} must be {wanted}, got {type(value).__name__} {value!r:.60}")


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON data (objects that JSON cannot hold become their ``str``)."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))
