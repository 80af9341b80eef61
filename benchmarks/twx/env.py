"""TextWorldExpress environment (``genenv/TextWorldExpress-v0``): text games played step by step.

Engine: the ``textworld-express`` package (Jansen & Côté 2022, "TextWorldExpress: Simulating Text Games at One
Million Steps Per Second"), a Scala simulator driven from Python over py4j; it needs Java ≥ 1.8 on ``PATH``.
Games: CookingWorld, TextWorld Commonsense (``twc``), Coin Collector (``coin``) and the five other TWX games.
A game is fixed by ``(game, params, fold, seed)``; TWX partitions seeds into folds (train 0-999, dev
10000-10999, test 20000-20999), and its generator yields the gold action sequence. Nothing is read from the
data directory: the benchmark's tasks are the engine's games.

Splits: ``test`` = test-fold seeds (the reported score), ``train`` = train-fold seeds (the co-evolution seed
pool), ``heldout`` = dev-fold seeds. Loader options: ``games`` (comma list), ``params`` (per-game parameter
strings, default `DEFAULT_PARAMS`), ``episodes`` (seeds per game), ``start`` (offset into the fold).

Episode (multi-step, `MultiStepTaskEnv`): observation = the game's text plus the
admissible commands; action = one command (structured: matched exactly, after lower-casing and whitespace
normalisation, against the admissible set; anything else is an error observation and the episode goes on);
reward 1 when TWX reports task success, else 0; terminated on success or failure; truncated at ``max_steps``
(default 20). ``info``: ``success``, ``score`` (TWX's normalised score in [0, 1], partial progress),
``task_failure``, ``game``, ``steps``, ``error``.
"""
from __future__ import annotations

import hashlib
import heapq
import itertools
import threading
from pathlib import Path
from typing import Any, Sequence

from genenv.envs.base import InvalidAction, MultiStepTaskEnv, parse_or_invalid
from genenv.envs.parsing import parse_command
from genenv.envs.task import Task
from genenv.envs.text_games import match_command, observation_text

__all__ = [
    "FOLD_SEEDS", "GAMES", "HELDOUT_SETS", "HELDOUT_SHA256", "SPLIT_OPTIONS", "TWXEngine", "TextWorldExpressEnv",
    "cancel_detours", "digest", "graded_tasks", "heldout_set_name", "load_twx_tasks", "make_task", "params_dict",
    "params_string", "steps_bin",
]

GAMES = ("coin", "cookingworld", "twc", "mapreader", "arithmetic", "sorting", "simonsays", "peckingorder")
DEFAULT_GAMES = ("coin", "cookingworld", "twc")
DEFAULT_PARAMS = {  # small settings; other games use the engine's defaults
    "coin": "numLocations=3,numDistractorItems=0,includeDoors=0",
    "cookingworld": "numLocations=1,numIngredients=2,numDistractorItems=0,includeDoors=0,limitInventorySize=0",
    "twc": "numLocations=1,numItemsToPutAway=2,includeDoors=0,limitInventorySize=0",
}
FOLD_SEEDS = {"train": range(0, 1000), "dev": range(10000, 11000), "test": range(20000, 21000)}  # TWX's folds
SPLIT_FOLDS = {"test": "test", "train": "train", "heldout": "dev"}
SPLITS = tuple(SPLIT_FOLDS)
SPLIT_OPTIONS = tuple({"split": s} for s in SPLITS)
GOLD_DRAWS = 3  # for games other than Coin Collector: the shortest winning one of this many draws of TWX's gold
_OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
SYSTEM_PROMPT = ("You are playing a text game. Each turn you see what happens and the list of valid actions. "
                 "Reply with exactly one action from that list, copied exactly, and nothing else.")
DEMO = ("Your task is to find the apple and take it.\n\nYou are in the garden. You see a bench and an apple tree. "
        "There is an apple on the grass.\n\nValid actions: look around, inventory, move north, take apple",
        "take apple")  # a worked turn, not a TWX game


def params_dict(params: str | dict[str, Any] | None) -> dict[str, int]:
    """Game parameters as ``{name: int}`` from ``"a=1,b=2"`` or a mapping (booleans become 0/1).

    Raises:
        ValueError: a malformed entry or a non-integer value.
    """
    if params is None or params == "":
        return {}
    if isinstance(params, str):
        items = []
        for part in params.split(","):
            name, sep, value = part.partition("=")
            if not sep or not name.strip():
                raise ValueError(f"parameter {part!r} is not name=value")
            items.append((name.strip(), value.strip()))
    elif isinstance(params, dict):
        items = list(params.items())
    else:
        raise ValueError(f"params must be a 'name=value,...' string or an object, got {type(params).__name__}")
    out = {}
    for name, value in items:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"parameter name {name!r} is not an identifier")
        if isinstance(value, bool):
            value = int(value)
        try:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            out[name] = int(value)
        except (TypeError, ValueError):
            raise ValueError(f"parameter {name}={value!r} is not an integer") from None
    return out


def cancel_detours(commands: list[str]) -> list[str]:
    """Drop back-and-forth moves (``move west`` directly followed by ``move east``, repeatedly) from a command
    sequence. TWX's gold paths are random walks that can hold such detours; the caller verifies that the
    shortened sequence still wins."""
    out: list[str] = []
    for command in commands:
        if (out and command.startswith("move ") and out[-1].startswith("move ")
                and _OPPOSITE.get(out[-1][5:]) == command[5:]):
            out.pop()
            continue
        out.append(command)
    return out


def params_string(params: dict[str, int]) -> str:
    """``{"a": 1, "b": 2}`` → ``"a=1,b=2"`` (the engine's format, keys sorted)."""
    return ",".join(f"{k}={params[k]}" for k in sorted(params))


class TWXEngine:
    """One TextWorldExpress simulator (one JVM) per process, shared by every env instance.

    Env instances time-share it: each episode owns a token, and when another episode used the simulator since,
    the game is regenerated from its ``(game, params, fold, seed)`` and the episode's commands are replayed
    (TWX is deterministic; regeneration and replay are cheap: figures: ``lab/notes/cpu-measurements.md``,
    "benchmarks/twx/env.py"). Thread-safe.

    Raises (from its methods):
        ImportError: ``textworld-express`` is not installed.
        ValueError: the engine rejects the game name or parameters (its own message).
    """

    _shared: "TWXEngine | None" = None
    _shared_lock = threading.Lock()

    def __init__(self):
        self._twx = None
        self._loaded: tuple[str, str] | None = None
        self._owner: tuple[Any, int] | None = None
        self._lock = threading.RLock()

    @classmethod
    def shared(cls) -> "TWXEngine":
        """The process-wide engine (started on first use)."""
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def _sim(self):
        if self._twx is None:
            try:
                from textworld_express import TextWorldExpressEnv as _Simulator
            except ImportError as exc:
                raise ImportError("genenv/TextWorldExpress-v0 needs `pip install textworld-express==1.1.0` and "
                                  "Java >= 1.8 on PATH") from exc
            self._twx = _Simulator(envStepLimit=1_000_000)  # genenv truncates episodes itself
        return self._twx

    def generate(self, game: str, params: dict[str, int], fold: str, seed: int, gold: bool = False
                 ) -> dict[str, Any]:
        """Generate a game: ``observation``, ``task_description``, ``valid_actions`` and (``gold=True``) ``gold``.

        The gold sequence: for Coin Collector, `coin_gold` (the shortest path to the coin, found by search,
        deterministic); for the other games, the shortest winning one among `GOLD_DRAWS` draws of TWX's gold
        path, each also tried with `cancel_detours`. Every candidate is replayed; only a winning one is kept
        (``gold`` is empty if none wins).

        Raises:
            ValueError: unknown game or fold, parameters the engine rejects.
        """
        if game not in GAMES:
            raise ValueError(f"unknown TextWorldExpress game {game!r}; choose one of {GAMES}")
        if fold not in FOLD_SEEDS:
            raise ValueError(f"unknown fold {fold!r}; choose one of {tuple(FOLD_SEEDS)}")
        with self._lock:
            sim = self._sim()
            key = (game, params_string(params))
            if self._loaded != key:
                self._loaded = None
                sim.load(gameName=game, gameParams=key[1])
                self._loaded = key
            obs, info = sim.reset(seed=int(seed), gameFold=fold, generateGoldPath=gold and game != "coin")
            self._owner = None
            out = {"observation": obs.strip(), "task_description": info["taskDescription"].strip(),
                   "valid_actions": list(info["validActions"])}
            if gold:
                out["gold"] = next((list(c) for c in self._gold_candidates(game, seed, fold)
                                    if c and self._wins(seed, fold, c)), [])
            return out

    def _gold_candidates(self, game: str, seed: int, fold: str) -> list[tuple[str, ...]]:
        """The gold sequences `generate` tries, best first (the game just reset with TWX's gold path drawn
        for games other than Coin Collector): `coin_gold` for Coin Collector; else `GOLD_DRAWS` draws
        of TWX's gold path and each with `cancel_detours`, shortest first (ties on the commands)."""
        if game == "coin":
            return [tuple(self.coin_gold(seed, fold))]
        sim = self._sim()
        draws = [list(sim.getGoldActionSequence())]
        for _ in range(GOLD_DRAWS - 1):
            sim.reset(seed=int(seed), gameFold=fold, generateGoldPath=True)
            draws.append(list(sim.getGoldActionSequence()))
        return sorted({tuple(c) for d in draws for c in (cancel_detours(d), d)}, key=lambda c: (len(c), c))

    def coin_gold(self, seed: int, fold: str) -> list[str]:
        """The shortest command sequence that wins the loaded Coin Collector game ``(fold, seed)``: ``look around``
        (as TWX's own gold agent starts), the moves to the coin's room, ``take coin``; ``[]`` when no room holds
        a takeable coin. Deterministic, unlike TWX's gold path (``CoinGoldAgent``: a random walk from an unseeded
        random generator, which with doors gives a different sequence from call to call).

        Uniform-cost search over rooms (a room is the first sentence of ``look around``, "You are in the
        kitchen"): from each room, for each ``move <d>`` the engine lists, an edge ``[move <d>]`` of cost 1 and,
        when ``open door to <d>`` is listed, ``[open door to <d>, move <d>]`` of cost 2 (a move through a closed
        door stays in the room and is pruned as a room already reached). Ties break on the command sequence, so
        the same game always gets the same gold. Each expansion regenerates the game and replays its path,
        which keeps a whole `generate` with gold cheap on the default map (with doors; figures:
        ``lab/notes/cpu-measurements.md``, "benchmarks/twx/env.py"). Must be called with the game's parameters
        loaded (`generate` does, under its lock).

        Returns:
            The commands, ``look around`` first and ``take coin`` last (length = 2 + moves + doors opened).
        Raises:
            Nothing of its own; the engine's errors pass through (a game it cannot reset).
        """
        sim = self._sim()
        frontier: list[tuple[int, tuple[str, ...]]] = [(0, ())]
        reached: set[str] = set()
        while frontier:
            cost, path = heapq.heappop(frontier)
            self._replay(seed, fold, path)
            obs, _, _, info = sim.step("look around")
            room = obs.strip().split(".", 1)[0]
            if room in reached:
                continue
            reached.add(room)
            valid = set(info["validActions"])
            if "take coin" in valid:
                return ["look around", *path, "take coin"]
            for move in sorted(a for a in valid if a.startswith("move ")):
                heapq.heappush(frontier, (cost + 1, (*path, move)))
                door = f"open door to {move[5:]}"
                if door in valid:
                    heapq.heappush(frontier, (cost + 2, (*path, door, move)))
        return []

    def _replay(self, seed: int, fold: str, commands: Sequence[str], stop_when_done: bool = False) -> dict[str, Any]:
        """Reset the loaded game ``(fold, seed)`` without a gold path and play ``commands``; returns the last step's
        info (``{}`` for no command), stopping early at a win or loss when ``stop_when_done``."""
        sim = self._sim()
        sim.reset(seed=int(seed), gameFold=fold, generateGoldPath=False)
        info: dict[str, Any] = {}
        for command in commands:
            _, _, done, info = sim.step(command)
            if stop_when_done and (done or info["tasksuccess"]):
                break
        return info

    def _wins(self, seed: int, fold: str, commands: tuple[str, ...]) -> bool:
        return bool(self._replay(seed, fold, commands, stop_when_done=True).get("tasksuccess"))

    def step(self, owner: Any, task: Task, history: list[str], command: str) -> dict[str, Any]:
        """Play ``command`` in ``owner``'s episode of ``task`` after ``history`` (replayed if needed).

        Returns ``observation``, ``valid_actions``, ``score``, ``success``, ``failure``.
        """
        meta = task.metadata
        with self._lock:
            if self._owner != (owner, len(history)):
                self.generate(meta["game"], meta["params"], meta["fold"], meta["seed"])
                for past in history:
                    self._sim().step(past)
            obs, _, _, info = self._sim().step(command)
            self._owner = (owner, len(history) + 1)
            return {"observation": obs.strip(), "valid_actions": list(info["validActions"]),
                    "score": float(info["score"]), "success": bool(info["tasksuccess"]),
                    "failure": bool(info["taskfailure"])}


def make_task(game: str, params: dict[str, int], fold: str, seed: int, task_id: str | None = None,
              split: str = "test", **fields: Any) -> Task:
    """Generate the game and return its `Task` (prompt = goal + first observation, gold = TWX's gold
    action sequence, ``metadata``: game, params, fold, seed, valid_actions).

    Raises:
        ValueError: the engine rejects the game (see `TWXEngine.generate`).
    """
    game_data = TWXEngine.shared().generate(game, params, fold, seed, gold=True)
    if task_id is None:
        digest = hashlib.sha1(params_string(params).encode()).hexdigest()[:6]
        task_id = f"twx_{game}_{fold}_{seed}_{digest}"
    return Task(id=task_id, benchmark="twx", split=split,
                prompt=f"{game_data['task_description']}\n\n{game_data['observation']}", gold=game_data["gold"],
                action_kind="structured",
                metadata={"game": game, "params": params, "fold": fold, "seed": int(seed),
                          "valid_actions": game_data["valid_actions"]}, **fields)


def load_twx_tasks(split: str | None = "test", games: str | list[str] | tuple[str, ...] = DEFAULT_GAMES,
                   params: dict[str, str | dict] | None = None, episodes: int = 10, start: int = 0,
                   graded: bool | str = False) -> list[Task]:
    """Tasks of ``split``: for each game, ``episodes`` consecutive seeds of the split's fold from ``start``. With
    ``graded`` (``True`` or ``"graded"``: 120 Coin Collector games over rooms, doors, distractors and steps;
    ``"discriminating"``: 120 concentrated at 3-6 steps to win; `HELDOUT_SETS`, `genenv.benchmarks.twx.graded`) the
    ``heldout`` split is instead that fixed set's games of ``games`` (`graded_tasks`; ``params``, ``episodes`` and
    ``start`` do not apply to it); other splits ignore ``graded``.

    Raises:
        ValueError: unknown split, game or held-out set, bad parameters, seeds beyond the fold, or an edited or
            no longer reproducible held-out set (`graded_tasks`).
    """
    split = split or "test"
    if split not in SPLIT_FOLDS:
        raise ValueError(f"unknown TextWorldExpress split {split!r}; choose one of {SPLITS}")
    if isinstance(games, str):
        games = [g.strip() for g in games.split(",") if g.strip()]
    fold = SPLIT_FOLDS[split]
    seeds = FOLD_SEEDS[fold]
    if start < 0 or episodes < 1 or start + episodes > len(seeds):
        raise ValueError(f"seeds {start}..{start + episodes} are outside the {fold} fold ({len(seeds)} seeds)")
    heldout_set = heldout_set_name(graded)
    if heldout_set and split == "heldout":
        return [t for t in graded_tasks(heldout_set) if t.metadata["game"] in games]
    overrides = dict(params or {})
    tasks = []
    for game in games:
        game_params = params_dict(overrides.get(game, DEFAULT_PARAMS.get(game, "")))
        for seed in seeds[start:start + episodes]:
            tasks.append(make_task(game, game_params, fold, seed, split=split))
    return tasks


_episode_tokens = itertools.count()


class TextWorldExpressEnv(MultiStepTaskEnv):
    """``genenv/TextWorldExpress-v0``: one TWX game per episode (see module docstring).

    Constructor: ``split``, ``games``, ``params``, ``episodes``, ``start`` (loader options), or ``tasks``;
    ``limit``; ``max_steps``.
    """

    extra = "twx"
    extra_modules = ("textworld_express",)
    benchmark = "twx"
    action_kind = "structured"
    ability = "text_game"
    idle_text = "look around"
    default_max_steps = 20

    def __init__(self, tasks: list[Task] | None = None, split: str | None = "test", data_dir: str | None = None,
                 limit: int | None = None, render_mode: str | None = None, max_steps: int | None = None,
                 parsing: str = "official", **load_kwargs: Any):
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         max_steps=max_steps, parsing=parsing, **load_kwargs)
        self._history: list[str] = []
        self._valid: list[str] = []
        self._token: int = -1

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, **kwargs: Any) -> list[Task]:
        """See `load_twx_tasks` (``data_dir`` is unused: the games come from the engine)."""
        return load_twx_tasks(split=split, **kwargs)


    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """System instructions, one demonstrated turn, then the goal, first observation and valid actions."""
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": DEMO[0]},
                {"role": "assistant", "content": DEMO[1]},
                {"role": "user", "content": observation_text(task.prompt, task.metadata["valid_actions"])}]

    @classmethod
    def parse_lenient(cls, text: str) -> str | InvalidAction:
        """One normalised command (`genenv.envs.parsing.parse_command`)."""
        return parse_or_invalid(parse_command, text)

    def start(self, task: Task) -> None:
        """A fresh episode: no commands yet, the task's initial admissible commands."""
        self._history, self._valid = [], list(task.metadata["valid_actions"])
        self._token = next(_episode_tokens)

    def invalid_observation(self, action: InvalidAction) -> str:
        """The parser's reason and the admissible commands."""
        return observation_text(f"Invalid action: {action.reason}.", self._valid)

    def transition(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        """Match ``action`` to the admissible commands and play it; reward 1 on task success."""
        game = self.task.metadata["game"]
        if not isinstance(action, str):
            return (self.invalid_observation(InvalidAction("an action is one command string")), 0.0, False,
                    {"success": False, "error": f"expected a command string, got {type(action).__name__}",
                     "game": game})
        command = match_command(action, self._valid)
        if command is None:
            obs = observation_text(f"'{action[:80]}' is not a valid action here.", self._valid)
            return obs, 0.0, False, {"success": False, "error": f"not an admissible command: {action[:80]!r}",
                                     "game": game}
        out = TWXEngine.shared().step(self._token, self.task, self._history, command)
        self._history.append(command)
        self._valid = out["valid_actions"]
        terminated = out["success"] or out["failure"]
        info = {"success": out["success"], "score": out["score"], "task_failure": out["failure"], "game": game,
                "command": command}
        return observation_text(out["observation"], self._valid), float(out["success"]), terminated, info

    @classmethod
    def gold_action(cls, task: Task) -> list[str]:
        """TWX's gold action sequence."""
        return list(task.gold)


# ----- the graded held-out sets (built by genenv.benchmarks.twx.graded) -----
HELDOUT_SETS = {  # name → file: the fixed held-out sets `load_twx_tasks(split="heldout", graded=<name>)` reads
    "graded": Path(__file__).with_name("graded_heldout.yaml"),
    "discriminating": Path(__file__).with_name("discriminating_heldout.yaml"),
}
HELDOUT_SHA256 = {  # each file's sha256 as built (line ends as \n): a set is fixed, so an edited file is an error
    "graded": "7b3591f3291d188ce5079fbe9db522f11889fc7188135964aa66e1ab6bcb1423",
    "discriminating": "75fec18d56bec039393c2e186fcff929e6dcf669cceb602f59df3b5cb1114be8",
}

def steps_bin(steps: int) -> str:
    """The steps-to-win bin of a gold length in the ``graded`` set: ``"2"`` (or fewer), ``"3-4"``, ``"5-6"``,
    ``"7+"``."""
    if steps <= 2:
        return "2"
    if steps <= 4:
        return "3-4"
    return "5-6" if steps <= 6 else "7+"


def digest(task: Task) -> str:
    """sha1 (12 hex digits) of a task's prompt: the game's goal and first observation."""
    return hashlib.sha1(task.prompt.encode()).hexdigest()[:12]


def heldout_set_name(graded: bool | str | None) -> str | None:
    """The held-out set a ``graded`` option names: ``True`` is ``"graded"``, a name is itself, a false value none.

    Raises:
        ValueError: an unknown name (the message lists `HELDOUT_SETS`).
    """
    if not graded:
        return None
    name = "graded" if graded is True or str(graded).lower() == "true" else str(graded)
    if name not in HELDOUT_SETS:
        raise ValueError(f"unknown TextWorldExpress held-out set {graded!r}; choose one of {sorted(HELDOUT_SETS)}")
    return name


def graded_tasks(name: str = "graded") -> list[Task]:
    """The tasks of the held-out set ``name`` (`HELDOUT_SETS`; split ``heldout``, fold ``dev``), in the file's
    order, each with ``metadata["bins"]`` (the entry's own ``bins``, or for the ``graded`` set rooms, doors,
    distractors and `steps_bin`).

    Raises:
        ValueError: an unknown set; its file's sha256 differs from `HELDOUT_SHA256` (the file was edited); a game's
            goal or first observation differs from the recorded digest (the engine generates another game).
    """
    import yaml

    name = heldout_set_name(name)
    path = HELDOUT_SETS[name]
    raw = path.read_bytes().replace(b"\r\n", b"\n")  # a checkout that writes CRLF line ends reads the same
    if hashlib.sha256(raw).hexdigest() != HELDOUT_SHA256[name]:
        raise ValueError(f"{path.name} was edited: its sha256 is not the one recorded for the held-out set {name!r} "
                         "(genenv.benchmarks.twx.env.HELDOUT_SHA256); rebuild it with python -m "
                         "genenv.benchmarks.twx.graded, or restore it")
    tasks = []
    for entry in yaml.safe_load(raw):
        params = entry["params"]
        task = make_task(entry["game"], params, "dev", entry["seed"], split="heldout")
        if digest(task) != entry["digest"]:
            raise ValueError(f"{task.id} ({params}): its goal and first observation differ from the ones recorded in "
                             f"{path.name}: the engine generates another game")
        task.metadata["bins"] = dict(entry.get("bins") or {
            "rooms": str(params["numLocations"]), "doors": str(params["includeDoors"]),
            "distractors": str(params["numDistractorItems"]), "steps": steps_bin(entry["steps"])})
        tasks.append(task)
    return tasks
