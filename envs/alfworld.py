"""ALFWorld environment (``genenv/ALFWorld-v0``): the real ALFWorld text games through ``alfworld`` + ``textworld``.

Engine: ``alfworld==0.4.2`` (Shridhar et al. 2021, "ALFWorld: Aligning Text and Embodied Environments for
Interactive Learning") over ``textworld``'s PDDL back-end (``textworld.envs.pddl.PddlEnv``, planning and state
updates in ``fast-downward-textworld``), with ALFWorld's own wrappers ``AlfredDemangler(shuffle=False)`` and
``AlfredInfos`` exactly as ALFWorld's ``AlfredTWEnv`` plays its text games.

Data: ``<data_dir>/alfworld/json_2.1.1/<split>/<task_type>-<Object>-<MovableRecep>-<Recep>-<scene>/<trial>/
game.tw-pddl`` (the official ALFWorld 0.4 layout; ``shared/data/SOURCES.md`` section 2): ``valid_unseen`` (134
games, the out-of-distribution evaluation split), ``valid_seen`` (140), ``train`` (here a 300-game subset, the
co-evolution seed pool). Aliases: ``test`` = valid_unseen, ``heldout`` = valid_seen. A game file's
``walkthrough`` (the expert solution) is the gold sequence and is never shown to the agent.

Two protocols (loader option ``protocol``), each its own task list:

- ``episodic`` (ALFWorld's official protocol): one game per episode. Observation = the game's text plus the
  admissible commands; action = one command (structured: matched to the admissible set after lower-casing and
  whitespace normalisation; anything else is an error observation and the episode goes on); reward 1 when
  TextWorld reports ``won``; truncation at ``max_steps`` (default 50, the usual LLM-agent budget).
  ``info``: ``task_type``, ``won``, ``steps``, ``command``, and at the episode's end ``goal_progress`` (share of
  the goal's fluent conditions met, :func:`genenv.envs.alfworld_goals.goal_progress`).
- ``single_step`` (the GenEnv paper's "multi-turn tasks decomposed into single steps"): one task per step of a
  game's expert walkthrough; the observation is the trajectory so far (intro, earlier expert commands and their
  feedback, the current admissible commands), the gold action is the next expert command, one step per episode,
  exact match (an inadmissible command scores 0 with the reason).

Rendering the first observation needs the game's intro, which only the engine can produce (about 1 s per game
for TextWorld's PDDL translation). The env's own episode provides it when it starts; anywhere else (veRL
parquet rows, single-step histories) it comes from a *game record*: the expert walkthrough replayed once and
cached on disk under ``$GENENV_CACHE/alfworld/`` (:func:`game_record`).
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import weakref
from pathlib import Path
from typing import Any

from genenv.envs.base import InvalidAction, MultiStepTaskEnv, parse_or_invalid
from genenv.envs.data import DataError, cache_dir, read_json, resolve_data_dir
from genenv.envs.parsing import parse_command
from genenv.envs.registry import register_env
from genenv.envs.task import Task
from genenv.envs.text_games import ACTIONS_HEADER, match_command, observation_text, past_observation

TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")
"""ALFWorld's six task types, in the order of its config ids 1-6 (``alfred_tw_env.TASK_TYPES``)."""
SPLITS = ("valid_unseen", "valid_seen", "train")
SPLIT_ALIASES = {"test": "valid_unseen", "heldout": "valid_seen"}
PROTOCOLS = ("episodic", "single_step")
GAMES_DIR = "json_2.1.1"
GAME_FILE = "game.tw-pddl"
RECORD_VERSION = 1
SYSTEM_PROMPT = ("You are a household robot in a text game. Each turn you see what happened and the list of "
                 "valid actions. Reply with exactly one action from that list, copied exactly, and nothing else.")
DEMO = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, and a "
        "fridge 1.\n\nYour task is to: put a cold egg in countertop." + ACTIONS_HEADER +
        "go to cabinet 1, go to countertop 1, go to fridge 1, inventory, look",
        "go to fridge 1")  # a worked turn in ALFWorld's style, not an ALFWorld game
_TASK_LINE_RE = re.compile(r"Your task is to: ([^\"\\]*)")


# ----- game files -----
def games_root(data_dir: str | Path | None = None) -> Path:
    """``<data_dir>/alfworld`` (data dir resolved as for every benchmark).

    Raises:
        DataError: the folder has no ``json_2.1.1/`` games.
    """
    root = resolve_data_dir(data_dir) / "alfworld"
    if not (root / GAMES_DIR).is_dir():
        raise DataError(f"no ALFWorld games under {root / GAMES_DIR}; point GENENV_DATA_DIR at the folder "
                        f"described in shared/data/SOURCES.md (alfworld/json_2.1.1/<split>/...), or unset it to "
                        f"use the packaged sample games")
    return root


def folder_goal(folder: str) -> dict[str, str]:
    """The goal encoded in an ALFWorld game folder name ``<task_type>-<Object>-<MovableRecep>-<Recep>-<scene>``
    (ALFRED's ``pddl_params``): ``{"task_type", "object", "receptacle", "toggle", "mrecep", "scene"}``. For
    ``look_at_obj_in_light`` the last target is the light (``toggle``), not a receptacle.

    Raises:
        DataError: the name does not have five ``-``-separated parts with a known task type.
    """
    parts = folder.split("-")
    if len(parts) != 5 or parts[0] not in TASK_TYPES:
        raise DataError(f"ALFWorld game folder {folder!r} is not <task_type>-<Object>-<MovableRecep>-<Recep>-<scene>")
    task_type, obj, mrecep, recep, scene = parts
    goal = {"task_type": task_type, "object": obj, "receptacle": "", "toggle": "",
            "mrecep": "" if mrecep == "None" else mrecep, "scene": scene}
    goal["toggle" if task_type == "look_at_obj_in_light" else "receptacle"] = recep
    return goal


def read_game(path: str | Path) -> dict[str, Any]:
    """A ``game.tw-pddl`` file: ``pddl_domain``, ``grammar``, ``pddl_problem``, ``walkthrough``.

    Raises:
        DataError: missing file, invalid JSON or missing fields (names the file).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"missing ALFWorld game file {path}")
    data = read_json(path)
    missing = [k for k in ("pddl_domain", "grammar", "pddl_problem", "walkthrough") if k not in data]
    if missing:
        raise DataError(f"{path}: missing field(s) {missing}; not an ALFWorld 0.4 game file")
    return data


def task_sentence(grammar: str) -> str:
    """The goal sentence of a game (``"examine the alarmclock with the desklamp."``) from its grammar.

    Raises:
        DataError: the grammar has no ``Your task is to:`` line.
    """
    found = _TASK_LINE_RE.search(grammar)
    if not found:
        raise DataError("ALFWorld grammar has no 'Your task is to:' line")
    return found.group(1).strip()


def game_data(task: Task) -> dict[str, Any]:
    """The game a task is played on: its file's content, with the goal replaced for environment-generated goals
    (``metadata["goal_override"]``, see :func:`genenv.envs.alfworld_goals.with_goal`)."""
    data = read_game(task.metadata["game_file"])
    override = task.metadata.get("goal_override")
    if override:
        from genenv.envs.alfworld_goals import with_goal

        data = with_goal(data, override)
    data["walkthrough"] = list(task.metadata["walkthrough"])
    return data


# ----- the engine -----
_translate_lock = threading.Lock()


def _memoise_translation() -> None:
    """Memoise ``fast_downward.pddl2sas`` (PDDL → SAS translation, a pure function of its arguments).

    TextWorld's PDDL back-end translates the game's problem twice on every ``load`` *and* every ``reset``
    (``textworld.envs.pddl.logic.PddlState``), ~0.5-1 s of Python each time; memoised, a reset of an already seen
    game takes ~0.1 s (measured). The translated task is only read afterwards, so sharing it is safe.
    """
    import functools

    import fast_downward

    with _translate_lock:
        if not hasattr(fast_downward.pddl2sas, "cache_info"):
            fast_downward.pddl2sas = functools.lru_cache(maxsize=128)(fast_downward.pddl2sas)


class ALFWorldGame:
    """One TextWorld PDDL game instance (one copy of fast-downward's library), loaded with ALFWorld's wrappers.

    Methods return ``(feedback, admissible commands, won)``. Not thread-safe: one episode at a time. Instances
    are reused through :func:`acquire_game` / :func:`release_game` rather than discarded: each holds a copy of
    fast-downward's shared library that is never unloaded (unloading copies and loading new ones crashed the
    process here).

    Raises (from its methods):
        ImportError: ``alfworld`` / ``textworld`` / ``fast-downward-textworld`` are not installed.
    """

    def __init__(self):
        try:
            import textworld
            from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
            from textworld.envs.pddl import PddlEnv
        except ImportError as exc:
            raise ImportError("genenv/ALFWorld-v0 needs `pip install alfworld==0.4.2` (it builds "
                              "fast-downward-textworld from source: g++, cmake and make)") from exc
        _memoise_translation()
        infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
        env = PddlEnv(infos)
        for wrapper in (AlfredDemangler(shuffle=False), AlfredInfos):  # as in alfworld's AlfredTWEnv
            env = wrapper(env)
        self.env = env
        self.loaded: str | None = None

    def load(self, key: str, data: dict[str, Any] | str) -> None:
        """Load a game (a file path, or a game dict for generated goals) unless ``key`` is already loaded."""
        if self.loaded != key:
            self.loaded = None
            self.env.load(data)
            self.loaded = key

    def reset(self) -> tuple[str, list[str], bool]:
        """Restart the loaded game."""
        state = self.env.reset()
        return state.feedback, list(state["admissible_commands"]), bool(state["won"])

    def step(self, command: str) -> tuple[str, list[str], bool]:
        """Play one command (TextWorld answers "Nothing happens." to a command it does not know)."""
        state, _, _ = self.env.step(command)
        return state.feedback, list(state["admissible_commands"]), bool(state["won"])

    def plan(self) -> list[str]:
        """fast-downward's plan from the current state to the goal (ALFWorld's planner expert); ``[]`` if the
        planner finds none."""
        pddl_env = self.env.unwrapped
        return list(pddl_env._pddl_state.replan(pddl_env._entity_infos))

    def facts(self) -> list[Any]:
        """The current state's facts (``textworld.logic.Proposition`` over the game's object ids)."""
        return list(self.env.unwrapped._pddl_state.facts)


_free_games: list[ALFWorldGame] = []
_games_lock = threading.Lock()


def acquire_game(key: str | None = None) -> ALFWorldGame:
    """A game instance for one episode: a released one (preferably one with game ``key`` loaded), else a new one."""
    with _games_lock:
        for i, game in enumerate(_free_games):
            if game.loaded == key:
                return _free_games.pop(i)
        if _free_games:
            return _free_games.pop()
    return ALFWorldGame()


def release_game(game: ALFWorldGame) -> None:
    """Return a game instance for reuse (its loaded game stays loaded)."""
    with _games_lock:
        _free_games.append(game)


_shared_game: ALFWorldGame | None = None
shared_lock = threading.RLock()
"""Held while the process-wide game (:func:`shared_game`) plays: records and goal validation."""


def shared_game() -> ALFWorldGame:
    """The process-wide game instance used for records and goal validation; hold :data:`shared_lock` while
    using it."""
    global _shared_game
    with shared_lock:
        if _shared_game is None:
            _shared_game = ALFWorldGame()
        return _shared_game


def game_key(game_file: str | Path, goal_override: dict[str, str] | None = None) -> str:
    """Identity of a playable game: the game file's path, plus the goal for environment-generated goals."""
    return f"{game_file}#{json.dumps(goal_override, sort_keys=True)}" if goal_override else str(game_file)


def load_task_game(game: ALFWorldGame, task: Task) -> None:
    """Load ``task``'s game into ``game`` (by file for seed games, as a dict for generated goals); a no-op when
    that game is already loaded."""
    meta = task.metadata
    key = game_key(meta["game_file"], meta.get("goal_override"))
    game.load(key, game_data(task) if meta.get("goal_override") else meta["game_file"])


# ----- game records -----
def record_key(task: Task) -> str:
    """Cache key of a task's game record: sha1 of the game file's bytes, the goal override and the gold walkthrough."""
    meta = task.metadata
    digest = hashlib.sha1(Path(meta["game_file"]).read_bytes())
    digest.update(json.dumps([meta.get("goal_override"), meta["walkthrough"]], sort_keys=True).encode())
    return digest.hexdigest()


_records: dict[str, dict[str, Any]] = {}


def game_record(task: Task) -> dict[str, Any]:
    """The expert walkthrough of ``task``'s game replayed once: ``intro`` (first observation's text),
    ``admissible`` (``len(walkthrough) + 1`` lists: before each step and after the last), ``feedback``
    (``len(walkthrough)`` texts), ``won`` (per step) and ``inadmissible`` (walkthrough commands that were not
    admissible when played; empty for every real game). Cached in memory and on disk
    (``$GENENV_CACHE/alfworld/<key>.json``); a cache miss costs one game load + replay (~1-3 s).
    """
    key = record_key(task)
    if key in _records:
        return _records[key]
    path = cache_dir() / "alfworld" / f"{key}.json"
    record = None
    if path.is_file():
        try:
            record = json.loads(path.read_text())
            if record.get("version") != RECORD_VERSION:
                record = None
        except (OSError, json.JSONDecodeError):
            record = None
    if record is None:
        with shared_lock:
            game = shared_game()
            load_task_game(game, task)
            intro, admissible, _ = game.reset()
            record = {"version": RECORD_VERSION, "intro": intro, "admissible": [admissible], "feedback": [],
                      "won": [], "inadmissible": []}
            for command in task.metadata["walkthrough"]:
                if match_command(command, admissible) is None:
                    record["inadmissible"].append(command)
                feedback, admissible, won = game.step(command)
                record["feedback"].append(feedback)
                record["admissible"].append(admissible)
                record["won"].append(won)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(path)
    _records[key] = record
    return record


# ----- loading -----
def make_task(game_file: Path, split: str, root: Path, protocol: str = "episodic") -> list[Task]:
    """The task(s) of one game file: one episodic task, or one single-step task per walkthrough step.

    Raises:
        DataError: unreadable game file or folder name.
    """
    rel = game_file.relative_to(root / GAMES_DIR)
    folder, trial = rel.parts[1], rel.parts[2]
    goal = folder_goal(folder)
    data = read_game(game_file)
    walkthrough = [str(c) for c in data["walkthrough"]]
    base_id = f"alfworld/{split}/{folder}/{trial}"
    meta = {"protocol": protocol, "task_type": goal["task_type"], "goal": goal, "game_file": str(game_file),
            "walkthrough": walkthrough}
    sentence = task_sentence(data["grammar"])
    if protocol == "episodic":
        return [Task(id=base_id, benchmark="alfworld", split=split, prompt=f"Your task is to: {sentence}",
                     gold=walkthrough, action_kind="structured", metadata=meta)]
    return [Task(id=f"{base_id}#step{i}", benchmark="alfworld", split=split, prompt=f"Your task is to: {sentence}",
                 gold=command, action_kind="structured", metadata={**meta, "step": i})
            for i, command in enumerate(walkthrough)]


def load_alfworld_tasks(split: str | None = "valid_unseen", data_dir: str | Path | None = None,
                        protocol: str = "episodic", task_types: str | list[str] | None = None,
                        per_type: int | None = None, max_walkthrough: int | None = None) -> list[Task]:
    """Tasks of ``split`` (``valid_unseen`` / ``valid_seen`` / ``train``, or the aliases ``test`` / ``heldout``),
    games in sorted path order.

    Args:
        protocol: ``episodic`` (one task per game) or ``single_step`` (one task per walkthrough step).
        task_types: keep only these task types (comma list or list).
        per_type: at most this many games per task type (the first in path order).
        max_walkthrough: only games whose expert walkthrough has at most this many commands (short games for
            short training episodes).
    Raises:
        ValueError: unknown split, protocol or task type.
        DataError: no games, or a malformed game file.
    """
    split = SPLIT_ALIASES.get(split or "valid_unseen", split or "valid_unseen")
    if split not in SPLITS:
        raise ValueError(f"unknown ALFWorld split {split!r}; choose one of {SPLITS + tuple(SPLIT_ALIASES)}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown ALFWorld protocol {protocol!r}; choose one of {PROTOCOLS}")
    if isinstance(task_types, str):
        task_types = [t.strip() for t in task_types.split(",") if t.strip()]
    unknown = set(task_types or ()) - set(TASK_TYPES)
    if unknown:
        raise ValueError(f"unknown ALFWorld task type(s) {sorted(unknown)}; choose from {TASK_TYPES}")
    root = games_root(data_dir)
    files = sorted((root / GAMES_DIR / split).glob(f"*/*/{GAME_FILE}"))
    if not files:
        raise DataError(f"no ALFWorld games in {root / GAMES_DIR / split}")
    taken: dict[str, int] = {}
    tasks: list[Task] = []
    for path in files:
        task_type = path.parent.parent.name.split("-", 1)[0]
        if task_types and task_type not in task_types:
            continue
        if per_type is not None and taken.get(task_type, 0) >= per_type:
            continue
        game_tasks = make_task(path, split, root, protocol)
        if max_walkthrough is not None and len(game_tasks[0].metadata["walkthrough"]) > max_walkthrough:
            continue
        taken[task_type] = taken.get(task_type, 0) + 1
        tasks.extend(game_tasks)
    return tasks


# ----- the environment -----
_intros: dict[str, tuple[str, list[str]]] = {}  # task id → (intro, admissible) seen by an env's own episode


@register_env("genenv/ALFWorld-v0", ({"split": "valid_unseen"}, {"split": "valid_seen"}, {"split": "train"},
                                     {"split": "valid_unseen", "protocol": "single_step"},
                                     {"split": "valid_seen", "protocol": "single_step"}))
class ALFWorldEnv(MultiStepTaskEnv):
    """``genenv/ALFWorld-v0``: ALFWorld text games, episodic or single-step protocol (see module docstring).

    Constructor: ``split``, ``protocol``, ``task_types``, ``per_type``, ``max_walkthrough`` (loader options) or
    ``tasks``; ``limit``;
    ``max_steps`` (episodic truncation, default 50; single-step tasks always end after one step).
    """

    benchmark = "alfworld"
    action_kind = "structured"
    default_max_steps = 50
    idle_text = "look"
    context_turns = 4  # lock-step runner: earlier exchanges kept in the prompt (observations carry the state)

    def __init__(self, tasks: list[Task] | None = None, split: str | None = "valid_unseen",
                 data_dir: str | None = None, limit: int | None = None, render_mode: str | None = None,
                 max_steps: int | None = None, **load_kwargs: Any):
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         max_steps=max_steps, **load_kwargs)
        self.episode_max_steps = self.max_steps
        self.game: ALFWorldGame | None = None
        self._release = None
        self.admissible: list[str] = []
        self.won = False

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, **kwargs: Any) -> list[Task]:
        """See :func:`load_alfworld_tasks`."""
        return load_alfworld_tasks(split=split or "valid_unseen", data_dir=data_dir, **kwargs)

    @classmethod
    def past_observation(cls, text: str) -> str:
        """The game text without the admissible-command list
        (:func:`genenv.envs.text_games.past_observation`)."""
        return past_observation(text)

    @classmethod
    def initial_state(cls, task: Task) -> tuple[str, list[str]]:
        """``(intro, admissible)`` of the game's first observation: from this process's episodes, else the
        game record."""
        if task.id in _intros:
            return _intros[task.id]
        record = game_record(task)
        return record["intro"], record["admissible"][0]

    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """System instructions and one demonstrated turn, then the game: episodic, its intro and admissible
        commands; single-step, the trajectory so far (intro, then each expert command as the assistant's turn and
        its feedback as the user's, the latest with the admissible commands)."""
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": DEMO[0]},
                    {"role": "assistant", "content": DEMO[1]}]
        if task.metadata["protocol"] == "episodic":
            intro, admissible = cls.initial_state(task)
            return messages + [{"role": "user", "content": observation_text(intro, admissible)}]
        record, step = game_record(task), task.metadata["step"]
        texts = [record["intro"]] + record["feedback"][:step]
        for i, text in enumerate(texts):
            if i:
                messages.append({"role": "assistant", "content": task.metadata["walkthrough"][i - 1]})
            last = i == len(texts) - 1
            messages.append({"role": "user",
                             "content": observation_text(text, record["admissible"][i]) if last else text.strip()})
        return messages

    @classmethod
    def parse_action(cls, text: str) -> str | InvalidAction:
        """One normalised command (:func:`genenv.envs.parsing.parse_command`)."""
        return parse_or_invalid(parse_command, text)

    @classmethod
    def gold_action(cls, task: Task) -> list[str]:
        """The expert walkthrough (episodic) or the next expert command (single-step), as a list of commands."""
        return list(task.gold) if task.metadata["protocol"] == "episodic" else [task.gold]

    def start(self, task: Task) -> None:
        """Episodic: load and reset the game (its intro becomes the first observation). Single-step: the state
        after the walkthrough's first ``step`` commands comes from the game record; one step per episode."""
        self.won = False
        if task.metadata["protocol"] == "single_step":
            self.max_steps = 1
            self.admissible = game_record(task)["admissible"][task.metadata["step"]]
            return
        self.max_steps = self.episode_max_steps
        if self.game is None:
            self.game = acquire_game(game_key(task.metadata["game_file"], task.metadata.get("goal_override")))
            self._release = weakref.finalize(self, release_game, self.game)  # also if the env is never closed
        load_task_game(self.game, task)
        intro, self.admissible, self.won = self.game.reset()
        _intros[task.id] = (intro, list(self.admissible))

    def invalid_observation(self, action: InvalidAction) -> str:
        """The parser's reason and the admissible commands."""
        return observation_text(f"Invalid action: {action.reason}.", self.admissible)

    def transition(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        """Match ``action`` to the admissible commands, then play it (episodic) or compare it with the next
        expert command (single-step)."""
        meta = self.task.metadata
        info: dict[str, Any] = {"task_type": meta["task_type"], "protocol": meta["protocol"], "won": self.won}
        if not isinstance(action, str):
            return (self.invalid_observation(InvalidAction("an action is one command string")), 0.0, False,
                    {**info, "success": False, "error": f"expected a command string, got {type(action).__name__}"})
        command = match_command(action, self.admissible)
        if command is None:
            obs = observation_text(f"'{action[:80]}' is not a valid action here.", self.admissible)
            return obs, 0.0, False, {**info, "success": False,
                                     "error": f"not an admissible command: {action[:80]!r}"}
        info["command"] = command
        if meta["protocol"] == "single_step":
            success = command == match_command(self.task.gold, self.admissible)
            return "", float(success), True, {**info, "success": success, "gold": self.task.gold}
        feedback, self.admissible, self.won = self.game.step(command)
        info.update(won=self.won, success=self.won)
        if self.won or self.steps + 1 >= self.max_steps:  # the episode ends: how much of the goal is met
            from genenv.envs.alfworld_goals import goal_progress

            info["goal_progress"] = goal_progress(self.game)
        return observation_text(feedback, self.admissible), float(self.won), self.won, info

    def close(self) -> None:
        """Return the game instance for reuse."""
        if self._release is not None:
            self._release()
        self.game, self._release = None, None


SAMPLE_GAMES = {"valid_unseen": 1, "valid_seen": 1, "train": 2}  # games per task type in the packaged sample


def build_sample(source: str | Path, dest: str | Path) -> list[Path]:
    """Copy a small real sample of ALFWorld games from the full data dir ``source`` into ``dest`` (same layout):
    per split and task type, the :data:`SAMPLE_GAMES` smallest game files (the quickest to load), without their
    ``traj_data.json`` (the loader needs only the game file and its folder name). Returns the copied files.

    Raises:
        DataError: ``source`` has no ALFWorld games.
    """
    import shutil

    src, out = games_root(source) / GAMES_DIR, Path(dest) / "alfworld" / GAMES_DIR
    if out.exists():
        shutil.rmtree(out)
    copied = []
    for split, per_type in SAMPLE_GAMES.items():
        by_type: dict[str, list[Path]] = {}
        for path in sorted((src / split).glob(f"*/*/{GAME_FILE}")):
            by_type.setdefault(path.parent.parent.name.split("-", 1)[0], []).append(path)
        for task_type in TASK_TYPES:
            for path in sorted(by_type.get(task_type, []), key=lambda p: (p.stat().st_size, str(p)))[:per_type]:
                target = out / path.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
                copied.append(target)
    return copied
