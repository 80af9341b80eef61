"""API-Bank health and hospital APIs over ``HealthData.json``, ``Appointments.json`` and ``Symptom.json``.

HealthData: ``USER_ID -> [{time, <metric>: value, ...}]``; Appointments: ``8-digit id -> {patient_name, date,
doctor_name}``; Symptom: ``symptom -> [{name, description, aid}]``. Dates are normalised (short years
zero-padded) before comparison, as the benchmark's checkers do.
"""
from __future__ import annotations

import hashlib
from typing import Any

from genenv.benchmarks.api_bank.apis.base import Api, ApiError, norm_date, register_api, require_text

__all__ = []  # the API classes are reached by name through API_CLASSES (register_api)

DATETIME = "%Y-%m-%d %H:%M:%S"


@register_api
class AppointmentRegistration(Api):
    """``AppointmentRegistration(patient_name, date, doctor_name)`` -> a new 8-digit appointment id (derived from
    the inputs here; the original draws it at random, so results are compared without it)."""

    name, database = "AppointmentRegistration", "Appointments"

    def run(self, rt, patient_name: str, date: str, doctor_name: str) -> Any:
        if not patient_name.strip() or not doctor_name.strip():
            raise ApiError("Patient name or doctor name cannot be empty.")
        patient, doctor, day = patient_name.strip(), doctor_name.strip(), norm_date(date)
        table = rt.table("Appointments")
        for rec in table.values():
            if rec["patient_name"] == patient and rec["date"] == day:
                raise ApiError("This appointment has already been registered." if rec["doctor_name"] == doctor
                               else "This patient has already been registered in this day.")
        seed = f"{patient}|{day}|{doctor}"
        while True:
            appointment_id = str(10_000_000 + int(hashlib.sha1(seed.encode()).hexdigest(), 16) % 90_000_000)
            if appointment_id not in table:
                break
            seed += "+"
        table[appointment_id] = {"patient_name": patient, "date": day, "doctor_name": doctor}
        return appointment_id


@register_api
class CancelRegistration(Api):
    """``CancelRegistration(appointment_id)`` -> ``"success"``."""

    name, database = "CancelRegistration", "Appointments"

    def run(self, rt, appointment_id: str) -> Any:
        table = rt.table("Appointments")
        if appointment_id.strip() not in table:
            raise ApiError("The appointment ID is incorrect.")
        del table[appointment_id.strip()]
        return "success"


@register_api
class ModifyRegistration(Api):
    """``ModifyRegistration(appointment_id, new_appointment_date, new_appointment_doctor)`` -> ``"success"``."""

    name, database = "ModifyRegistration", "Appointments"

    def run(self, rt, appointment_id: str, new_appointment_date: str | None = None,
            new_appointment_doctor: str | None = None) -> Any:
        table = rt.table("Appointments")
        rec = table.get(appointment_id.strip())
        if rec is None:
            raise ApiError("The appointment ID does not exist.")
        day = norm_date(new_appointment_date) if new_appointment_date is not None else None
        doctor = new_appointment_doctor.strip() if new_appointment_doctor is not None else None
        if doctor == "":
            raise ApiError("Fail because the doctor name is empty.")
        if day is None and doctor is None:
            raise ApiError("Fail because no modification is made.")
        if day is not None and doctor is not None and day == rec["date"] and doctor == rec["doctor_name"]:
            raise ApiError("Fail because no modification is made.")
        if day is not None and day == rec["date"]:
            raise ApiError("Fail because date is not changed.")
        if doctor is not None and doctor == rec["doctor_name"]:
            raise ApiError("Fail because doctor is not changed.")
        if day is not None:
            rec["date"] = day
        if doctor is not None:
            rec["doctor_name"] = doctor
        return "success"


@register_api
class QueryRegistration(Api):
    """``QueryRegistration(patient_name, date)`` -> ``{appointment id: record}`` of that patient on that date."""

    name, database = "QueryRegistration", "Appointments"

    def run(self, rt, patient_name: str, date: str) -> Any:
        patient, day = patient_name.strip(), norm_date(date)
        found = {k: dict(r) for k, r in rt.table("Appointments").items()
                 if r["patient_name"] == patient and r["date"] == day}
        if not found:
            raise ApiError("No appointments found.")
        return found


@register_api
class RecordHealthData(Api):
    """``RecordHealthData(user_id, time, health_data=[{"name", "value"}, ...])`` -> ``"success"``."""

    name, database = "RecordHealthData", "HealthData"

    def run(self, rt, user_id: str, time: str, health_data: list | None = None) -> Any:
        user = require_text(user_id, "The user id cannot be empty.").upper()
        when = norm_date(time, DATETIME)
        if not health_data:
            raise ApiError("The health data cannot be empty.")
        if any(not isinstance(item, dict) or "name" not in item for item in health_data):
            raise ApiError("The health data has invalid format.")
        names = [item["name"] for item in health_data]
        if len(set(names)) != len(names):
            raise ApiError("The health data cannot contain duplicate items.")
        records = rt.table("HealthData").setdefault(user, [])
        values = {item["name"]: item.get("value") for item in health_data}
        same = next((r for r in records if r.get("time") == when), None)
        if same is not None:
            same.update(values)
        else:
            records.append({"time": when, **values})
        return "success"


@register_api
class QueryHealthData(Api):
    """``QueryHealthData(user_id, start_time, end_time)`` -> the user's records in the span (inclusive)."""

    name, database = "QueryHealthData", "HealthData"

    def run(self, rt, user_id: str, start_time: str, end_time: str) -> Any:
        user = require_text(user_id, "The user id cannot be empty.").upper()
        start, end = norm_date(start_time, DATETIME), norm_date(end_time, DATETIME)
        if start > end:
            raise ApiError("The start time cannot be later than the end time.")
        table = rt.table("HealthData")
        if user not in table:
            raise ApiError("The user id does not exist.")
        found = [dict(r) for r in table[user] if start <= r["time"] <= end]
        if not found:
            raise ApiError("There is no health data in the given time span.")
        return found


class _SymptomLookup(Api):
    database = "Symptom"
    fields: tuple[str, str] = ("name", "description")

    def run(self, rt, symptom: str) -> Any:
        key = require_text(symptom, "The symptom cannot be empty.").lower()
        table = rt.table("Symptom")
        if key not in table:
            raise ApiError("The symptom does not exist.")
        return [{f: item[f] for f in self.fields} for item in table[key]]


@register_api
class SymptomSearch(_SymptomLookup):
    """``SymptomSearch(symptom)`` -> ``[{name, description}]`` of the diseases with that symptom."""

    name = "SymptomSearch"


@register_api
class EmergencyKnowledge(_SymptomLookup):
    """``EmergencyKnowledge(symptom)`` -> ``[{name, aid}]`` first-aid knowledge for that symptom."""

    name = "EmergencyKnowledge"
    fields = ("name", "aid")
