"""ALFWorld spec: the official episodic success rate and the paper's single-step protocol, labelled, and
environment-generated goals admitted only when ALFWorld's planner solves them.

Evaluation units (``genenv-eval --benchmarks alfworld``): for each validation split (``valid_unseen``, then
``valid_seen``; loader option ``splits``) the episodic protocol (success rate overall and per task type, mean
goal-condition progress) and the single-step protocol (exact-match accuracy of the next expert command, overall
and per task type); ``protocol`` keeps one of them. The headline beside the paper's ALFWorld column is the
single-step accuracy on ``valid_unseen``, also the metric measured under the paper's protocol
(`ALFWorldSpec.paper_metric`, run by ``paper_options``): the paper evaluates "the official validation set
with multi-turn tasks decomposed into single steps" without naming the subset.

Generation: the environment policy sees real scenes (the object and receptacle types of a pool task's PDDL
problem) and proposes a goal in ALFWorld's goal grammar, ``{"task_type", "object", "receptacle"}`` (``"toggle"``
instead of ``"receptacle"`` for ``look_at_obj_in_light``), for the scene of the first task shown. It is admitted
only if every name is in that scene, the goal does not already hold, ALFWorld's planner (fast-downward through
``textworld``) finds a plan within the step limit, and that plan, every command admissible, wins when replayed;
the plan is the task's gold walkthrough. A goal fast-downward's translator proves unreachable is ``unsolvable``
(`translator_verdict`). Under constrained decoding the grammar offers
only the scene's feasible goals (relaxed-reachable, not already met, not a demonstrated goal of that game:
`genenv.benchmarks.alfworld.feasible`).
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Sequence

from genenv.benchmarks.alfworld.env import ALFWorldEnv
from genenv.benchmarks.alfworld.feasible import feasible_goals, translator_verdict
from genenv.benchmarks.alfworld.files import TASK_TYPES, read_game
from genenv.benchmarks.alfworld.game import game_key, game_record, shared_game, shared_lock
from genenv.benchmarks.alfworld.goals import (GOAL_SLOTS, goal_sentence, goal_targets, normalise_goal, plan_goal,
                                              scene_inventory, with_goal)
from genenv.benchmarks.spec import BenchmarkSpec, Metric
from genenv.benchmarks.task_writer import Rejection, extract_json_object, final_request
from genenv.benchmarks.bounded_schema import json_object
from genenv.envs.task import Task

__all__ = ["ALFWorldSpec"]

ENGINE = "alfworld 0.4.2 / textworld 1.7.0"
PROTOCOLS = {
    "episodic": "ALFWorld official: success = TextWorld reports won within {max_steps} steps; " + ENGINE +
                ", {split}, greedy, 1 episode per game",
    "single_step": "GenEnv paper protocol: each expert-walkthrough step is a task (trajectory so far in, next "
                   "expert command out), exact match among the admissible commands; " + ENGINE + ", {split}, greedy",
}
EVAL_SPLITS = ("valid_unseen", "valid_seen")
PAPER_KEY = "alfworld/valid_unseen/single_step/accuracy"  # the metric beside the paper's ALFWorld column


class ALFWorldSpec(BenchmarkSpec):
    """ALFWorld (Shridhar et al. 2021): six household task types in 274 validation games."""

    name = "alfworld"
    baseline_column = "alfworld"
    paper_protocol = "ALFWorld official validation set, multi-turn tasks decomposed into single steps"
    paper_options: dict[str, Any] = {"splits": "valid_unseen", "protocol": "single_step"}
    seed_options: dict[str, Any] = {"protocol": "episodic", "per_type": 10}
    rejection_reasons = ("missing_fields", "no_parent", "unknown_task_type", "object_not_in_scene",
                         "receptacle_not_in_scene", "engine_rejected", "already_satisfied", "unsolvable",
                         "exceeds_step_limit",
                         "gold_fails")
    max_steps = ALFWorldEnv.default_max_steps

    def eval_units(self, options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """Episodic and single-step units for each split of ``options["splits"]`` (comma list; default both
        validation splits); ``options["protocol"]`` keeps one protocol."""
        splits = options.get("splits") or ",".join(EVAL_SPLITS)
        if isinstance(splits, str):
            splits = [s.strip() for s in splits.split(",") if s.strip()]
        protocols = [options["protocol"]] if options.get("protocol") else ["episodic", "single_step"]
        rest = {k: v for k, v in options.items() if k not in ("splits", "protocol")}
        return [(f"alfworld/{s}/{p}", {**rest, "split": s, "protocol": p}) for s in splits for p in protocols]

    def summarize(self, unit: str, trajectories: Sequence[Any]) -> list[Metric]:
        """Episodic: ``<unit>/success`` overall and per task type, ``<unit>/goal_progress``,
        ``<unit>/executed_steps`` (share of all steps whose text was an admissible command). Single-step:
        ``<unit>/accuracy`` overall and per task type."""
        if not trajectories:
            return []
        meta = trajectories[0].task.metadata
        protocol = meta["protocol"]
        label = PROTOCOLS[protocol].format(max_steps=trajectories[0].info.get("max_steps", "?"),
                                           split=trajectories[0].task.split)
        key = "success" if protocol == "episodic" else "accuracy"
        by_type: dict[str, list[bool]] = defaultdict(list)
        for t in trajectories:
            by_type[t.task.metadata["task_type"]].append(bool(t.success))
        n = len(trajectories)
        out = [Metric(f"{unit}/{key}", sum(t.success for t in trajectories) / n, n, label)]
        out += [Metric(f"{unit}/{tt}/{key}", sum(v) / len(v), len(v), label) for tt in TASK_TYPES
                if (v := by_type.get(tt))]
        if protocol == "episodic":
            progress = [t.info.get("goal_progress", float(t.success)) for t in trajectories]
            out.append(Metric(f"{unit}/goal_progress", sum(progress) / n, n,
                              "mean share of the goal's fluent PDDL conditions met at the episode's end; " + label))
            steps = sum(t.info.get("steps", 0) for t in trajectories)
            out.append(Metric(f"{unit}/executed_steps", sum(t.info.get("executed", 0) for t in trajectories)
                              / max(steps, 1), n, f"share of the episodes' {steps} steps whose text was an admissible "
                              "command (played by the game); " + label))
        return out

    def headline(self, metrics: Sequence[Metric]) -> Metric | None:
        """Single-step accuracy on valid_unseen (the paper's protocol), else the first single-step or episodic
        overall metric."""
        overall = [m for m in metrics if m.key.count("/") == 3]
        for want in (PAPER_KEY, "/single_step/accuracy", "/episodic/success"):
            found = next((m for m in overall if m.key.endswith(want)), None)
            if found:
                return found
        return None

    def paper_metric(self, metrics: Sequence[Metric]) -> Metric | None:
        """``alfworld/valid_unseen/single_step/accuracy``: the paper's single-step protocol (its validation subset
        unnamed; valid_unseen is ALFWorld's usual evaluation split)."""
        return next((m for m in metrics if m.key == PAPER_KEY), None)

    # ----- generation -----
    generation_system_prompt = (
        "You write household tasks for a robot in ALFWorld scenes. A task is one goal of ALFWorld's goal grammar: "
        "'task_type' is one of pick_and_place_simple (put an object in or on a receptacle), "
        "look_at_obj_in_light (examine an object under a lamp: 'toggle' is DeskLamp or FloorLamp instead of "
        "'receptacle'), pick_clean_then_place_in_recep (clean it in the sink first), pick_heat_then_place_in_recep "
        "(heat it in the microwave first), pick_cool_then_place_in_recep (cool it in the fridge first), "
        "pick_two_obj_and_place (two objects of that type). 'object' and 'receptacle' are type names from the "
        'scene. Reply with exactly one JSON object {"task_type": ..., "object": ..., "receptacle": ...}.')

    def generation_schema(self, seeds: Sequence[Task]) -> dict[str, Any] | None:
        """The goals the grammar offers for the scene of ``seeds[0]`` (the one the new goal is written for): one
        branch per task type and object type, ``{"task_type": <it>, "object": <it>, "receptacle" | "toggle": <one
        of its targets>}``, over the scene's feasible goals (`
        feasible_goals`: relaxed-reachable and not already met), without the goals of the seeds played in that
        game (a copy of a demonstration is a duplicate). Where the scene offers no such goal, every object and
        receptacle type of the scene (the planner then rejects, counted). ``None`` without seeds."""
        if not seeds:
            return None
        game_file = seeds[0].metadata["game_file"]
        shown = {tuple(sorted(self.as_generation(s).items())) for s in seeds if s.metadata["game_file"] == game_file}
        branches = []
        for task_type, objects in (feasible_goals(game_file) or {}).items():
            slot = GOAL_SLOTS[task_type][1]
            for obj, targets in objects.items():
                left = [t for t in targets if tuple(sorted({"task_type": task_type, "object": obj, slot: t}.items()))
                        not in shown]
                if left:
                    branches.append(json_object({"task_type": {"const": task_type}, "object": {"const": obj},
                                                 slot: {"enum": left}}))
        if branches:
            return {"anyOf": branches}
        inv = scene_inventory(read_game(game_file))
        lamps = goal_targets(inv, "toggle") or inv["objects"]
        choices = {"object": inv["objects"], "receptacle": inv["receptacles"], "toggle": lamps}
        return {"anyOf": [json_object({"task_type": {"const": tt}, **{slot: {"enum": choices[slot]}
                                                                       for slot in GOAL_SLOTS[tt]}})
                          for tt in TASK_TYPES]}

    def demonstrable(self, task: Task) -> bool:
        """Episodic tasks only (a goal is demonstrated with its scene)."""
        return task.metadata.get("protocol") == "episodic"

    def as_generation(self, task: Task) -> dict[str, Any]:
        """The task's goal: ``{"task_type", "object", "receptacle" | "toggle"}``."""
        goal = task.metadata["goal"]
        return {"task_type": goal["task_type"], **{slot: goal[slot] for slot in GOAL_SLOTS[goal["task_type"]]}}

    @staticmethod
    def describe_scene(task: Task) -> str:
        """One line naming the object and receptacle types of ``task``'s scene."""
        inv = scene_inventory(read_game(task.metadata["game_file"]))
        return f"Scene: objects {', '.join(inv['objects'])}; receptacles {', '.join(inv['receptacles'])}."

    def generation_messages(self, seeds: Sequence[Task], p_hat: float | None, alpha: float,
                            feedback: str | None = None) -> list[dict[str, str]]:
        """As `BenchmarkSpec.generation_messages`, each request naming its scene's types; the final
        request asks for a new goal in the scene of ``seeds[0]`` (the parent the trainer records)."""
        ask = "Write one new task for this scene as a single JSON object."
        messages = [{"role": "system", "content": self.generation_system_prompt}]
        for seed in seeds:
            messages += [{"role": "user", "content": f"{self.describe_scene(seed)} {ask}"},
                         {"role": "assistant", "content": json.dumps(self.as_generation(seed))}]
        scene = self.describe_scene(seeds[0]) if seeds else ""
        messages.append({"role": "user", "content": final_request(f"{scene} {ask}".strip(), p_hat, alpha, feedback)})
        return messages

    def skill_of(self, task: Task) -> str:
        """The task type (ALFWorld's six goal templates)."""
        return task.metadata.get("task_type", "")

    def parse_generated(self, text: str, task_id: str, iteration: int, parent: Task | None) -> Task | Rejection:
        """Strict JSON; a goal of the grammar over the parent's scene; planner-solvable within
        `max_steps`; the plan replays to a win with every command admissible (see module docstring)."""
        obj = extract_json_object(text)
        if isinstance(obj, Rejection):
            return obj
        if parent is None:
            return Rejection("no_parent", "a generated goal needs the scene of a pool task")
        data = read_game(parent.metadata["game_file"])
        try:
            goal = normalise_goal(obj, scene_inventory(data))
        except ValueError as exc:
            return Rejection(*exc.args)
        try:
            with shared_lock:
                plan, won = plan_goal(shared_game(), game_key(parent.metadata["game_file"], goal),
                                      with_goal(data, goal))
        except Exception as exc:  # noqa: BLE001 - textworld cannot read the translator's trivial task (KeyError 'val1')
            verdict = translator_verdict(with_goal(data, goal))
            if verdict:
                return Rejection(*verdict)
            return Rejection("engine_rejected", f"textworld could not load the goal: {type(exc).__name__} {exc}"[:200])
        if won:
            return Rejection("already_satisfied", "the goal holds before any command")
        if not plan:
            return Rejection("unsolvable", "ALFWorld's planner finds no plan for this goal in this scene")
        if len(plan) > self.max_steps:
            return Rejection("exceeds_step_limit", f"the plan has {len(plan)} steps > {self.max_steps}")
        scene = parent.metadata["goal"].get("scene", "")
        task = Task(id=task_id, benchmark=self.name, split="train",
                    prompt=f"Your task is to: {goal_sentence(goal)}",
                    gold=plan, action_kind="structured", origin="generated", parent_id=parent.id,
                    admitted_iteration=iteration,
                    metadata={"protocol": "episodic", "task_type": goal["task_type"], "goal": {**goal, "scene": scene},
                              "game_file": parent.metadata["game_file"], "walkthrough": plan, "goal_override": goal})
        record = game_record(task)
        if record["inadmissible"] or not (record["won"] and record["won"][-1]):
            return Rejection("gold_fails", "the planner's plan does not win when replayed "
                                           f"(inadmissible: {record['inadmissible'][:2]})")
        return task

    def duplicate_key(self, task: Task) -> tuple:
        """The same goal in the same game (other scenes or goals are different tasks)."""
        goal, meta = task.metadata["goal"], task.metadata
        return (meta["game_file"], meta["protocol"], meta.get("step"),
                *(goal.get(k, "") for k in ("task_type", "object", "receptacle", "toggle")))
