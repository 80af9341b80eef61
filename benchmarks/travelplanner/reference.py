"""TravelPlanner reference information: the tool call behind each section of a query's reference information,
the sections' titles, and the information rendered from the database (the sole-planning prompt shows it; a
two-stage agent gathers it with the tools).

A section title names its tool and arguments ("Attractions in X", "Flight from A to B on D", "Self-driving from A
to B", ...); `SECTION_TITLES` holds each title pattern once, read by `reference_calls` and written by
`section_title`.
"""
from __future__ import annotations

import re
from typing import Any, Protocol

from genenv.envs.data import DataError

__all__ = ["TITLE_RES", "reference_calls", "reference_cities", "render_reference", "route_calls"]


class ToolDatabase(Protocol):
    """What the reference rendering uses of `genenv.benchmarks.travelplanner.db.TravelDB` (a protocol: the
    database module imports this one for its section titles, so this one does not import it)."""

    def tool(self, name: str, args: list[str]) -> str: ...

SECTION_TITLES = {  # tool -> the title of its section, with the call's arguments ({mode}: GoogleDistanceMatrix)
    "AttractionSearch": "Attractions in {0}",
    "RestaurantSearch": "Restaurants in {0}",
    "AccommodationSearch": "Accommodations in {0}",
    "CitySearch": "Cities in {0}",
    "FlightSearch": "Flight from {0} to {1} on {2}",
    "GoogleDistanceMatrix": "{mode} from {0} to {1}",
}
CITY_TOOLS = ("AttractionSearch", "RestaurantSearch", "AccommodationSearch")  # the searches of one destination
MODE_TITLES = {"self-driving": "Self-driving", "taxi": "Taxi"}  # GoogleDistanceMatrix mode -> its title word


def _title_pattern(template: str) -> re.Pattern:
    """The regex that reads a title written from ``template``: each argument a group, a date for FlightSearch's
    third, the mode one of `MODE_TITLES`' words."""
    fields = {"0": "(.+)", "1": "(.+)", "2": r"(\d{4}-\d{2}-\d{2})",
              "mode": "(" + "|".join(map(re.escape, MODE_TITLES.values())) + ")"}
    parts = re.split(r"\{(\w+)\}", template)
    return re.compile("^" + "".join(fields[p] if i % 2 else re.escape(p) for i, p in enumerate(parts)) + "$")


TITLE_RES = {tool: _title_pattern(template) for tool, template in SECTION_TITLES.items()}
"""tool -> the regex of its section title (groups: the call's arguments; GoogleDistanceMatrix: mode word first)."""


def reference_calls(descriptions: list[str], where: str) -> list[list[Any]]:
    """The tool call behind each reference section description: ``[[tool, [args]], ...]`` (the titles of
    `SECTION_TITLES` read back).

    Raises:
        DataError: a description of an unknown kind.
    """
    modes = {word: mode for mode, word in MODE_TITLES.items()}
    calls = []
    for d in descriptions:
        for tool, rx in TITLE_RES.items():
            found = rx.match(d)
            if found:
                if tool == "GoogleDistanceMatrix":
                    calls.append([tool, [found.group(2), found.group(3), modes[found.group(1)]]])
                else:
                    calls.append([tool, list(found.groups())])
                break
        else:
            raise DataError(f"{where}: unknown reference section {d[:60]!r}")
    return calls


def section_title(tool: str, args: list[str]) -> str:
    """The reference section title of a tool call (the benchmark's wording, `SECTION_TITLES`)."""
    if tool == "GoogleDistanceMatrix":
        return SECTION_TITLES[tool].format(*args, mode=MODE_TITLES.get(args[2], "Taxi"))
    return SECTION_TITLES[tool].format(*args)


def render_reference(calls: list[list[Any]], db: ToolDatabase) -> str:
    """The reference information of ``calls``: one ``Title:`` block per call with the tool's compact answer."""
    return "\n\n".join(f"{section_title(tool, args)}:\n{db.tool(tool, args)}" for tool, args in calls)


def route_calls(query: dict[str, Any], route: list[str]) -> list[list[Any]]:
    """The reference calls of a query travelling ``route`` (cities in order): each city's attractions,
    restaurants and accommodations, then per leg the flights on its date, self-driving and taxi (the layout of
    the benchmark's reference information)."""
    calls: list[list[Any]] = []
    for city in route:
        calls += [["AttractionSearch", [city]], ["RestaurantSearch", [city]], ["AccommodationSearch", [city]]]
    stops = [query["org"]] + list(route) + [query["org"]]
    for k in range(len(stops) - 1):
        date = query["date"][min(2 * k, len(query["date"]) - 1)]
        calls += [["FlightSearch", [stops[k], stops[k + 1], date]],
                  ["GoogleDistanceMatrix", [stops[k], stops[k + 1], "self-driving"]],
                  ["GoogleDistanceMatrix", [stops[k], stops[k + 1], "taxi"]]]
    return calls


def reference_cities(calls: list[list[Any]]) -> list[str]:
    """The destination cities of reference ``calls`` (those with an attraction / restaurant / accommodation
    search), in order."""
    return list(dict.fromkeys(args[0] for tool, args in calls if tool in CITY_TOOLS))
