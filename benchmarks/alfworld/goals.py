"""ALFWorld goals: ALFRED's goal grammar, new goals for real scenes, and goal-condition progress.

A goal is ``{"task_type", "object", "receptacle", "toggle", "mrecep"}`` with ALFRED object-type names
(``"AlarmClock"``, ``"DeskLamp"``). Its PDDL and its sentence come from ALFWorld's own goal library
(``alfworld.gen.goal_library.gdict``: one PDDL template and sentence templates per task type, the ones ALFWorld's
games were generated with). `with_goal` puts a goal into a real game (its scene, i.e. its PDDL problem's
objects and initial state, is kept); ALFWorld's planner (fast-downward through ``textworld``) then decides whether
it is solvable and yields its walkthrough (`plan_goal`).

`goal_progress` measures how much of a game's goal the current state meets: each top-level conjunct of the
goal is an existential over a conjunction of literals; literals over *static* predicates (never changed by an
action of the PDDL domain: ``objectType``, ``receptacleType``, ``cleanable``, ...) only restrict the binding,
literals over *fluent* predicates (changed by some action: ``inReceptacle``, ``isClean``, ``holds``, ...) are the
goal conditions. Progress = the best binding's share of satisfied goal conditions (ALFRED's goal-condition
success, computed on the PDDL state instead of THOR's metadata). It can be above 0 at the start (e.g. the lamp of
a look-at task already stands on its receptacle) and is 1 when the game is won.
"""
from __future__ import annotations

import contextlib
import io
import re
from typing import Any, Protocol

from genenv.benchmarks.alfworld.files import TASK_TYPES

__all__ = [
    "GOAL_SLOTS", "best_binding", "goal_pddl", "goal_progress", "goal_sentence", "goal_targets", "normalise_goal",
    "parse_goal", "plan_goal", "scene_inventory", "with_goal",
]


class LoadedGame(Protocol):
    """What the goal functions use of `genenv.benchmarks.alfworld.game.ALFWorldGame` (a protocol: the game
    module imports this one for `with_goal`, so this one does not import it)."""

    env: Any

    def load(self, key: str, data: dict[str, Any] | str) -> None: ...

    def reset(self) -> tuple[str, list[str], bool]: ...

    def plan(self) -> list[str]: ...

    def facts(self) -> list[Any]: ...

GOAL_SLOTS = {  # the targets each task type's goal template uses (ALFRED pddl_params)
    "pick_and_place_simple": ("object", "receptacle"),
    "look_at_obj_in_light": ("object", "toggle"),
    "pick_clean_then_place_in_recep": ("object", "receptacle"),
    "pick_heat_then_place_in_recep": ("object", "receptacle"),
    "pick_cool_then_place_in_recep": ("object", "receptacle"),
    "pick_two_obj_and_place": ("object", "receptacle"),
}
_TYPE_RE = {"objects": re.compile(r"\(objectType\s+\S+\s+(\w+?)Type\)"),
            "receptacles": re.compile(r"\(receptacleType\s+\S+\s+(\w+?)Type\)")}


def _library() -> dict[str, Any]:
    from alfworld.gen.goal_library import gdict

    return gdict


def goal_pddl(goal: dict[str, str]) -> str:
    """The PDDL ``(:goal ...)`` block of ``goal`` plus the problem's closing parenthesis (ALFWorld's template;
    ALFRED writes ``#`` for PDDL's type separator ``-``)."""
    fields = {"obj": goal.get("object", ""), "recep": goal.get("receptacle", ""),
              "toggle": goal.get("toggle", ""), "mrecep": goal.get("mrecep", "")}
    return _library()[goal["task_type"]]["pddl"].format(**fields).replace("#", "-")


def goal_sentence(goal: dict[str, str]) -> str:
    """The goal's sentence, ALFWorld's first template with lower-cased names (``"put a book in bed."``)."""
    template = _library()[goal["task_type"]]["templates"][0]
    fields = {"obj": goal.get("object", ""), "recep": goal.get("receptacle", ""),
              "toggle": goal.get("toggle", ""), "mrecep": goal.get("mrecep", "")}
    return template.format(**{k: v.lower() for k, v in fields.items()}).strip() + "."


def with_goal(data: dict[str, Any], goal: dict[str, str]) -> dict[str, Any]:
    """A copy of a game with ``goal`` instead of its own: the PDDL problem's ``(:goal ...)`` block and the
    grammar's task sentence are replaced; domain, objects and initial state are kept.

    Raises:
        ValueError: the problem has no ``(:goal`` block.
    """
    problem = data["pddl_problem"]
    at = problem.find("(:goal")
    if at < 0:
        raise ValueError("the game's PDDL problem has no (:goal block")
    sentence = goal_sentence(goal)
    grammar = re.sub(r"Your task is to: [^\"\\]*", lambda _: f"Your task is to: {sentence}", data["grammar"], count=1)
    return {**data, "pddl_problem": problem[:at] + goal_pddl(goal), "grammar": grammar}


def scene_inventory(data: dict[str, Any]) -> dict[str, list[str]]:
    """The ALFRED types present in a game's scene: ``{"objects": [...], "receptacles": [...]}`` (sorted, as
    written in its PDDL problem's ``objectType`` / ``receptacleType`` facts)."""
    return {k: sorted(set(rx.findall(data["pddl_problem"]))) for k, rx in _TYPE_RE.items()}


def goal_targets(inventory: dict[str, list[str]], slot: str) -> list[str]:
    """The types a goal's second slot (`GOAL_SLOTS`) can name in a scene (``inventory``:
    `scene_inventory`): its receptacle types for ``"receptacle"``, its lamps (object types ending in
    ``Lamp``: ALFRED's DeskLamp, FloorLamp) for ``"toggle"``."""
    return inventory["receptacles"] if slot == "receptacle" else [o for o in inventory["objects"] if o.endswith("Lamp")]


def normalise_goal(proposal: dict[str, Any], inventory: dict[str, list[str]]) -> dict[str, str]:
    """Check a proposed goal against the goal grammar and the scene; returns it with the scene's spelling of
    each type name.

    Raises:
        ValueError: ``("unknown_task_type" | "missing_fields" | "object_not_in_scene" |
            "receptacle_not_in_scene", detail)`` as the exception's args.
    """
    task_type = proposal.get("task_type")
    if task_type not in TASK_TYPES:
        raise ValueError("unknown_task_type", f"{str(task_type)[:40]!r} is not one of {TASK_TYPES}")
    goal = {"task_type": task_type, "object": "", "receptacle": "", "toggle": "", "mrecep": ""}
    for slot in GOAL_SLOTS[task_type]:
        value = proposal.get(slot)
        if not isinstance(value, str) or not value.strip():
            raise ValueError("missing_fields", f"{task_type} needs {GOAL_SLOTS[task_type]} (type names)")
        pool = inventory["receptacles"] if slot == "receptacle" else inventory["objects"]
        found = next((t for t in pool if t.lower() == value.strip().replace(" ", "").lower()), None)
        if found is None:
            reason = "receptacle_not_in_scene" if slot == "receptacle" else "object_not_in_scene"
            raise ValueError(reason, f"{slot} {value[:40]!r} is not in this scene")
        goal[slot] = found
    return goal


def plan_goal(game: LoadedGame, key: str, data: dict[str, Any]) -> tuple[list[str], bool]:
    """Load a game with a (new) goal, and return ``(walkthrough, won_at_start)``: ALFWorld's planner plan from
    the initial state (``[]`` if none) and whether the goal already holds before any command."""
    game.load(key, data)
    _, _, won = game.reset()
    return ([] if won else game.plan()), won


# ----- goal-condition progress -----
def parse_goal(domain: str, problem: str) -> tuple[list[list], set[str]]:
    """The goal's parts (one literal list per top-level conjunct) and the domain's fluent predicates, with
    fast-downward's PDDL parser (its warnings about repeated facts are silenced)."""
    from fast_downward.translate import pddl
    from fast_downward.translate.pddl_parser import lisp_parser, parsing_functions

    with contextlib.redirect_stdout(io.StringIO()):
        task = parsing_functions.parse_task(lisp_parser.parse_nested_list(domain.splitlines()),
                                            lisp_parser.parse_nested_list(problem.splitlines()))
    fluents = {effect.literal.predicate for action in task.actions for effect in action.effects}

    def flatten(cond) -> list:
        if isinstance(cond, (pddl.Conjunction, pddl.ExistentialCondition)):
            return [lit for part in cond.parts for lit in flatten(part)]
        if isinstance(cond, pddl.Literal):
            return [cond]
        raise ValueError(f"unsupported goal condition {type(cond).__name__}")

    goal = task.goal
    parts = goal.parts if isinstance(goal, pddl.Conjunction) else (goal,)
    return [flatten(part) for part in parts], fluents


def best_binding(literals: list, facts: dict[str, set[tuple]], fluents: set[str], binding: dict[str, str]) -> int:
    """Most fluent literals satisfiable together under one binding extending ``binding``, every static literal
    holding; ``-1`` if the static literals cannot hold."""
    if not literals:
        return 0
    lit, rest = literals[0], literals[1:]
    args = [binding.get(a, a) if a.startswith("?") else a for a in lit.args]
    if lit.negated:  # inequality (not (= ?a ?b)) or a negated fact, checked once its arguments are bound
        if any(a.startswith("?") for a in args):
            return best_binding(rest, facts, fluents, binding)
        holds = args[0] == args[1] if lit.predicate == "=" else tuple(args) in facts.get(lit.predicate, ())
        sub = best_binding(rest, facts, fluents, binding)
        if lit.predicate in fluents:
            return sub + int(not holds) if sub >= 0 else -1
        return -1 if holds else sub
    fluent = lit.predicate in fluents
    best = best_binding(rest, facts, fluents, binding) if fluent else -1  # a goal condition may stay unmet
    if not any(a.startswith("?") for a in args):  # bound: one lookup instead of a scan
        sub = best_binding(rest, facts, fluents, binding) if tuple(args) in facts.get(lit.predicate, ()) else -1
        return max(best, sub + int(fluent)) if sub >= 0 else best
    for fact in facts.get(lit.predicate, ()):
        if len(fact) != len(args) or any(not a.startswith("?") and a != f for a, f in zip(args, fact)):
            continue
        new = dict(binding)
        if any(new.setdefault(a, f) != f for a, f in zip(lit.args, fact) if a.startswith("?")):
            continue
        sub = best_binding(rest, facts, fluents, new)
        if sub >= 0:
            best = max(best, sub + int(fluent))
    return best


def goal_progress(game: LoadedGame) -> float:
    """Share of the loaded game's goal conditions (fluent goal literals) that the current state meets under the
    best binding, in [0, 1] (see module docstring); 1.0 when the game is won."""
    env = game.env.unwrapped
    data = env._game_data
    cache = getattr(game, "_goal_cache", None)
    if cache is None or cache[0] is not data:
        parts, fluents = parse_goal(data["pddl_domain"], data["pddl_problem"])
        for literals in parts:  # static literals first: they bind the variables cheaply
            literals.sort(key=lambda lit: (lit.negated, lit.predicate in fluents))
        game._goal_cache = cache = (data, parts, fluents)
    _, parts, fluents = cache
    facts: dict[str, set[tuple]] = {}
    for prop in game.facts():
        facts.setdefault(prop.name, set()).add(tuple(v.name for v in prop.arguments))
    met = total = 0
    for literals in parts:
        conditions = sum(1 for lit in literals if lit.predicate in fluents)
        total += conditions
        met += max(best_binding(literals, facts, fluents, {}), 0)
    return met / total if total else float(env._pddl_state.check_goal())
