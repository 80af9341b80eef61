"""TravelPlanner specs (sole planning and two-stage): the official rates, labelled, and environment-generated queries.

Metrics of a unit (`genenv.benchmarks.travelplanner.checker.aggregate`, the harness's ``eval.py``): delivery rate,
commonsense micro / macro, hard micro / macro, final pass rate, the per-constraint pass rates, the mean training
reward, and ``paper_mean`` = the GenEnv paper's TravelPlanner number (mean of the four micro / macro rates), the
headline. Denominators are the unit's queries, as in the harness (an undelivered plan fails everything).

Generated queries: the environment policy writes the query's fields as JSON (``org``, ``dest``, ``days``,
``visiting_city_number``, ``date``, ``people_number``, ``budget``, ``local_constraint``). Admission requires
(1) strict JSON with those fields, (2) real places of the database and well-formed values
(`validate_fields`), and (3) the constructive search
(`genenv.benchmarks.travelplanner.search`) finding a plan over the real database that passes every commonsense and
hard constraint; that plan is the task's gold, and the reference information is that of its route. The search may
use every city of the ``dest`` state, and the flights of the rebuilt flights table
(`genenv.benchmarks.travelplanner.db`): a generated route or date that no benchmark query covers has no flights,
only self-driving and taxis. The query text is written from the fields (`render_query`), so it states
exactly what is checked. A near-duplicate is a query with the same origin, destination, length, start date,
group size and local constraints and a budget within 10 %.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

from genenv.benchmarks.spec import BenchmarkSpec, Metric
from genenv.benchmarks.task_writer import Rejection, extract_json_object
from genenv.benchmarks.bounded_schema import json_object
from genenv.benchmarks.travelplanner.checker import COMMONSENSE, HARD, LABELS, PlanVerdict, aggregate
from genenv.benchmarks.travelplanner.data import query_task, travelplanner_dir
from genenv.benchmarks.travelplanner.db import load_database
from genenv.benchmarks.travelplanner.env import TravelPlannerTwoStageEnv
from genenv.benchmarks.travelplanner.query import (
    CITY_NUMBER,
    CONSTRAINT_KEYS,
    CUISINES,
    DAYS,
    HOUSE_RULES,
    MAX_PEOPLE,
    QUERY_FIELDS,
    ROOM_TYPES,
    TRANSPORT_RULES,
    VALIDATION_REASONS,
    YEAR,
    level_of,
    render_query,
    validate_fields,
)
from genenv.benchmarks.travelplanner.reference import route_calls
from genenv.benchmarks.travelplanner.search import SEARCH_FAILURES, search_plan
from genenv.envs.task import Task

__all__ = ["TravelPlannerSpec", "TravelPlannerTwoStageSpec"]

CHECKER = "our checker (official rules, whole names, rebuilt flights; docs/travelplanner.md)"
SPLIT_NOTE = {"validation": "validation 102 with fields (42 medium + 60 hard)",
              "train": "train 45 (fields read from text)", "generated": "generated queries"}


class TravelPlannerSpec(BenchmarkSpec):
    """TravelPlanner (Xie et al. 2024), sole-planning mode: the reference information is given."""

    name = "travelplanner"
    mode = "sole_planning"
    baseline_column = "travelplanner"
    paper_protocol = ("GenEnv paper: mean of commonsense micro, commonsense macro, hard micro and hard macro pass "
                      "rates (the paper states neither the split nor the mode)")
    paper_options: dict[str, Any] | None = {"split": "validation"}
    seed_options: dict[str, Any] = {}
    rejection_reasons = VALIDATION_REASONS + SEARCH_FAILURES

    def eval_units(self, options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """One unit over the split's queries (``options``: loader options such as ``level`` or ``days``;
        ``split`` fixes the unit's split whatever the run's)."""
        opts = {k: v for k, v in options.items() if k != "mode"}
        return [(f"{self.name}/{self.mode}", opts)]

    def protocol(self, trajectories: Sequence[Any]) -> str:
        """The label of a unit's numbers: mode, split, checker, decoding."""
        split = trajectories[0].task.split if trajectories else "validation"
        return f"TravelPlanner {self.mode.replace('_', '-')}, {SPLIT_NOTE.get(split, split)}, {CHECKER}, greedy"

    def summarize(self, unit: str, trajectories: Sequence[Any]) -> list[Metric]:
        """The official rates (see the module docstring) and the per-constraint pass rates."""
        n = len(trajectories)
        if n == 0:
            return []
        queries = [t.task.metadata["query"] for t in trajectories]
        rates = aggregate([PlanVerdict.from_info(t.info, q) for t, q in zip(trajectories, queries)], queries)
        label = self.protocol(trajectories)
        metrics = [
            Metric(f"{unit}/delivery_rate", rates.delivery_rate, n, f"delivery rate; {label}"),
            Metric(f"{unit}/commonsense_micro", rates.commonsense_micro, n, f"CS micro (checks passed / 8n); {label}"),
            Metric(f"{unit}/commonsense_macro", rates.commonsense_macro, n, f"CS macro (all 8 pass); {label}"),
            Metric(f"{unit}/hard_micro", rates.hard_micro, n, f"HD micro (passed / applicable); {label}"),
            Metric(f"{unit}/hard_macro", rates.hard_macro, n, f"HD macro (all applicable pass); {label}"),
            Metric(f"{unit}/final_pass", rates.final_pass, n, f"final pass rate (every constraint); {label}"),
            Metric(f"{unit}/paper_mean", rates.paper_mean, n,
                   f"GenEnv paper's score = mean(CS micro, CS macro, HD micro, HD macro); {label}"),
            Metric(f"{unit}/reward", sum(float(t.reward) for t in trajectories) / n, n,
                   f"mean training reward (share of constraints passed, 0 unless all days filled); {label}"),
        ]
        for check in COMMONSENSE + HARD:
            passed, counted = rates.per_check[check]
            if counted:
                metrics.append(Metric(f"{unit}/{'cs' if check in COMMONSENSE else 'hd'}/{check}", passed / counted,
                                      n, f"{LABELS[check]} pass rate over the {counted} queries it applies to"))
        return metrics

    def headline(self, metrics: Sequence[Metric]) -> Metric | None:
        """``paper_mean``, the number the paper's Table 1 reports for TravelPlanner."""
        return next((m for m in metrics if m.key.endswith("/paper_mean")), None)

    def paper_metric(self, metrics: Sequence[Metric]) -> Metric | None:
        """``<name>/<mode>/paper_mean`` on the validation queries, ``None`` on another split. The paper names
        neither split nor mode: validation is the split whose annotations are public (the test set is scored only
        by the benchmark's leaderboard), and either mode's number counts, its label naming the mode."""
        return next((m for m in metrics if m.key == f"{self.name}/{self.mode}/paper_mean"
                     and SPLIT_NOTE["validation"] in m.protocol), None)

    # ----- task generation -----
    generation_system_prompt = (
        "You write new travel-planning requests for an agent. A request is one JSON object with keys: \"org\" "
        "(a US city), \"dest\" (a US city for a 3-day trip; a US state for a 5- or 7-day trip), \"days\" (3, 5 or 7), "
        "\"visiting_city_number\" (1, 2 or 3 for 3, 5 or 7 days), \"date\" (the list of the trip's consecutive dates "
        "in March 2022, YYYY-MM-DD), \"people_number\" (1-8), \"budget\" (US dollars for the whole trip) and "
        "\"local_constraint\" with keys \"house rule\" (one of " + ", ".join(HOUSE_RULES) + " or null), "
        "\"cuisine\" (null or a list from " + ", ".join(CUISINES) + "), \"room type\" (one of "
        + ", ".join(ROOM_TYPES) + " or null) and \"transportation\" (" + " or ".join(TRANSPORT_RULES) + " or null). "
        "A smaller budget and more constraints make a request harder. Reply with exactly one JSON object.")

    def generation_schema(self, seeds: Sequence[Task]) -> dict[str, Any]:
        """The query's fields in `QUERY_FIELDS` order: ``org`` a city of the database, ``dest`` a city or
        state of it, ``days`` 3 / 5 / 7, ``visiting_city_number`` 1-3, ``date`` 3-7 dates of March 2022,
        ``people_number`` 1-`MAX_PEOPLE`, ``budget`` a positive integer, and the local constraints from
        their vocabularies (or null). The day / city-number / date-count agreement is the validator's."""
        db = load_database(travelplanner_dir(self.data_dir))
        cities = sorted(db.city_state)

        def nullable(values):
            return {"anyOf": [{"type": "null"}, {"enum": list(values)}]}
        constraints = json_object({
            "house rule": nullable(HOUSE_RULES),
            "cuisine": {"anyOf": [{"type": "null"}, {"type": "array", "items": {"enum": list(CUISINES)},
                                                     "minItems": 1, "maxItems": len(CUISINES)}]},
            "room type": nullable(ROOM_TYPES), "transportation": nullable(TRANSPORT_RULES)})
        return json_object({
            "org": {"enum": cities}, "dest": {"enum": cities + sorted(db.state_cities)},
            "days": {"enum": list(DAYS)}, "visiting_city_number": {"enum": sorted(set(CITY_NUMBER.values()))},
            "date": {"type": "array", "items": {"type": "string", "pattern": rf"^{YEAR}-03-[0-3][0-9]$"},
                     "minItems": min(DAYS), "maxItems": max(DAYS)},
            "people_number": {"type": "integer", "minimum": 1, "maximum": MAX_PEOPLE},
            "budget": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
            "local_constraint": constraints})

    def demonstrable(self, task: Task) -> bool:
        """Tasks with a gold plan (a demonstrated request is one a plan exists for)."""
        return task.gold is not None and "query" in task.metadata

    def skill_of(self, task: Task) -> str:
        """Trip length and constraint type: ``"<days>-day <constraints>"``, the local constraints the query
        sets (``+``-joined) or ``budget`` when it sets none."""
        q = task.metadata["query"]
        set_keys = [k.replace(" ", "_") for k in CONSTRAINT_KEYS if (q.get("local_constraint") or {}).get(k)]
        return f"{q['days']}-day {'+'.join(set_keys) or 'budget'}"

    def as_generation(self, task: Task) -> dict[str, Any]:
        """The query's fields in the generation format."""
        q = task.metadata["query"]
        return {k: q[k] for k in QUERY_FIELDS}

    def parse_generated(self, text: str, task_id: str, iteration: int, parent: Task | None) -> Task | Rejection:
        """Strict JSON -> fields validated over the database -> the search finds a plan passing every constraint
        -> `Task` with that plan as gold (see the module docstring)."""
        obj = extract_json_object(text)
        if isinstance(obj, Rejection):
            return obj
        db = load_database(travelplanner_dir(self.data_dir))
        problem = validate_fields(obj, db.city_state, db.state_cities)
        if problem:
            return Rejection(*problem)
        fields = {k: obj[k] for k in QUERY_FIELDS}
        fields["local_constraint"] = {k: obj["local_constraint"][k] for k in CONSTRAINT_KEYS}
        fields["level"] = level_of(fields["local_constraint"], fields["people_number"])
        fields["query"] = render_query(fields)
        found = search_plan(fields, db)
        if found.plan is None:
            return Rejection(found.reason, found.detail[:200])
        return query_task(task_id, "train", fields, route_calls(fields, found.route), found.plan, db,
                          mode=self.mode, search={"reason": "", "detail": "", "cost": found.cost}, origin="generated",
                          parent_id=parent.id if parent else None, admitted_iteration=iteration)

    def near_duplicate(self, task: Task, pool: Sequence[Task], threshold: float = 0.0) -> Rejection | None:
        """Same origin, destination, length, start date, group size and local constraints, and a budget within
        10 % of a pool query's."""
        key, budget = _query_key(task)
        for other in pool:
            if "query" not in other.metadata:
                continue
            other_key, other_budget = _query_key(other)
            if other_key == key and abs(other_budget - budget) <= 0.1 * max(other_budget, 1):
                return Rejection("near_duplicate", f"same trip as pool task {other.id}")
        return None


def _query_key(task: Task) -> tuple[tuple, float]:
    q = task.metadata["query"]
    return ((q["org"], q["dest"], q["days"], q["date"][0], q["people_number"],
             json.dumps(q["local_constraint"], sort_keys=True)), float(q["budget"]))


class TravelPlannerTwoStageSpec(TravelPlannerSpec):
    """TravelPlanner, two-stage mode: the agent gathers the information with the six tools, then plans."""

    name = "travelplanner_two_stage"
    mode = "two_stage"
    paper_options = None  # ``--benchmarks paper`` runs sole planning; this mode's paper_mean still counts

    def protocol(self, trajectories: Sequence[Any]) -> str:
        """As sole planning, plus the step limit."""
        steps = trajectories[0].info.get("max_steps", TravelPlannerTwoStageEnv.default_max_steps) if trajectories \
            else TravelPlannerTwoStageEnv.default_max_steps
        return super().protocol(trajectories) + f", <= {steps} steps"
