"""TextWorldExpress spec: success rate per game, and environment-generated games validated by the engine.

The environment policy proposes a game as ``{"game", "params", "steps", "seed"}``; the engine itself validates
the proposal by generating the game (it rejects unknown games, unknown parameters and out-of-range values with its
own message), and the proposal is admitted only if TWX's gold action sequence fits in the env's step limit and
replays to a win. Seeds must come from TWX's train fold (0-999), so a generated game never coincides with a
test or dev game. The worked example of ``docs/adding-an-env.md``.

``steps`` is the difficulty the policy controls. In TWX the engine's seed, not the written parameters, places the
goal (Coin Collector's coin) and so decides how many actions a game takes, which is what decides the agent's
success rate (measured in ``docs/task-generation.md``, "TextWorldExpress difficulty"). A written ``steps`` pins
it: the game is the first one, from the written seed upward through the train fold (at most
`STEPS_SEARCH` seeds), whose gold sequence has exactly ``steps`` actions; none found is a rejection
(``steps_unreachable``). Without ``steps`` the written seed is used as it is.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

from genenv.benchmarks.spec import BenchmarkSpec, Metric
from genenv.benchmarks.task_writer import Rejection, extract_json_object
from genenv.benchmarks.bounded_schema import json_object
from genenv.envs.task import Task
from genenv.benchmarks.twx.env import (
    FOLD_SEEDS,
    GAMES,
    TextWorldExpressEnv,
    make_task,
    params_dict,
    params_string,
)

__all__ = ["TWXSpec", "gold_wins", "level_name", "pin_steps"]

PROTOCOL = "TextWorldExpress 1.1.0, {split} fold seeds, win within {max_steps} steps, greedy, 1 episode per game"
PARAM_RANGES = {  # the sizes the environment policy may set, per game (inclusive ranges the engine accepts)
    "coin": {"numLocations": (1, 11), "numDistractorItems": (0, 10), "includeDoors": (0, 1)},
    "cookingworld": {"numLocations": (1, 11), "numIngredients": (1, 5), "numDistractorItems": (0, 10),
                     "includeDoors": (0, 1), "limitInventorySize": (0, 1)},
    "twc": {"numLocations": (1, 3), "numItemsToPutAway": (1, 10), "includeDoors": (0, 1),
            "limitInventorySize": (0, 1)},
}


ORACLE_ROOMS = (2, 3, 4, 5, 6)  # the room counts of the oracle's Coin Collector levels (the held-out sets' and fewer)
STEPS_SEARCH = 64  # seeds tried for a written `steps`. Coin Collector without doors, 60 train seeds: 2 locations give
                   # gold lengths 2-3, 4 locations 2-4, 6 locations 2-6 (2 = the coin in the first room)


class TWXSpec(BenchmarkSpec):
    """TextWorldExpress (Jansen & Côté 2022): CookingWorld, TextWorld Commonsense, Coin Collector, ..."""

    name = "twx"
    baseline_column = ""  # not in the GenEnv paper's Table 1
    paper_protocol = "not in the GenEnv paper"
    seed_options: dict[str, Any] = {"games": "coin", "episodes": 40,  # the smallest Coin Collector: 2 rooms
                                    "params": {"coin": "numLocations=2,numDistractorItems=0,includeDoors=0"}}
    rejection_reasons = ("missing_fields", "unknown_game", "bad_params", "seed_outside_train_fold", "bad_steps",
                         "engine_rejected", "steps_unreachable", "exceeds_step_limit", "gold_fails")
    max_steps = TextWorldExpressEnv.default_max_steps

    def eval_units(self, options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """One unit per game (``options["games"]``: a comma list; default coin, cookingworld, twc)."""
        games = options.get("games") or "coin,cookingworld,twc"
        if isinstance(games, str):
            games = [g.strip() for g in games.split(",") if g.strip()]
        rest = {k: v for k, v in options.items() if k != "games"}
        return [(f"twx/{g}", {**rest, "games": g}) for g in games]

    def summarize(self, unit: str, trajectories: Sequence[Any]) -> list[Metric]:
        """``<unit>/success`` (win rate) and ``<unit>/score`` (TWX's normalised score at the episode's end); on the
        graded held-out set also ``<unit>/graded/<dimension>=<bin>``, the win rate per difficulty bin."""
        n = len(trajectories)
        if n == 0:
            return []
        split = trajectories[0].task.metadata.get("fold", "test")
        protocol = PROTOCOL.format(split=split, max_steps=trajectories[0].info.get("max_steps", "?"))
        success = sum(t.success for t in trajectories) / n
        score = sum(t.info.get("score", 0.0) for t in trajectories) / n
        out = [Metric(f"{unit}/success", success, n, f"success rate, {protocol}"),
               Metric(f"{unit}/score", score, n, f"mean final game score (partial progress), {protocol}")]
        bins: dict[str, list[bool]] = {}
        for t in trajectories:  # the graded held-out set's bins (genenv.benchmarks.twx.graded)
            for dimension, value in t.task.metadata.get("bins", {}).items():
                bins.setdefault(f"{dimension}={value}", []).append(bool(t.success))
        out += [Metric(f"{unit}/graded/{name}", sum(v) / len(v), len(v), f"success rate in the bin {name}, {protocol}")
                for name, v in sorted(bins.items())]
        return out

    def headline(self, metrics: Sequence[Metric]) -> Metric | None:
        """``twx/success``: the episode-weighted success rate over the evaluated games."""
        wins = [m for m in metrics if m.key.endswith("/success")]
        n = sum(m.n for m in wins)
        if not n:
            return None
        protocol = "success rate over " + ", ".join(m.key.split("/")[1] for m in wins) + "; " + \
            wins[0].protocol.split(", ", 1)[1]
        return Metric("twx/success", sum(m.value * m.n for m in wins) / n, n, protocol)

    generation_system_prompt = (
        "You design text-game levels for an agent. A level is a TextWorldExpress game: 'game' is one of "
        f"{', '.join(PARAM_RANGES)}; 'params' sets its size ("
        + "; ".join(f"{game}: " + ", ".join(f"{k} {lo}-{hi}" for k, (lo, hi) in ranges.items())
                    for game, ranges in PARAM_RANGES.items())
        + f"); 'steps' is the number of actions the shortest solution takes (1-{TextWorldExpressEnv.default_max_steps}"
        "); 'seed' is an integer from 0 to 999. More steps make a level harder; more locations, items and doors "
        'too. Reply with exactly one JSON object {"game": ..., "params": {...}, "steps": ..., "seed": ...}.')

    def generation_schema(self, seeds: Sequence[Task]) -> dict[str, Any]:
        """One branch per game of `PARAM_RANGES`: ``{"game", "params": {name: integer in range, ...},
        "steps": 1..max_steps, "seed": train-fold integer}`` (params optional, in the table's order)."""
        train = FOLD_SEEDS["train"]
        return {"anyOf": [json_object({
            "game": {"const": game},
            "params": json_object({k: {"type": "integer", "minimum": lo, "maximum": hi}
                                   for k, (lo, hi) in ranges.items()}, optional=tuple(ranges)),
            "steps": {"type": "integer", "minimum": 1, "maximum": self.max_steps},
            "seed": {"type": "integer", "minimum": train.start, "maximum": train.stop - 1}})
            for game, ranges in PARAM_RANGES.items()]}

    def skill_of(self, task: Task) -> str:
        """The game."""
        return task.metadata.get("game", "")

    def as_generation(self, task: Task) -> dict[str, Any]:
        """``{"game", "params", "steps", "seed"}`` (params in `PARAM_RANGES` order; steps = the gold
        sequence's length)."""
        meta = task.metadata
        order = list(PARAM_RANGES.get(meta["game"], {}))
        params = dict(sorted(meta["params"].items(), key=lambda kv: order.index(kv[0]) if kv[0] in order
                             else len(order)))
        return {"game": meta["game"], "params": params, "steps": len(task.gold), "seed": meta["seed"]}

    def parse_generated(self, text: str, task_id: str, iteration: int, parent: Task | None) -> Task | Rejection:
        """Strict JSON; a known game, integer params, optional ``steps`` (an integer in 1..`max_steps`), a
        train-fold seed; the engine generates the game (with ``steps``: the first game from the seed upward whose
        gold sequence has that many actions, `pin_steps`); its gold sequence fits in `max_steps` and
        replays to a win."""
        obj = extract_json_object(text)
        if isinstance(obj, Rejection):
            return obj
        game, params, seed = obj.get("game"), obj.get("params", {}), obj.get("seed")
        if not isinstance(game, str) or seed is None:
            return Rejection("missing_fields", "needs 'game' (string), 'params' (object) and 'seed' (integer)")
        if game not in GAMES:
            return Rejection("unknown_game", game[:40])
        try:
            params = params_dict(params)
        except ValueError as exc:
            return Rejection("bad_params", str(exc))
        if isinstance(seed, bool) or not isinstance(seed, int) or seed not in FOLD_SEEDS["train"]:
            return Rejection("seed_outside_train_fold", f"seed {seed!r} is not in 0..999")
        steps = obj.get("steps")
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)
                                  or not 1 <= steps <= self.max_steps):
            return Rejection("bad_steps", f"steps {steps!r} is not an integer in 1..{self.max_steps}")
        fields = {"task_id": task_id, "split": "generated", "origin": "generated",
                  "parent_id": parent.id if parent else None, "admitted_iteration": iteration}
        try:
            task = (make_task(game, params, "train", seed, **fields) if steps is None
                    else pin_steps(game, params, seed, steps, **fields))
        except ValueError as exc:  # the engine's own validation message
            return Rejection("engine_rejected", str(exc).strip()[:200])
        if task is None:
            return Rejection("steps_unreachable", f"no {game} game with a {steps}-action gold sequence among the "
                                                  f"{STEPS_SEARCH} train seeds from {seed}")
        if len(task.gold) > self.max_steps:
            return Rejection("exceeds_step_limit", f"gold sequence has {len(task.gold)} steps > {self.max_steps}")
        if not gold_wins(task):
            return Rejection("gold_fails", "the engine's gold sequence does not win")
        return task

    def difficulty_levels(self, options: dict[str, Any]) -> list[str]:
        """Coin Collector levels: the pool's Coin Collector parameters (``options["params"]["coin"]``) with
        ``numLocations`` set to each of `ORACLE_ROOMS`, times every gold length that at least 2 of the first
        `STEPS_SEARCH` train-fold seeds give (so that `pin_steps` finds one from most seeds), ordered by steps, then
        rooms. Named ``"coin <params> steps=<n>"`` (`difficulty_level`). Empty when the pool has no Coin Collector."""
        games = options.get("games") or "coin"
        games = [g.strip() for g in games.split(",")] if isinstance(games, str) else list(games)
        if "coin" not in games:
            return []
        base = params_dict((options.get("params") or {}).get("coin", self.seed_options["params"]["coin"]))
        levels = []
        for rooms in ORACLE_ROOMS:
            params = {**base, "numLocations": rooms}
            lengths: dict[int, int] = {}
            for seed in FOLD_SEEDS["train"][:STEPS_SEARCH]:
                n = len(make_task("coin", params, "train", seed).gold)
                lengths[n] = lengths.get(n, 0) + 1
            levels += [(steps, rooms, level_name("coin", params, steps)) for steps, c in lengths.items()
                       if c >= 2 and steps <= self.max_steps]
        return [name for _, _, name in sorted(levels)]

    def level_text(self, level: str, rng) -> str:
        """``{"game", "params", "steps", "seed"}`` of ``level`` with a train-fold seed drawn from ``rng`` (the
        game is then pinned to the level's steps from that seed upward, `pin_steps`).

        Raises:
            ValueError: a name `difficulty_level` does not write.
        """
        try:
            game, params, steps = level.split(" ")
            obj = {"game": game, "params": params_dict(params), "steps": int(steps.removeprefix("steps=")),
                   "seed": rng.randrange(FOLD_SEEDS["train"].start, FOLD_SEEDS["train"].stop)}
        except ValueError as exc:
            raise ValueError(f"{level!r} is not a TWX level name ('<game> <params> steps=<n>')") from exc
        return json.dumps(obj)

    def difficulty_level(self, task: Task) -> str | None:
        """``"<game> <params> steps=<gold length>"`` (any game, any split)."""
        meta = task.metadata
        if "game" not in meta or "params" not in meta:
            return None
        return level_name(meta["game"], meta["params"], len(task.gold))

    def duplicate_key(self, task: Task) -> tuple:
        """The same game, parameters, fold and seed (different seeds are different games)."""
        meta = task.metadata
        return meta["game"], tuple(sorted(meta["params"].items())), meta["fold"], meta["seed"]


def level_name(game: str, params: dict[str, int], steps: int) -> str:
    """A difficulty level's name: ``"<game> <params string> steps=<n>"`` (`params_string`'s sorted ``k=v`` list)."""
    return f"{game} {params_string(params)} steps={steps}"


def pin_steps(game: str, params: dict[str, int], seed: int, steps: int, **fields: Any) -> Task | None:
    """The first train-fold game of ``game`` with ``params`` from ``seed`` upward (wrapping at the fold's end, at
    most `STEPS_SEARCH` seeds) whose gold sequence has exactly ``steps`` actions, as a `Task`
    (``fields`` go to `make_task`); ``None`` when none has.

    Raises:
        ValueError: the engine rejects the game or its parameters.
    """
    train = FOLD_SEEDS["train"]
    for k in range(STEPS_SEARCH):
        s = train.start + (seed - train.start + k) % len(train)
        task = make_task(game, params, "train", s, **fields)
        if len(task.gold) == steps:
            return task
    return None


def gold_wins(task: Task, max_steps: int | None = None) -> bool:
    """Play ``task``'s gold sequence through the env; ``True`` if it wins."""
    env = TextWorldExpressEnv(tasks=[task], max_steps=max_steps or max(len(task.gold), 1))
    env.reset(options={"task_index": 0})
    info: dict[str, Any] = {}
    for command in task.gold:
        _, _, terminated, truncated, info = env.step(env.parse_lenient(command))
        if terminated or truncated:
            break
    return bool(info.get("success"))
