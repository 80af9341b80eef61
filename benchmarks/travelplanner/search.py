"""Constructive search for a TravelPlanner plan that passes every constraint (our own method, not the benchmark's).

Used for two things: the gold plan of a query that has no annotated plan (the 102 validation queries, whose only
plans in the data are example outputs, not gold), and the admission test of environment-generated queries (a
query is admitted only if this search finds a plan that the checker passes; that plan becomes its gold).

The search builds the benchmark's standard itinerary shape and picks the cheapest options that satisfy the
query, then asks the checker (`genenv.benchmarks.travelplanner.checker.evaluate_plan`) for the verdict:

1. **Cities.** A 3-day trip visits ``dest``. Longer trips visit ``visiting_city_number`` cities, drawn from the
   cities the caller allows (the cities of the query's reference information), else all cities of the ``dest``
   state except ``org``. A city qualifies if it has an accommodation that fits (room type, house rule, minimum
   nights <= 2), at least three restaurants and an attraction. Every ordered choice of qualifying cities is a
   candidate route.
2. **Shape.** City k is reached on day 2k+1 (a travel day "from A to B"), fully visited on day 2k+2 (breakfast,
   one attraction, lunch, dinner) and left on day 2k+3; each city has two nights at one accommodation; the last
   day returns to ``org``. Legs leave on dates 0, 2, 4, 6 of the trip.
3. **Transport.** Either every leg self-driving, or every leg the cheaper of a flight on that date and a taxi
   (the two families the Non-conflicting Transportation rule allows), honouring ``no flight`` / ``no
   self-driving``; the cheaper feasible family is taken.
4. **Meals.** Requested cuisines are covered first, greedily (the restaurant covering most missing cuisines,
   then the cheapest), using the full day's meals and, if needed, the travel days' meals in that city (dinner on
   arrival, breakfast and lunch on departure); the remaining full-day meals are the cheapest unused restaurants.
5. **Order.** Routes are tried by estimated cost (cheapest accommodation + three cheapest meals per city +
   transport); the first whose plan the checker passes is returned. Once the estimate exceeds the budget, the
   search stops: no cheaper plan of this shape exists.

Only the rows the tools show are used (`shown_rows`, and the first
`MAX_ROWS` flights), so a gold plan uses only information the agent can see.
The shape is a restriction: a query might be solvable only with another shape (e.g. three nights in one city);
such queries are reported as not found, never guessed.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Sequence

import pandas as pd

from genenv.benchmarks.travelplanner.checker import evaluate_plan
from genenv.benchmarks.travelplanner.db import (
    MAX_ROWS, PEOPLE_PER_VEHICLE, TravelDB, cuisines_of, house_rule_fits, people_per_unit, room_type_fits, shown_rows,
)

__all__ = ["SEARCH_FAILURES", "search_plan"]

SEARCH_FAILURES = ("no_candidate_city", "no_transport", "cuisine_unavailable", "over_budget", "checker_failed")
NIGHTS_PER_CITY = 2
MAX_ROUTES = 40  # routes built and checked before giving up (they are tried cheapest first)


@dataclass
class SearchResult:
    """Outcome of `search_plan`: ``plan`` (day records) and its ``cost``, or ``reason`` (one of
    `SEARCH_FAILURES`) with a ``detail``; ``route`` = the cities visited."""

    plan: list[dict[str, Any]] | None
    reason: str = ""
    detail: str = ""
    cost: float | None = None
    route: list[str] = field(default_factory=list)


@dataclass
class _City:
    name: str
    accommodation: pd.Series
    night_cost: float
    restaurants: pd.DataFrame  # shown rows, cheapest first
    attractions: pd.DataFrame


@dataclass
class _Leg:
    mode: str
    text: str
    cost: float


def _city_option(db: TravelDB, city: str, query: dict[str, Any]) -> _City | None:
    people, c = int(query["people_number"]), query["local_constraint"]
    acc = shown_rows(db, "accommodations", city)
    acc = acc[acc["minimum nights"] <= NIGHTS_PER_CITY]
    if c.get("room type"):
        acc = acc.loc[[room_type_fits(kind, c["room type"]) for kind in acc["room type"]]]
    if c.get("house rule"):
        acc = acc.loc[[house_rule_fits(rules, c["house rule"]) for rules in acc["house_rules"]]]
    restaurants = shown_rows(db, "restaurants", city).sort_values("Average Cost", kind="stable")
    attractions = shown_rows(db, "attractions", city)
    if acc.empty or len(restaurants) < 3 or attractions.empty:
        return None
    costs = acc["price"] * [people_per_unit(people, occ) for occ in acc["maximum occupancy"]]
    best = int(costs.to_numpy().argmin())
    return _City(city, acc.iloc[best], float(costs.iloc[best]), restaurants, attractions)


def _leg_options(db: TravelDB, origin: str, dest: str, date: str, query: dict[str, Any]) -> dict[str, _Leg]:
    people, banned = int(query["people_number"]), query["local_constraint"].get("transportation")
    out: dict[str, _Leg] = {}
    if banned != "no flight":
        flights = db.flights_on(origin, dest, date).head(MAX_ROWS["flights"])
        if not flights.empty:
            f = flights.iloc[int(flights["Price"].to_numpy().argmin())]
            out["flight"] = _Leg("flight", f"Flight Number: {f['Flight Number']}, from {origin} to {dest}, "
                                           f"Departure Time: {f['DepTime']}, Arrival Time: {f['ArrTime']}",
                                 float(f["Price"]) * people)
    for mode, label in (("self-driving", "Self-driving"), ("taxi", "Taxi")):
        if mode == "self-driving" and banned == "no self-driving":
            continue
        drive = db.drive(origin, dest, mode)
        if drive.cost is not None:
            out[mode] = _Leg(mode, f"{label}, from {origin} to {dest}, duration: {drive.duration}, "
                                   f"distance: {drive.distance}, cost: {drive.cost}",
                             float(drive.cost) * people_per_unit(people, PEOPLE_PER_VEHICLE[mode]))
    return out


def _transport(legs: list[dict[str, _Leg]]) -> list[_Leg] | None:
    """The cheaper of the all-self-driving family and the flight-or-taxi family, or ``None``."""
    families = []
    if all("self-driving" in leg for leg in legs):
        families.append([leg["self-driving"] for leg in legs])
    if all(("flight" in leg) or ("taxi" in leg) for leg in legs):
        families.append([min((leg[m] for m in ("flight", "taxi") if m in leg), key=lambda x: x.cost)
                         for leg in legs])
    return min(families, key=lambda f: sum(x.cost for x in f)) if families else None


def _meals(route: list[_City], cuisines: Sequence[str] | None) -> dict[tuple[int, str], tuple[str, pd.Series]] | None:
    """Slot ``(day index, meal)`` -> ``(city, restaurant row)``; ``None`` if the cuisines cannot be covered."""
    base = {k: [(2 * k + 1, "breakfast"), (2 * k + 1, "lunch"), (2 * k + 1, "dinner")] for k in range(len(route))}
    extra = {k: [(2 * k, "dinner"), (2 * k + 2, "breakfast"), (2 * k + 2, "lunch")] for k in range(len(route))}
    chosen: dict[tuple[int, str], tuple[str, pd.Series]] = {}
    used: set[tuple[str, str]] = set()
    missing = list(cuisines or [])
    while missing:
        best = None
        for k, city in enumerate(route):
            if not (base[k] or extra[k]):
                continue
            for _, row in city.restaurants.iterrows():
                if (city.name, row["Name"]) in used:
                    continue
                offered = cuisines_of(row)
                gain = sum(c in offered for c in missing)
                if gain and (best is None or (gain, -row["Average Cost"]) > (best[0], -best[2]["Average Cost"])):
                    best = (gain, k, row)
        if best is None:
            return None
        _, k, row = best
        slot = (base[k] or extra[k]).pop(0)
        chosen[slot] = (route[k].name, row)
        used.add((route[k].name, row["Name"]))
        offered = cuisines_of(row)
        missing = [c for c in missing if c not in offered]
    for k, city in enumerate(route):
        rows = (r for _, r in city.restaurants.iterrows() if (city.name, r["Name"]) not in used)
        for slot in base[k]:
            row = next(rows, None)
            if row is None:
                return None
            chosen[slot] = (city.name, row)
            used.add((city.name, row["Name"]))
    return chosen


def _build(query: dict[str, Any], route: list[_City], legs: list[_Leg],
           meals: dict[tuple[int, str], tuple[str, pd.Series]]) -> list[dict[str, Any]]:
    names = [query["org"]] + [c.name for c in route] + [query["org"]]
    plan = []
    for i in range(int(query["days"])):
        k = i // 2  # the city reached on day 2k+1 and left on day 2k+3 (0-based day 2k, 2k+2)
        travel = i % 2 == 0
        city = route[min(k, len(route) - 1)]
        day = {"days": i + 1,
               "current_city": f"from {names[k]} to {names[k + 1]}" if travel else city.name,
               "transportation": legs[k].text if travel else "-",
               "breakfast": "-", "attraction": "-", "lunch": "-", "dinner": "-",
               "accommodation": f"{route[k].accommodation['NAME']}, {route[k].name}" if k < len(route) else "-"}
        if not travel:
            day["attraction"] = f"{city.attractions.iloc[0]['Name']}, {city.name};"
        for meal in ("breakfast", "lunch", "dinner"):
            if (i, meal) in meals:
                where, row = meals[(i, meal)]
                day[meal] = f"{row['Name']}, {where}"
        plan.append(day)
    return plan


def search_plan(query: dict[str, Any], db: TravelDB, cities: Sequence[str] | None = None,
                max_routes: int = MAX_ROUTES) -> SearchResult:
    """Find a plan for ``query`` that passes every commonsense and hard constraint (see the module docstring).

    Args:
        query: the query's fields (validated beforehand).
        db: the sandbox.
        cities: the destination cities allowed (e.g. those of the reference information); default: ``dest`` for
            3 days, else the state's cities other than ``org``.
        max_routes: routes to build and check before giving up.
    Returns:
        a `SearchResult` with the plan, or with the reason none was found.
    """
    n = int(query["visiting_city_number"])
    if cities is None:
        cities = [query["dest"]] if query["days"] == 3 else [c for c in db.state_cities.get(query["dest"], [])
                                                              if c != query["org"]]
    options = [o for o in (_city_option(db, c, query) for c in dict.fromkeys(cities)) if o is not None]
    if len(options) < n:
        return SearchResult(None, "no_candidate_city",
                            f"{len(options)} of {len(cities)} cities have a fitting accommodation, 3 restaurants "
                            f"and an attraction; {n} needed")
    dates = query["date"]
    leg_cache: dict[tuple[str, str, str], dict[str, _Leg]] = {}

    def legs_of(route: tuple[_City, ...]) -> list[_Leg] | None:
        stops = [query["org"]] + [c.name for c in route] + [query["org"]]
        options_ = []
        for k in range(len(stops) - 1):
            key = (stops[k], stops[k + 1], dates[min(2 * k, len(dates) - 1)])
            if key not in leg_cache:
                leg_cache[key] = _leg_options(db, *key, query)
            options_.append(leg_cache[key])
        return _transport(options_)

    people = int(query["people_number"])
    candidates = []
    for route in itertools.permutations(options, n):
        legs = legs_of(route)
        if legs is None:
            continue
        estimate = sum(NIGHTS_PER_CITY * c.night_cost + float(c.restaurants["Average Cost"].head(3).sum()) * people
                       for c in route) + sum(leg.cost for leg in legs)
        candidates.append((estimate, len(candidates), route, legs))
    if not candidates:
        return SearchResult(None, "no_transport", "no route has a transport option on every leg")
    candidates.sort(key=lambda x: (x[0], x[1]))
    last = SearchResult(None, "over_budget", f"the cheapest route costs at least {candidates[0][0]:.0f} "
                                             f"> budget {query['budget']}")
    for estimate, _, route, legs in candidates[:max_routes]:
        if estimate > float(query["budget"]):
            break
        meals = _meals(list(route), query["local_constraint"].get("cuisine"))
        if meals is None:
            last = SearchResult(None, "cuisine_unavailable", "the route's shown restaurants do not serve "
                                f"{', '.join(query['local_constraint']['cuisine'])}")
            continue
        plan = _build(query, list(route), legs, meals)
        verdict = evaluate_plan(query, plan, db)
        if verdict.final_pass:
            return SearchResult(plan, cost=verdict.cost, route=[c.name for c in route])
        if verdict.hard_evaluated and not verdict.hard.get("budget", (True, ""))[0] and verdict.commonsense_pass:
            last = SearchResult(None, "over_budget", verdict.hard["budget"][1])
        else:
            last = SearchResult(None, "checker_failed", "; ".join(verdict.failures())[:300])
    return last
