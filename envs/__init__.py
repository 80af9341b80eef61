"""The environment framework: the `Task` record, the base envs, the action parsers and spaces, the
wrappers, the lazy registry, data location and the episode workers. It knows no benchmark and no trainer.

Importing this package registers every ``genenv/<Name>-v0`` with Gymnasium by entry-point string
(`genenv.envs.registry.load_plugins`): no benchmark module is imported until ``gymnasium.make`` (or
`env_class`) asks for it. It imports neither torch nor verl.
"""
from genenv.envs.base import InvalidAction, MultiStepTaskEnv, TaskEnv
from genenv.envs.data import DataError, resolve_data_dir
from genenv.envs.parsing import ActionParseError, ToolCall, parse_free_text, parse_tool_calls
from genenv.envs.registry import ENVS, env_entry, load_plugins, register_env, render_messages
from genenv.envs.task import Task
from genenv.envs.wrappers import PromptWindow, TextActionWrapper, make_text_env

load_plugins()

__all__ = [
    "ActionParseError", "DataError", "ENVS", "InvalidAction", "MultiStepTaskEnv", "PromptWindow", "Task", "TaskEnv",
    "TextActionWrapper", "ToolCall", "env_entry", "load_plugins", "make_text_env", "parse_free_text",
    "parse_tool_calls", "register_env", "render_messages", "resolve_data_dir",
    # the public modules
    "base", "data", "extras", "parsing", "registry", "spaces", "tables", "task", "text_games", "verl_rows", "workers",
    "wrappers",
]
