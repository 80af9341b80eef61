"""Which goals a scene can take before any search: ALFWorld's goal grammar filtered by fast-downward's relaxed
reachability, and the translator's own verdict on a goal it decides without search.

fast-downward's translator (``fast_downward.pddl2sas``, run by TextWorld's PDDL back-end on every ``load``) first
explores the *relaxed* task, where actions only add facts: the atoms it reaches are every fact any plan could ever
make true (a superset of the truly reachable ones). In the plain translation TextWorld uses (full encoding, no
filtering) each reachable fluent atom is one SAS variable value ``Atom <predicate>(<args>)``; static facts
(``objectType``, ``canContain``, ``heatable``, ...) stay in the parsed task's initial state.

A goal is *feasible* in a scene when every top-level conjunct of its PDDL (ALFWorld's template for its task type)
has a binding whose static literals hold initially and whose fluent literals are all relaxed-reachable, and the
goal does not already hold in the initial state. A goal that is not feasible has no plan (relaxed reachability is
necessary for a plan) or is met before any command, so the environment policy's grammar need not offer it
(`feasible_goals`); the planner still decides the goals that are feasible. For example, no scene's
``canContain`` lists ``ShelfType LaptopType``, so "put a laptop in shelf" is never offered.

When the translator itself proves a goal unreachable (no relaxed plan, a goal against a mutex, or a goal simplified
to false), it emits a trivial task over one variable ``dummy(val1) / dummy(val2)`` (``fast_downward/translate/
translate.py: trivial_task``), and TextWorld fails to read it (``KeyError: 'val1'`` in
``textworld/envs/pddl/logic/__init__.py: Atom.get_fact``); `translator_verdict` reads that task instead.
"""
from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any

from genenv.benchmarks.alfworld.files import TASK_TYPES, read_game
from genenv.benchmarks.alfworld.game import translate
from genenv.benchmarks.alfworld.goals import (GOAL_SLOTS, best_binding, goal_targets, parse_goal, scene_inventory,
                                              with_goal)

__all__ = ["feasible_goals", "translator_verdict"]

Literal = namedtuple("Literal", "predicate args negated")
"""A goal literal with its arguments substituted (what `best_binding`
reads: ``predicate``, ``args``, ``negated``)."""

_PLACEHOLDER = {"object": "Genenvobject", "receptacle": "Genenvreceptacle", "toggle": "Genenvtoggle"}
_TRIVIAL = "Atom dummy(val1)"  # the only variable of the translator's trivial task


def scene_facts(data: dict[str, Any]) -> tuple[dict[str, set[tuple]], dict[str, set[tuple]]] | None:
    """``(initial, reachable)`` facts of a game's scene, each ``{predicate: {(arg, ...), ...}}`` in the
    translator's lower case: the initial state, and the initial state plus every relaxed-reachable fluent atom.
    ``None`` when the game's own translation is the trivial task (its goal decided without search)."""
    task, sas = translate(data["pddl_domain"], data["pddl_problem"])
    if _TRIVIAL in sas:
        return None
    initial: dict[str, set[tuple]] = {}
    for atom in task.init:
        if getattr(atom, "predicate", "=") != "=":  # skip (= ...) and the total-cost assignment
            initial.setdefault(atom.predicate, set()).add(tuple(atom.args))
    reachable = {k: set(v) for k, v in initial.items()}
    for line in sas.splitlines():
        if line.startswith("Atom "):
            name, args = line[5:].split("(", 1)
            reachable.setdefault(name, set()).add(tuple(a.strip() for a in args[:-1].split(",") if a.strip()))
    return initial, reachable


def _templates(data: dict[str, Any]) -> dict[str, tuple[list[list], set[str]]]:
    """Each task type's goal (parts and fluent predicates, see `parse_goal`), parsed once with placeholder
    type names that `feasible_goals` substitutes."""
    out = {}
    for task_type in TASK_TYPES:
        goal = {"task_type": task_type, **{slot: _PLACEHOLDER[slot] for slot in GOAL_SLOTS[task_type]}}
        out[task_type] = parse_goal(data["pddl_domain"], with_goal(data, goal)["pddl_problem"])
    return out


def _met(parts: list[list[Literal]], facts: dict[str, set[tuple]], fluents: set[str]) -> bool:
    """Whether every part has a binding meeting all its literals over ``facts``."""
    return all(best_binding(p, facts, fluents, {}) == sum(lit.predicate in fluents for lit in p) for p in parts)


@functools.lru_cache(maxsize=256)
def feasible_goals(game_file: str) -> dict[str, dict[str, tuple[str, ...]]] | None:
    """The feasible goals of a game's scene (module docstring): ``{task_type: {object type: (receptacle or toggle
    type, ...)}}`` with the scene's spelling of the type names (``"AlarmClock"``); types without a feasible goal
    are left out. ``None`` when `scene_facts` cannot tell. Slow to compute for a scene (figures:
    ``lab/notes/cpu-measurements.md``, "benchmarks/alfworld/feasible.py"), so cached per game file (256 scenes)."""
    data = read_game(game_file)
    facts = scene_facts(data)
    if facts is None:
        return None
    initial, reachable = facts
    inventory = scene_inventory(data)
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for task_type, (parts, fluents) in _templates(data).items():
        second = GOAL_SLOTS[task_type][1]
        for obj in inventory["objects"]:
            found = []
            for target in goal_targets(inventory, second):
                names = {f"{_PLACEHOLDER['object']}type".lower(): f"{obj}type".lower(),
                         f"{_PLACEHOLDER[second]}type".lower(): f"{target}type".lower()}
                goal = [sorted((Literal(lit.predicate, tuple(names.get(a, a) for a in lit.args), lit.negated)
                                for lit in part), key=lambda lit: (lit.negated, lit.predicate in fluents))
                        for part in parts]  # static literals first: they bind the variables cheaply
                if _met(goal, reachable, fluents) and not _met(goal, initial, fluents):
                    found.append(target)
            if found:
                out.setdefault(task_type, {})[obj] = tuple(found)
    return out


def translator_verdict(data: dict[str, Any]) -> tuple[str, str] | None:
    """fast-downward's verdict on a game whose goal its translator decides without search: ``("unsolvable",
    detail)`` for its trivially unsolvable task, ``("already_satisfied", detail)`` for its trivially solvable one,
    ``None`` for a real planning task (the planner decides). The pair is a
    `Rejection`'s reason and detail."""
    _, sas = translate(data["pddl_domain"], data["pddl_problem"])
    if _TRIVIAL not in sas:
        return None
    goal = sas.split("begin_goal", 1)[1].split("end_goal", 1)[0].split()
    if goal[1:] == ["0", "1"]:  # one goal fact: the dummy variable's other value, no operator reaches it
        return "unsolvable", "fast-downward's translator proves the goal unreachable (no relaxed plan or a mutex)"
    return "already_satisfied", "fast-downward's translator finds the goal met by the initial state"
