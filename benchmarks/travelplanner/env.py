"""TravelPlanner environments: sole planning (``genenv/TravelPlanner-v0``) and two-stage tool use
(``genenv/TravelPlannerTwoStage-v0``), over the benchmark's real database.

Tasks come from `genenv.benchmarks.travelplanner.data`. A query's reference information is the list of its
sections ("Attractions in X", "Flight from A to B on D", "Self-driving from A to B", ...); each section is the
answer of one of the six tools (`tool`) and is rendered by it,
compactly, from the database (`genenv.benchmarks.travelplanner.reference`). Sole planning shows all of it in
the prompt; in two-stage mode the agent calls the tools itself, and the gold action sequence is those calls
followed by the plan.

Action: a plan (`genenv.benchmarks.travelplanner.plan`). Reward (both modes):
`genenv.benchmarks.travelplanner.checker.plan_reward`, the share of the query's constraints the plan passes
(0 unless it fills exactly ``days`` days); ``success`` = the benchmark's final pass (every constraint). ``info``:
``delivered``, ``cs`` / ``hd`` (check -> bool), ``cost``, ``passed``, ``total``, ``final_pass``, ``level``,
``error`` (the first failed check, or the parse error).
"""
from __future__ import annotations

from typing import Any

from genenv.benchmarks.travelplanner.checker import evaluate_plan, plan_reward
from genenv.benchmarks.travelplanner.data import MODES, SPLITS, load_travelplanner_tasks, travelplanner_dir
from genenv.benchmarks.travelplanner.db import TOOL_ALIASES, TOOLS, TravelDB, load_database
from genenv.benchmarks.travelplanner.plan import normalize_plan, parse_plan, plan_text
from genenv.benchmarks.travelplanner.prompts import (DEMO_PLAN, DEMO_QUERY, DEMO_REFERENCE, SOLE_SYSTEM,
                                                     TWO_STAGE_SYSTEM, sole_user_turn)
from genenv.envs.base import InvalidAction, MultiStepTaskEnv, TaskEnv, parse_or_invalid
from genenv.envs.parsing import ActionParseError, ToolCall, parse_bracket_call
from genenv.envs.task import Task

__all__ = ["SPLIT_OPTIONS", "TravelPlannerEnv", "TravelPlannerTwoStageEnv", "make_travelplanner_env"]

SPLIT_OPTIONS = tuple({"split": s} for s in SPLITS)


class _Scoring:
    """What both modes share: the database of the env's data directory and the plan verdict as reward + info."""

    db: TravelDB

    def plan_outcome(self, task: Task, plan: list[dict[str, Any]] | None,
                     parse_error: str = "") -> tuple[float, dict[str, Any]]:
        """``(reward, info)`` of ``plan`` (``None``: nothing delivered, with ``parse_error`` as the reason)."""
        query = task.metadata["query"]
        verdict = evaluate_plan(query, plan, self.db)
        reward = plan_reward(verdict, query, plan)
        failures = verdict.failures()
        error = parse_error or ("" if verdict.final_pass else (failures[0] if failures else "not a final pass"))
        return reward, {**verdict.to_info(), "success": verdict.final_pass, "error": error, "reward": reward,
                        "level": task.metadata.get("level"), "days": query.get("days")}


class TravelPlannerEnv(_Scoring, TaskEnv):
    """``genenv/TravelPlanner-v0``, sole planning: the reference information is in the prompt and one step
    submits the plan (see the module docstring).

    Constructor: ``split``, ``level``, ``days``, ``data_dir``, ``limit`` or ``tasks``; ``mode`` must be
    ``sole_planning`` (``gymnasium.make`` with ``mode="two_stage"`` returns `TravelPlannerTwoStageEnv`).
    """

    benchmark = "travelplanner"
    action_kind = "structured"
    ability = "planning"

    def __init__(self, tasks: list[Task] | None = None, split: str | None = "validation", data_dir: str | None = None,
                 limit: int | None = None, render_mode: str | None = None, level: str | None = None,
                 days: int | None = None, mode: str = "sole_planning", parsing: str = "official"):
        if mode != "sole_planning":
            raise ValueError(f"{type(self).__name__} is the sole-planning env; use make_travelplanner_env for {mode!r}")
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         parsing=parsing,
                         level=level, days=days)
        self.db = load_database(travelplanner_dir(data_dir))

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, level: str | None = None,
                   days: int | None = None, **_: Any) -> list[Task]:
        """See `load_travelplanner_tasks` (mode ``sole_planning``)."""
        return load_travelplanner_tasks(split=split, data_dir=data_dir, level=level, days=days)

    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """System instructions, one demonstrated turn (`DEMO_QUERY` and its plan), then the task's
        reference information and query."""
        return [{"role": "system", "content": SOLE_SYSTEM},
                {"role": "user", "content": sole_user_turn(DEMO_REFERENCE, DEMO_QUERY)},
                {"role": "assistant", "content": plan_text(DEMO_PLAN)},
                {"role": "user", "content": sole_user_turn(task.metadata["reference"], task.prompt)}]

    @classmethod
    def parse_lenient(cls, text: str) -> list[dict[str, Any]] | InvalidAction:
        """The plan in model text (`parse_plan`)."""
        return parse_or_invalid(parse_plan, text)

    def score(self, task: Task, action: Any) -> tuple[float, dict[str, Any]]:
        """The checker's verdict on the plan (reward: share of constraints passed; success: final pass)."""
        return self.plan_outcome(task, normalize_plan(action))

    def score_invalid(self, task: Task, action: InvalidAction) -> tuple[float, dict[str, Any]]:
        """No plan delivered: every check fails, reward 0, the parse error as ``error``."""
        return self.plan_outcome(task, None, action.reason or "no plan")

    @classmethod
    def gold_action(cls, task: Task) -> list[dict[str, Any]] | None:
        """The gold plan (annotated or searched; ``None`` when the search found none)."""
        return task.gold

    @classmethod
    def gold_text(cls, task: Task, turn: int = 0) -> str:
        """The gold plan as a JSON list (empty text when there is none)."""
        return plan_text(task.gold) if task.gold else ""


class PlanSubmission(list):
    """A parsed plan submitted in a two-stage episode (a ``list`` of day records); it ends the episode."""


class TravelPlannerTwoStageEnv(_Scoring, MultiStepTaskEnv):
    """``genenv/TravelPlannerTwoStage-v0``: the agent calls the six tools over the database, one per step
    (``ToolName[args]``; the observation is the tool's answer), then submits the plan, which ends the episode
    and is scored as in sole planning. ``max_steps`` (default 30, the benchmark's ReAct limit) truncates an
    episode; the last allowed step without a plan scores as no plan delivered.

    Constructor: as `TravelPlannerEnv`, plus ``max_steps``.
    """

    benchmark = "travelplanner_two_stage"
    action_kind = "structured"
    ability = "planning"
    accepts_tool_calls = True

    @classmethod
    def action_from_calls(cls, calls: list[ToolCall]) -> ToolCall:
        """One database call (a step runs one tool); its arguments by the tool's parameter names in
        `TOOLS` order, or in the order given when they are unnamed.

        Raises:
            ValueError: not exactly one call, an unknown tool, or arguments that are not the tool's parameters.
        """
        if len(calls) != 1:
            raise ValueError(f"one tool call per step, got {len(calls)}")
        call = calls[0]
        name = TOOL_ALIASES.get(call.name, call.name)
        if name not in TOOLS:
            raise ValueError(f"unknown tool {call.name!r}; the tools are {', '.join(TOOLS)}")
        params, given = TOOLS[name], dict(call.arguments)
        if set(given) == set(params):
            given = {p: given[p] for p in params}
        elif len(given) != len(params):
            raise ValueError(f"{name} takes {', '.join(params)}, got {', '.join(given) or 'no argument'}")
        return ToolCall(name, given)
    default_max_steps = 30

    def __init__(self, tasks: list[Task] | None = None, split: str | None = "validation", data_dir: str | None = None,
                 limit: int | None = None, render_mode: str | None = None, max_steps: int | None = None,
                 level: str | None = None, days: int | None = None, mode: str = "two_stage", parsing: str = "official"):
        if mode != "two_stage":
            raise ValueError(f"{type(self).__name__} is the two-stage env; got mode {mode!r}")
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         parsing=parsing,
                         max_steps=max_steps, level=level, days=days)
        self.db = load_database(travelplanner_dir(data_dir))

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, level: str | None = None,
                   days: int | None = None, **_: Any) -> list[Task]:
        """See `load_travelplanner_tasks` (mode ``two_stage``)."""
        return load_travelplanner_tasks(split=split, data_dir=data_dir, level=level, days=days, mode="two_stage")

    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """The tool instructions with an example, then the query."""
        return [{"role": "system", "content": TWO_STAGE_SYSTEM}, {"role": "user", "content": f"Query: {task.prompt}"}]

    @classmethod
    def parse_lenient(cls, text: str) -> ToolCall | PlanSubmission | InvalidAction:
        """A tool call ``Name[args]`` (`parse_bracket_call`), else a plan
        (`parse_plan`), else an `InvalidAction` naming both problems."""
        try:
            return parse_bracket_call(text, TOOLS, TOOL_ALIASES)
        except ActionParseError as call_error:
            try:
                return PlanSubmission(parse_plan(text))
            except ActionParseError as plan_error:
                return InvalidAction(f"{call_error}; and no plan: {plan_error}", text if isinstance(text, str) else "")

    def start(self, task: Task) -> None:
        """Nothing to set up: the database is read-only and an episode keeps no state beyond the base class's."""

    def transition(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        """Run one tool call, or score the submitted plan and end the episode."""
        if isinstance(action, list) and not isinstance(action, PlanSubmission) and all(
                isinstance(d, dict) for d in action) and action:
            action = PlanSubmission(action)
        if isinstance(action, PlanSubmission):
            reward, info = self.plan_outcome(self.task, normalize_plan(list(action)))
            return "The plan was submitted.", reward, True, info
        if not isinstance(action, ToolCall):
            obs, error = "Invalid action: expected ToolName[arguments] or the plan.", "not a tool call or a plan"
        else:
            try:
                obs, error = self.db.tool(action.name, list(action.arguments.values())), ""
            except ValueError as exc:
                obs, error = f"Error: {exc}", str(exc)
        if self.steps + 1 >= self.max_steps:  # the last step: no plan was delivered
            _, end = self.plan_outcome(self.task, None, error or "no plan submitted within the step limit")
            return obs, 0.0, False, end
        return obs, 0.0, False, {"success": False, "error": error, "delivered": False}

    def invalid_observation(self, action: InvalidAction) -> str:
        """The parse problem, and what a valid action looks like."""
        return f"Invalid action: {action.reason}. Reply with one ToolName[arguments] or the plan as a JSON list."

    @classmethod
    def gold_action(cls, task: Task) -> list[str]:
        """``CitySearch[State]`` for a state destination, the reference calls as actions, then the gold plan."""
        query = task.metadata["query"]
        steps = [f"CitySearch[{query['dest']}]"] if query["days"] > 3 else []
        steps += [f"{tool}[{', '.join(args)}]" for tool, args in task.metadata["reference_calls"]]
        return steps + [plan_text(task.gold) if task.gold else ""]

    idle_text = "[]"


def make_travelplanner_env(mode: str = "sole_planning", **kwargs: Any) -> TaskEnv:
    """What ``gymnasium.make("genenv/TravelPlanner-v0", mode=...)`` calls: `TravelPlannerEnv` for
    ``sole_planning``, `TravelPlannerTwoStageEnv` for ``two_stage``.

    Raises:
        ValueError: unknown mode.
    """
    if mode == "two_stage":
        return TravelPlannerTwoStageEnv(**kwargs)
    if mode == "sole_planning":
        return TravelPlannerEnv(**kwargs)
    raise ValueError(f"unknown TravelPlanner mode {mode!r}; choose one of {MODES}")
