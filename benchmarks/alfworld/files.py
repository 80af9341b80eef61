"""ALFWorld game files: the task types, the data layout, and reading a ``game.tw-pddl`` file and its folder name.

Layout: ``<data_dir>/alfworld/json_2.1.1/<split>/<task_type>-<Object>-<MovableRecep>-<Recep>-<scene>/<trial>/
game.tw-pddl`` (the official ALFWorld 0.4 layout; ``shared/data/SOURCES.md`` section 2).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from genenv.envs.data import DataError, read_json

__all__ = ["GAMES_DIR", "GAME_FILE", "TASK_TYPES", "folder_goal", "read_game", "task_sentence"]

TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")
"""ALFWorld's six task types, in the order of its config ids 1-6 (``alfred_tw_env.TASK_TYPES``)."""
GAMES_DIR = "json_2.1.1"
GAME_FILE = "game.tw-pddl"
_TASK_LINE_RE = re.compile(r"Your task is to: ([^\"\\]*)")



def folder_goal(folder: str) -> dict[str, str]:
    """The goal encoded in an ALFWorld game folder name ``<task_type>-<Object>-<MovableRecep>-<Recep>-<scene>``
    (ALFRED's ``pddl_params``): ``{"task_type", "object", "receptacle", "toggle", "mrecep", "scene"}``. For
    ``look_at_obj_in_light`` the last target is the light (``toggle``), not a receptacle.

    Raises:
        DataError: the name does not have five ``-``-separated parts with a known task type.
    """
    parts = folder.split("-")
    if len(parts) != 5 or parts[0] not in TASK_TYPES:
        raise DataError(f"ALFWorld game folder {folder!r} is not <task_type>-<Object>-<MovableRecep>-<Recep>-<scene>")
    task_type, obj, mrecep, recep, scene = parts
    goal = {"task_type": task_type, "object": obj, "receptacle": "", "toggle": "",
            "mrecep": "" if mrecep == "None" else mrecep, "scene": scene}
    goal["toggle" if task_type == "look_at_obj_in_light" else "receptacle"] = recep
    return goal


def read_game(path: str | Path) -> dict[str, Any]:
    """A ``game.tw-pddl`` file: ``pddl_domain``, ``grammar``, ``pddl_problem``, ``walkthrough``.

    Raises:
        DataError: missing file, invalid JSON or missing fields (names the file).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"missing ALFWorld game file {path}")
    data = read_json(path)
    missing = [k for k in ("pddl_domain", "grammar", "pddl_problem", "walkthrough") if k not in data]
    if missing:
        raise DataError(f"{path}: missing field(s) {missing}; not an ALFWorld 0.4 game file")
    return data


def task_sentence(grammar: str) -> str:
    """The goal sentence of a game (``"examine the alarmclock with the desklamp."``) from its grammar.

    Raises:
        DataError: the grammar has no ``Your task is to:`` line.
    """
    found = _TASK_LINE_RE.search(grammar)
    if not found:
        raise DataError("ALFWorld grammar has no 'Your task is to:' line")
    return found.group(1).strip()
