"""API-Bank calendar APIs: agenda, alarm, reminder and meeting records of a user (identified by token).

Tables: ``Agenda.json`` (id -> {content, time, location, username}), ``Alarm.json`` (id -> {time, username}),
``Reminder.json`` (id -> {content, time, username}), ``Meeting.json`` (id -> {meeting_topic, start_time,
end_time, location, attendees, username}). A record is found by its user and content (or topic) or time, the
benchmark's rule.
"""
from __future__ import annotations

from typing import Any

from genenv.benchmarks.api_bank.apis.base import Api, ApiError, register_api, require_text, strict_datetime

__all__ = []  # the API classes are reached by name through API_CLASSES (register_api)


def _next_id(table: dict[str, Any]) -> str:
    return str(max((int(k) for k in table if str(k).isdigit()), default=0) + 1)


def _find(table: dict[str, Any], user: str, matches) -> str | None:
    return next((k for k, rec in table.items() if rec.get("username") == user and matches(rec)), None)


# ---------- agenda ----------
class _Agenda(Api):
    database = "Agenda"

    def locate(self, rt, token: str, content: str, time: str) -> tuple[dict, str | None]:
        if time:
            strict_datetime(time)
        user = rt.user_of(token)
        table = rt.table("Agenda")
        return table, _find(table, user, lambda r: r["content"] == content or r["time"] == time)

    @staticmethod
    def missing(content: str, time: str) -> ApiError:
        return ApiError(f"You have no agenda about {content}" if content else f"You have no agenda at time : {time}")


@register_api
class AddAgenda(_Agenda):
    """``AddAgenda(token, content, time, location)`` -> ``"success"``."""

    name = "AddAgenda"

    def run(self, rt, token: str, content: str, time: str, location: str = "") -> Any:
        strict_datetime(time)
        require_text(content, "Content should not be null")
        user = rt.user_of(token)
        table = rt.table("Agenda")
        table[_next_id(table)] = {"content": content, "time": time, "location": location, "username": user}
        return "success"


@register_api
class DeleteAgenda(_Agenda):
    """``DeleteAgenda(token, content, time, location)`` -> ``"success"`` (first record matching content or time)."""

    name = "DeleteAgenda"

    def run(self, rt, token: str, content: str = "", time: str = "", location: str = "") -> Any:
        table, key = self.locate(rt, token, content, time)
        if key is None:
            if content:
                raise ApiError(f"You have no meeting about {content}")
            if time:
                raise ApiError(f"You have no meeting at time : {time}")
            return "success"
        del table[key]
        return "success"


@register_api
class ModifyAgenda(_Agenda):
    """``ModifyAgenda(token, content, time, location)``: the record matching content or time gets the new values."""

    name = "ModifyAgenda"

    def run(self, rt, token: str, content: str = "", time: str = "", location: str = "") -> Any:
        table, key = self.locate(rt, token, content, time)
        if key is None:
            raise self.missing(content, time)
        table[key] = {"content": content, "time": time, "location": location, "username": table[key]["username"]}
        return "success"


@register_api
class QueryAgenda(_Agenda):
    """``QueryAgenda(token, content, time, location)`` -> the stored record matching content or time."""

    name = "QueryAgenda"

    def run(self, rt, token: str, content: str = "", time: str = "", location: str = "") -> Any:
        table, key = self.locate(rt, token, content, time)
        if key is None:
            raise self.missing(content, time)
        return dict(table[key])


# ---------- alarm ----------
class _Alarm(Api):
    database = "Alarm"

    @staticmethod
    def find(rt, token: str, time: str, missing: str = "You have no alarm clock at time : {time}") -> tuple[dict, str]:
        """The Alarm table and the key of the user's alarm at ``time``; ``ApiError(missing)`` if none."""
        strict_datetime(time)
        user = rt.user_of(token)
        table = rt.table("Alarm")
        key = _find(table, user, lambda r: r["time"] == time)
        if key is None:
            raise ApiError(missing.format(time=time))
        return table, key


@register_api
class AddAlarm(_Alarm):
    """``AddAlarm(token, time)`` -> ``"success"``."""

    name = "AddAlarm"

    def run(self, rt, token: str, time: str) -> Any:
        strict_datetime(time)
        user = rt.user_of(token)
        table = rt.table("Alarm")
        table[_next_id(table)] = {"time": time, "username": user}
        return "success"


@register_api
class DeleteAlarm(_Alarm):
    """``DeleteAlarm(token, time)`` -> ``"success"``."""

    name = "DeleteAlarm"

    def run(self, rt, token: str, time: str) -> Any:
        table, key = self.find(rt, token, time)
        del table[key]
        return "success"


@register_api
class ModifyAlarm(_Alarm):
    """``ModifyAlarm(token, from_time, to_time)`` -> ``"success"``."""

    name = "ModifyAlarm"

    def run(self, rt, token: str, from_time: str, to_time: str) -> Any:
        strict_datetime(to_time)
        table, key = self.find(rt, token, from_time, missing="You have no agenda at time : {time}")
        table[key] = {"time": to_time, "username": table[key]["username"]}
        return "success"


@register_api
class QueryAlarm(_Alarm):
    """``QueryAlarm(token, time)`` -> the stored alarm record."""

    name = "QueryAlarm"

    def run(self, rt, token: str, time: str) -> Any:
        table, key = self.find(rt, token, time)
        return dict(table[key])


# ---------- reminder ----------
class _Reminder(Api):
    database = "Reminder"

    @staticmethod
    def find(rt, token: str, content: str, time: str) -> tuple[dict, str]:
        strict_datetime(time)
        require_text(content, "Content should not be null")
        user = rt.user_of(token)
        table = rt.table("Reminder")
        key = _find(table, user, lambda r: r["content"] == content or r["time"] == time)
        if key is None:
            raise ApiError(f"You have no reminder about {content} or at time : {time}")
        return table, key


@register_api
class AddReminder(_Reminder):
    """``AddReminder(token, content, time)`` -> ``"success"``."""

    name = "AddReminder"

    def run(self, rt, token: str, content: str, time: str) -> Any:
        strict_datetime(time)
        require_text(content, "Content should not be null")
        user = rt.user_of(token)
        table = rt.table("Reminder")
        table[_next_id(table)] = {"content": content, "time": time, "username": user}
        return "success"


@register_api
class DeleteReminder(_Reminder):
    """``DeleteReminder(token, content, time)`` -> ``"success"``."""

    name = "DeleteReminder"

    def run(self, rt, token: str, content: str, time: str) -> Any:
        table, key = self.find(rt, token, content, time)
        del table[key]
        return "success"


@register_api
class ModifyReminder(_Reminder):
    """``ModifyReminder(token, content, time)``: the reminder matching content or time gets both values."""

    name = "ModifyReminder"

    def run(self, rt, token: str, content: str, time: str) -> Any:
        table, key = self.find(rt, token, content, time)
        table[key].update(content=content, time=time)
        return "success"


@register_api
class QueryReminder(_Reminder):
    """``QueryReminder(token, content, time)`` -> the stored reminder record."""

    name = "QueryReminder"

    def run(self, rt, token: str, content: str, time: str) -> Any:
        table, key = self.find(rt, token, content, time)
        return dict(table[key])


# ---------- meeting ----------
class _Meeting(Api):
    database = "Meeting"

    @staticmethod
    def find(rt, token: str, meeting_topic: str, start_time: str, end_time: str) -> tuple[dict, str]:
        for value in (start_time, end_time):
            if value:
                strict_datetime(value)
        if not (meeting_topic or "").strip() and not start_time:
            raise ApiError("Meeting Topic and start_time should not be null both")
        user = rt.user_of(token)
        table = rt.table("Meeting")
        key = _find(table, user, lambda r: r["meeting_topic"] == meeting_topic or r["start_time"] == start_time)
        if key is None:
            raise ApiError(f"You have no meeting about {meeting_topic}" if meeting_topic
                           else f"You have no meeting at time : {start_time}")
        return table, key


@register_api
class AddMeeting(_Meeting):
    """``AddMeeting(token, meeting_topic, start_time, end_time, location, attendees)`` -> ``"success"``."""

    name = "AddMeeting"

    def run(self, rt, token: str, meeting_topic: str, start_time: str, end_time: str, location: str = "",
            attendees: list | None = None) -> Any:
        strict_datetime(start_time)
        strict_datetime(end_time)
        require_text(meeting_topic, "Meeting Topic should not be null")
        user = rt.user_of(token)
        table = rt.table("Meeting")
        table[_next_id(table)] = {"meeting_topic": meeting_topic, "start_time": start_time, "end_time": end_time,
                                  "location": location, "attendees": list(attendees or []), "username": user}
        return "success"


@register_api
class DeleteMeeting(_Meeting):
    """``DeleteMeeting(token, meeting_topic, start_time, ...)``: deletes the meeting matching topic or start."""

    name = "DeleteMeeting"

    def run(self, rt, token: str, meeting_topic: str = "", start_time: str = "", end_time: str = "",
            location: str = "", attendees: list | None = None) -> Any:
        table, key = self.find(rt, token, meeting_topic, start_time, end_time)
        del table[key]
        return "success"


@register_api
class ModifyMeeting(_Meeting):
    """``ModifyMeeting(...)``: the meeting matching topic or start gets the new topic and times."""

    name = "ModifyMeeting"

    def run(self, rt, token: str, meeting_topic: str = "", start_time: str = "", end_time: str = "",
            location: str = "", attendees: list | None = None) -> Any:
        table, key = self.find(rt, token, meeting_topic, start_time, end_time)
        if meeting_topic:
            table[key]["meeting_topic"] = meeting_topic
        if start_time:
            table[key].update(start_time=start_time, end_time=end_time)
        return "success"


@register_api
class QueryMeeting(_Meeting):
    """``QueryMeeting(...)`` -> the stored meeting matching topic or start."""

    name = "QueryMeeting"

    def run(self, rt, token: str, meeting_topic: str = "", start_time: str = "", end_time: str = "",
            location: str = "", attendees: list | None = None) -> Any:
        table, key = self.find(rt, token, meeting_topic, start_time, end_time)
        return dict(table[key])
