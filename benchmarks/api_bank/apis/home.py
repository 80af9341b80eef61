"""API-Bank smart-home and media APIs over ``TimeSwitch.json`` (device -> [{time, on}]) and ``Scenes.json``
(scene -> [{name, description}]). Device and scene names are matched case-insensitively."""
from __future__ import annotations

from typing import Any

from genenv.benchmarks.api_bank.apis.base import Api, ApiError, norm_date, register_api, require_text

__all__ = []  # the API classes are reached by name through API_CLASSES (register_api)

DATETIME = "%Y-%m-%d %H:%M:%S"


@register_api
class TimedSwitch(Api):
    """``TimedSwitch(name, time, on)`` -> ``"success"``: schedules switching device ``name`` on/off at ``time``."""

    name, database = "TimedSwitch", "TimeSwitch"

    def run(self, rt, name: str, time: str, on: bool) -> Any:
        device = require_text(name, "Name cannot be empty.").lower()
        when = norm_date(time, DATETIME)
        entries = rt.table("TimeSwitch").setdefault(device, [])
        same = next((e for e in entries if e["time"] == when), None)
        if same is not None:
            same["on"] = on
        else:
            entries.append({"time": when, "on": on})
        return "success"


@register_api
class CancelTimedSwitch(Api):
    """``CancelTimedSwitch(name, time)`` -> ``"success"``: removes the device's switch scheduled at ``time``."""

    name, database = "CancelTimedSwitch", "TimeSwitch"

    def run(self, rt, name: str, time: str) -> Any:
        device = require_text(name, "name cannot be empty.").lower()
        when = norm_date(time, DATETIME)
        table = {k.lower(): v for k, v in rt.table("TimeSwitch").items()}
        if device not in table:
            raise ApiError("device name does not exist.")
        entries = table[device]
        same = next((e for e in entries if e["time"] == when), None)
        if same is None:
            raise ApiError("time does not exist.")
        entries.remove(same)
        return "success"


class _Scene(Api):
    database = "Scenes"

    @staticmethod
    def key(rt, name: str) -> tuple[dict, str]:
        scene = require_text(name, "Scene name cannot be empty.").lower()
        return rt.table("Scenes"), scene


@register_api
class QueryScene(_Scene):
    """``QueryScene(name)`` -> the scene's devices ``[{name, description}]`` (outputs compared case-insensitively:
    the recorded results capitalise device names that the database stores in lower case)."""

    name = "QueryScene"

    def run(self, rt, name: str) -> Any:
        table, scene = self.key(rt, name)
        if scene not in table:
            raise ApiError("Scene not found.")
        return [dict(d) for d in table[scene]]


@register_api
class DeleteScene(_Scene):
    """``DeleteScene(name)`` -> ``"success"``."""

    name = "DeleteScene"

    def run(self, rt, name: str) -> Any:
        table, scene = self.key(rt, name)
        if scene not in table:
            raise ApiError("The scene does not exist.")
        del table[scene]
        return "success"


@register_api
class PlayMusic(Api):
    """``PlayMusic(music_name)`` -> ``"music://<name, lower-cased>"``."""

    name = "PlayMusic"

    def run(self, rt, music_name: str) -> Any:
        return f"music://{require_text(music_name, 'The music name cannot be empty.').lower()}"
