"""The per-API correctness rules of API-Bank: one table, read from the released checkers.

Source: the ``check_api_call_correctness`` method of every API class of the released evaluator
(AlibabaResearch/DAMO-ConvAI ``api-bank/apis/*.py`` for levels 1-2, ``api-bank/lv3_apis/*.py`` for level 3,
commit 483554ea). Each entry of `CHECKS` says what that method compares, in our words:

- ``params``: the input parameters it names, each with the normalisation it applies before comparing
  (`RULES`); ``rest``: whether the other input parameters are compared raw as a dict (the checkers'
  ``response['input'] == groundtruth['input']``, after popping the named ones), else they are not compared;
- ``output``: how the outputs are compared (`OUTPUTS`); ``exception``: whether the exception texts are;
- ``success_only``: the Delete* checkers compare the named inputs only when both outputs are ``"success"`` and
  otherwise compare only output and exception;
- ``optional``: the input parameters that the API's released ``call`` gives a default or takes through
  ``**kwargs`` (ModifyRegistration, RecordHealthData, ForgotPassword, Translate); every other declared input
  parameter is **required**: the released ``ToolManager.api_call`` passes the parsed arguments to ``call(**kwargs)``,
  so a call without one raises ``TypeError: ... missing ... required positional argument`` (counted as
  ``MISS_INPUT_ARGUMENT`` by ``evaluator_by_json.py``, a wrong call in ``evaluator.py`` and ``lv3_evaluator.py``).
  The released parser (``api_call_extraction.py``: a quoted value is matched by ``(.+?)``, one character or more)
  cannot read an empty value, so an argument given as ``''`` is missing too (`required_missing`).

`check_result` applies an entry under one of two readings: ``"official"`` exactly as above, ``"lenient"``
the same with surrounding white space of every string argument ignored and extra optional arguments not
compared. Departures from the released checkers are listed in `DEPARTURES` with their reason (each is a
crash or a network call of the released code, not a different verdict on a call both can score).
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

__all__ = ["CHECKS", "DEPARTURES", "MISSING_ARGUMENT", "READINGS", "check_result", "is_empty", "required_missing"]

READINGS = ("official", "lenient")
MISSING_ARGUMENT = "MISS_INPUT_ARGUMENT"
"""How a result record's ``exception`` starts when the call left out (or gave empty) a required argument: the
released ``evaluator_by_json.py``'s name for that error."""


def _text(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


def _date(fmt: str) -> Callable[[Any], Any]:
    """The released ``format_check``: strip, zero-pad a short year, parse with ``fmt`` and print it back; a value
    that does not parse becomes a unique object (never equal to anything, as the released code's exception)."""
    def normalise(value: Any) -> Any:
        if not isinstance(value, str):
            return object()
        text = value.strip()
        parts = text.split("-")
        if len(parts) == 3 and len(parts[0]) != 4:
            text = "-".join([parts[0].zfill(4), *parts[1:]])
        try:
            return dt.datetime.strptime(text, fmt).strftime(fmt)
        except ValueError:
            return object()
    return normalise


def _month_day(value: Any) -> Any:
    """``QueryHistoryToday.filter_date_format``: ``MM-DD`` of a ``YYYY-MM-DD`` or ``MM-DD`` date."""
    full = _date("%Y-%m-%d")(value)
    if isinstance(full, str):
        return full[5:]
    return _date("%m-%d")(value)


def _devices(value: Any) -> Any:
    """``AddScene`` / ``ModifyScene``: devices with names stripped and lower-cased, descriptions stripped, sorted by
    name."""
    if not isinstance(value, list) or not all(isinstance(d, dict) for d in value):
        return value
    rows = [{**d, "name": str(d.get("name", "")).strip().lower(), "description": _text(d.get("description"))}
            for d in value]
    return sorted(rows, key=lambda d: d["name"])


def _words(fold: bool) -> Callable[[Any, Any], bool]:
    """Word-set Jaccard > 0.5 of the space-separated words (``str.split(" ")``, as the released checkers)."""
    def same(a: Any, b: Any) -> bool:
        if not isinstance(a, str) or not isinstance(b, str):
            return False
        if fold:
            a, b = a.lower(), b.lower()
        sa, sb = set(a.split(" ")), set(b.split(" "))
        return bool(sa | sb) and len(sa & sb) / len(sa | sb) > 0.5
    return same


def _by(normalise: Callable[[Any], Any]) -> Callable[[Any, Any], bool]:
    return lambda a, b: normalise(a) == normalise(b)


# rule name -> comparison of (predicted value, gold value); the released code's expression in the comment
RULES: Mapping[str, Callable[[Any, Any], bool]] = MappingProxyType({
    "raw": lambda a, b: a == b,                                                  # a == b
    "strip": _by(_text),                                                        # a.strip() == b.strip()
    "fold": _by(lambda v: v.strip().lower() if isinstance(v, str) else v),       # .strip().lower() / .upper().strip()
    "nospace": _by(lambda v: v.replace(" ", "") if isinstance(v, str) else v),   # .replace(' ', '')
    "words": _words(fold=False),                                                # Jaccard of .split(" ") > 0.5
    "words_fold": _words(fold=True),                                            # the same after .lower()
    "date": _by(_date("%Y-%m-%d")),                                             # format_check (date)
    "datetime": _by(_date("%Y-%m-%d %H:%M:%S")),                                # format_check (date and time)
    "month_day": _by(_month_day),                                               # filter_date_format
    "ignore": lambda a, b: True,                                                # popped, never compared
    "devices": _by(_devices),                                                   # the scene checkers' device loop
})


def _canonical_list(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    return sorted(json.dumps(v, sort_keys=True, ensure_ascii=False) for v in value)


# output rule -> comparison of (predicted output, gold output)
OUTPUTS: Mapping[str, Callable[[Any, Any], bool]] = MappingProxyType({
    "raw": lambda a, b: a == b,
    "ignore": lambda a, b: True,
    "present": lambda a, b: a is not None,                              # GetToday: output != None
    "unless_gold_none": lambda a, b: not (b is None and a is not None),  # random ids: only "gold None, ours not"
    "unordered": lambda a, b: _canonical_list(a) == _canonical_list(b),  # SearchEngine: both sorted
    "hotels": lambda a, b: isinstance(a, dict) and isinstance(b, dict) and a.get("hotels") == b.get("hotels"),
    "salary_after_tax": lambda a, b: isinstance(a, dict) and isinstance(b, dict)
    and a.get("salary_after_tax") == b.get("salary_after_tax"),
})


@dataclass(frozen=True)
class Check:
    """One API's ``check_api_call_correctness`` (see the module docstring). ``source``: the released file."""

    source: str
    params: Mapping[str, str] = field(default_factory=dict)
    rest: bool = True
    output: str = "raw"
    exception: bool = True
    success_only: bool = False
    optional: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [r for r in self.params.values() if r not in RULES] + \
            ([self.output] if self.output not in OUTPUTS else [])
        if unknown:
            raise ValueError(f"{self.source}: unknown rule(s) {unknown}")


def _all(source: str, optional: tuple[str, ...] = ()) -> Check:
    """``input``, ``output`` and ``exception`` all equal (the most common checker)."""
    return Check(source, optional=optional)


def _only(source: str, output: str = "raw", exception: bool = True, optional: tuple[str, ...] = (),
          **params: str) -> Check:
    """Only the named inputs (with their rules), the output and the exception are compared."""
    return Check(source, params=params, rest=False, output=output, exception=exception, optional=optional)


def _deleted(source: str) -> Check:
    return Check(source, params={"time": "raw"}, rest=False, success_only=True)


_LV12 = "api-bank/apis/"
_LV3 = "api-bank/lv3_apis/"

CHECKS: Mapping[str, Mapping[str, Check]] = MappingProxyType({
    "lv12": MappingProxyType({
        "AddAgenda": _only(_LV12 + "add_agenda.py", content="words", time="raw", location="raw"),
        "AddAlarm": _all(_LV12 + "add_alarm.py"),
        "AddMeeting": Check(_LV12 + "add_meeting.py", params={"meeting_topic": "words"}),
        "AddReminder": _only(_LV12 + "add_reminder.py", content="words_fold", time="raw"),
        "AppointmentRegistration": _only(_LV12 + "appointment_registration.py", output="unless_gold_none",
                                         patient_name="strip", date="date", doctor_name="strip"),
        "BookHotel": _all(_LV12 + "book_hotel.py"),
        "Calculator": _only(_LV12 + "calculator.py", formula="nospace"),
        "CancelRegistration": _only(_LV12 + "cancel_registration.py", appointment_id="strip"),
        "CancelTimedSwitch": _only(_LV12 + "cancel_timed_switch.py", name="fold", time="datetime"),
        "DeleteAccount": _all(_LV12 + "delete_account.py"),
        "DeleteAgenda": _deleted(_LV12 + "delete_agenda.py"),
        "DeleteAlarm": _all(_LV12 + "delete_alarm.py"),
        "DeleteMeeting": _deleted(_LV12 + "delete_meeting.py"),
        "DeleteReminder": _deleted(_LV12 + "delete_reminder.py"),
        "DeleteScene": _only(_LV12 + "delete_scene.py", name="fold"),
        "Dictionary": _only(_LV12 + "dictionary.py"),
        "DocumentQA": _only(_LV12 + "document_qa.py", url="strip", question="strip"),
        "EmergencyKnowledge": _only(_LV12 + "emergency_knowledge.py", symptom="fold"),
        "ForgotPassword": _all(_LV12 + "forgot_password.py",
                               optional=("username", "email", "verification_code", "new_password")),
        "GetToday": Check(_LV12 + "get_today.py", output="present"),
        "GetUserToken": _all(_LV12 + "get_user_token.py"),
        "ImageCaption": _all(_LV12 + "image_caption.py"),
        "ModifyAgenda": _only(_LV12 + "modify_agenda.py", content="words", time="raw", location="raw"),
        "ModifyAlarm": _all(_LV12 + "modify_alarm.py"),
        "ModifyMeeting": Check(_LV12 + "modify_meeting.py", params={"meeting_topic": "words"}),
        "ModifyPassword": _all(_LV12 + "modify_password.py"),
        "ModifyRegistration": _only(_LV12 + "modify_registration.py", appointment_id="strip",
                                    new_appointment_date="date", new_appointment_doctor="strip",
                                    optional=("new_appointment_date", "new_appointment_doctor")),
        "ModifyReminder": _only(_LV12 + "modify_reminder.py", content="words_fold", time="raw"),
        "OpenBankAccount": _all(_LV12 + "open_bank_account.py"),
        "PlayMusic": _only(_LV12 + "play_music.py", exception=False),
        "QueryAgenda": _only(_LV12 + "query_agenda.py", content="words", time="raw", location="raw"),
        "QueryAlarm": _all(_LV12 + "query_alarm.py"),
        "QueryBalance": _only(_LV12 + "query_balance.py", token="strip"),
        "QueryHealthData": _only(_LV12 + "query_health_data.py", user_id="fold", start_time="datetime",
                                 end_time="datetime"),
        "QueryHistoryToday": _only(_LV12 + "query_history_today.py", date="month_day"),
        "QueryMeeting": Check(_LV12 + "query_meeting.py", params={"meeting_topic": "words"}),
        "QueryRegistration": _only(_LV12 + "query_registration.py", patient_name="strip", date="date"),
        "QueryReminder": _only(_LV12 + "query_reminder.py", content="words_fold", time="raw"),
        "QueryScene": _only(_LV12 + "query_scene.py", name="fold"),
        "QueryStock": _only(_LV12 + "query_stock.py", stock_code="fold", date="date"),
        "RecordHealthData": _only(_LV12 + "record_health_data.py", user_id="fold", time="datetime",
                                  optional=("health_data",)),
        "RegisterUser": Check(_LV12 + "register_user.py", output="unless_gold_none"),
        "SearchEngine": _only(_LV12 + "search_engine.py", output="unordered"),
        "SendEmail": _only(_LV12 + "send_email.py", receiver="fold", subject="strip", content="strip"),
        "SpeechRecognition": _all(_LV12 + "speech_recognition.py"),
        "SymptomSearch": _only(_LV12 + "symptom_search.py", symptom="fold"),
        "TimedSwitch": _only(_LV12 + "timed_switch.py", name="fold", time="datetime", on="raw"),
        "ToolSearcher": _only(_LV12 + "tool_search.py"),
        "Translate": _only(_LV12 + "translate.py", src="raw", optional=("src_lang", "tgt_lang")),
        "Wiki": _only(_LV12 + "wiki.py"),
    }),
    "lv3": MappingProxyType({
        "AccountInfo": _all(_LV3 + "account_info.py"),
        "AddMeeting": Check(_LV3 + "add_meeting.py", params={"meeting_topic": "words"}),
        "Calculator": _only(_LV3 + "calculator.py", formula="nospace"),
        "ClothingRecommendation": _all(_LV3 + "clothing_recommandation.py"),
        "EmailReminder": Check(_LV3 + "email_reminder.py", params={"content": "ignore"}),
        "FlightSearch": _all(_LV3 + "flight_search.py"),
        "Geocoding": _all(_LV3 + "geocoding.py"),
        "GetOccupationSalary": _all(_LV3 + "get_occupation_salary.py"),
        "GetWeatherForCoordinates": _all(_LV3 + "get_weather.py"),
        "HotelAvailability": _only(_LV3 + "hotel_availability.py", output="hotels", exception=False,
                                   destination="raw", check_in_date="raw", check_out_date="raw"),
        "LikeCount": _all(_LV3 + "like_count.py"),
        "MovieRecommendations": _all(_LV3 + "movie_recommandation.py"),
        "NearbyRestaurants": Check(_LV3 + "nearby_restaurants.py", output="ignore", exception=False),
        "OrganizationMembers": _all(_LV3 + "organization_members.py"),
        "PersonalInfoUpdate": Check(_LV3 + "update_account_info.py", exception=False),
        "QueryMeeting": _all(_LV3 + "query_meeting.py"),
        "TaxCalculator": _only(_LV3 + "tax_calculator.py", output="salary_after_tax", salary="raw"),
        "ToolSearcher": _only(_LV3 + "tool_search.py"),
        "TravelStatus": _all(_LV3 + "travel_status.py"),
        "UserMoviePreferences": _all(_LV3 + "users_movie_preference.py"),
        "UserPosts": _all(_LV3 + "user_posts.py"),
        "UserWatchedMovies": _all(_LV3 + "user_watched_movies.py"),
    }),
})

# Where `check_result` knowingly parts from the released checkers, and why (no verdict on a call that both
# can score differs because of these).
DEPARTURES: Mapping[str, str] = MappingProxyType({
    "non-text argument": "a number or list where a checker calls .strip() / .split() crashes the released code; "
                         "here it is compared as it is",
    "empty word sets": "two empty free texts divide by zero in the released Jaccard; here they do not match",
    "output without the key": "HotelAvailability and TaxCalculator read a key of the output, which crashes the "
                              "released code when the call failed (output None); here it is not a match",
})


def is_empty(value: Any, reading: str = "official") -> bool:
    """Whether an argument value counts as not given: ``None``, or ``""`` (the released parser cannot read an empty
    value); under the ``"lenient"`` reading also a string of white space only."""
    if value is None:
        return True
    return isinstance(value, str) and not (value.strip() if reading == "lenient" else value)


def required_missing(suite: str, name: str, declared: Any, arguments: Mapping[str, Any],
                     reading: str = "official") -> list[str]:
    """The required input parameters of API ``name`` (every declared one but the `Check`'s ``optional``)
    that ``arguments`` leaves out or gives empty (`is_empty`), in declaration order; ``[]`` for an API
    without a table entry. ``declared``: the API description's input parameter names."""
    check = CHECKS.get(suite, {}).get(name)
    optional = check.optional if check else tuple(declared)
    return [k for k in declared if k not in optional and is_empty(arguments.get(k), reading)]


def _stripped(record_input: Any) -> dict[str, Any]:
    if not isinstance(record_input, dict):
        return {}
    return {k: _text(v) for k, v in record_input.items()}


def check_result(suite: str, predicted: dict[str, Any], gold: dict[str, Any],
                 reading: str = "official") -> tuple[bool, str]:
    """Whether a predicted call's result record counts as the gold call's, by the gold API's `CHECKS` entry.

    Args:
        suite: ``"lv12"`` or ``"lv3"`` (which released API set the gold API belongs to).
        predicted, gold: result records ``{"api_name", "input", "output", "exception"}``.
        reading: ``"official"`` (the released checker's rule) or ``"lenient"`` (the same, with surrounding white
            space of string arguments ignored and extra optional arguments not compared).

    Returns:
        ``(ok, reason)``; ``reason`` names the first difference (empty when ``ok``). Never raises on bad records.

    Raises:
        ValueError: unknown ``reading``.
    """
    if reading not in READINGS:
        raise ValueError(f"unknown reading {reading!r}; choose one of {READINGS}")
    name = gold.get("api_name")
    check = CHECKS.get(suite, {}).get(name)
    if check is None:
        return False, f"unknown gold API {name!r} in suite {suite!r}"
    if predicted.get("api_name") != name:
        return False, f"called {predicted.get('api_name')!r}, expected {name!r}"
    if str(predicted.get("exception") or "").startswith(MISSING_ARGUMENT):  # a TypeError before any checker runs
        return False, str(predicted["exception"])
    lenient = reading == "lenient"
    p_in = _stripped(predicted.get("input")) if lenient else (predicted.get("input") or {})
    g_in = _stripped(gold.get("input")) if lenient else (gold.get("input") or {})
    p_out, g_out = predicted.get("output"), gold.get("output")
    p_exc, g_exc = predicted.get("exception"), gold.get("exception")
    if check.success_only and not (p_out == "success" and g_out == "success"):
        if p_out != g_out or p_exc != g_exc:
            return False, f"output/exception {str(p_out)[:80]!r}/{p_exc!r} != {str(g_out)[:80]!r}/{g_exc!r}"
        return True, ""
    if not check.success_only:
        if check.exception and p_exc != g_exc:
            return False, f"exception {p_exc!r} != {g_exc!r}"
        if not OUTPUTS[check.output](p_out, g_out):
            return False, f"output {str(p_out)[:120]!r} != {str(g_out)[:120]!r} (compared {check.output})"
    for param, rule in check.params.items():
        if not RULES[rule](p_in.get(param), g_in.get(param)):
            return False, (f"argument {param}={str(p_in.get(param))[:80]!r} does not match "
                           f"{str(g_in.get(param))[:80]!r} (compared {rule})")
    if check.rest:
        keys = set(g_in) if lenient else set(p_in) | set(g_in)
        for key in sorted(keys - set(check.params)):
            if p_in.get(key) != g_in.get(key):
                return False, f"argument {key}={str(p_in.get(key))[:80]!r} does not match {str(g_in.get(key))[:80]!r}"
    return True, ""
