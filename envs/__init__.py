"""Benchmark environments (Gymnasium), the shared action parser and the :class:`Task` record.

Importing this package discovers the env modules and registers every ``genenv/<Name>-v0`` with Gymnasium. It
imports neither torch nor verl.
"""
from genenv.envs.base import InvalidAction, MultiStepTaskEnv, TaskEnv
from genenv.envs.data import DataError, resolve_data_dir
from genenv.envs.parsing import ActionParseError, ToolCall, parse_free_text, parse_tool_calls
from genenv.envs.registry import ENVS, env_entry, register_all, register_env, render_messages
from genenv.envs.task import Task
from genenv.envs.wrappers import TextActionWrapper

register_all()

__all__ = [
    "ActionParseError", "DataError", "ENVS", "InvalidAction", "MultiStepTaskEnv", "Task", "TaskEnv",
    "TextActionWrapper", "ToolCall", "env_entry", "parse_free_text", "parse_tool_calls", "register_all",
    "register_env", "render_messages", "resolve_data_dir",
]
