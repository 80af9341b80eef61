"""The ALFWorld engine: one TextWorld PDDL game with ALFWorld's own wrappers, instances reused across episodes, the
game a task is played on, and game records (a walkthrough replayed once and cached).

Engine: ``alfworld==0.4.2`` (Shridhar et al. 2021) over ``textworld``'s PDDL back-end
(``textworld.envs.pddl.PddlEnv``, planning and state updates in ``fast-downward-textworld``), with ALFWorld's
wrappers ``AlfredDemangler(shuffle=False)`` and ``AlfredInfos`` exactly as ALFWorld's ``AlfredTWEnv`` plays its
text games.
"""
from __future__ import annotations

import functools
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from genenv.benchmarks.alfworld.files import read_game
from genenv.benchmarks.alfworld.goals import with_goal
from genenv.envs.data import cache_dir
from genenv.envs.task import Task
from genenv.envs.text_games import match_command

__all__ = [
    "ALFWorldGame", "PARSERS", "acquire_game", "game_key", "game_record", "load_task_game", "release_game",
    "shared_game", "shared_lock", "translate", "write_atomically",
]

RECORD_VERSION = 1


def game_data(task: Task) -> dict[str, Any]:
    """The game a task is played on: its file's content, with the goal replaced for environment-generated goals
    (``metadata["goal_override"]``, see `genenv.benchmarks.alfworld.goals.with_goal`)."""
    data = read_game(task.metadata["game_file"])
    override = task.metadata.get("goal_override")
    if override:
        data = with_goal(data, override)
    data["walkthrough"] = list(task.metadata["walkthrough"])
    return data


# ----- the engine -----
_translate_lock = threading.Lock()


def _memoise_translation() -> None:
    """Memoise ``fast_downward.pddl2sas`` (PDDL → SAS translation, a pure function of its arguments), in memory and
    on disk.

    TextWorld's PDDL back-end translates the game's problem twice on every ``load`` *and* every ``reset``
    (``textworld.envs.pddl.logic.PddlState``; plain and ``optimize=True``), in slow Python each time: most of a
    new game's reset goes here. In memory (an LRU of 128), a reset of an already seen game is many times cheaper.
    On disk (`translation_cache`), a game translated once by any process (a server's worker processes, a later
    run) loads faster still (figures: ``lab/notes/cpu-measurements.md``, "benchmarks/alfworld/game.py"). The
    translated task is only read afterwards, so sharing it is safe.
    """
    import fast_downward

    with _translate_lock:
        if not hasattr(fast_downward.pddl2sas, "cache_info"):
            translate = fast_downward.pddl2sas

            @functools.lru_cache(maxsize=128)
            def pddl2sas(domain: str, problem: str, verbose: bool = False, optimize: bool = False):
                return translation_cache(translate, domain, problem, verbose=verbose, optimize=optimize)

            fast_downward.pddl2sas = pddl2sas


def translate(domain: str, problem: str) -> tuple[Any, str]:
    """fast-downward's PDDL → SAS translation of a game, as TextWorld's PDDL back-end runs it on ``load`` (plain,
    not optimised): ``(parsed task, SAS text)``, memoised like every translation (`_memoise_translation`)."""
    _memoise_translation()
    import fast_downward

    return fast_downward.pddl2sas(domain, problem)


def _import_translator() -> None:
    """Import fast-downward's translator as ``pddl2sas`` does: its ``options`` module parses ``sys.argv`` when first
    imported (it exits the process on arguments it does not know, such as a server's), so ``sys.argv`` is set to
    what it expects for that import and then restored. Unpickling a translated task imports it too."""
    import sys

    if "fast_downward.translate.options" in sys.modules:
        return
    argv = sys.argv
    sys.argv = ["translate.py", "domain", "task"]
    try:
        import fast_downward.translate.options  # noqa: F401 - parses sys.argv on import
    finally:
        sys.argv = argv


def translation_cache(translate, domain: str, problem: str, **options: Any):
    """``translate(domain, problem, **options)`` (``fast_downward.pddl2sas``: ``(task, sas text)``), read from
    ``$GENENV_CACHE/alfworld/sas/<sha256>.pkl.z`` when an earlier call wrote it, else computed and written there
    (zlib-compressed pickle, ~40 KB, by `write_atomically`). The key hashes the translator's version, the
    options and both PDDL texts. A file that cannot be read is translated again and rewritten. Like every file of
    `cache_dir`, it can be deleted; it is a pickle, so the cache folder must be writable only
    by its user."""
    import pickle
    import zlib

    _import_translator()
    key = hashlib.sha256(json.dumps([_translator_version(), sorted(options.items()), domain, problem]).encode())
    path = cache_dir() / "alfworld" / "sas" / f"{key.hexdigest()}.pkl.z"
    try:
        return pickle.loads(zlib.decompress(path.read_bytes()))
    except Exception:  # noqa: BLE001 - a missing or unreadable cache file: translate again, below
        result = translate(domain, problem, **options)
    write_atomically(path, zlib.compress(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL), 6))
    return result


@functools.cache
def _translator_version() -> str:
    """The installed ``fast-downward-textworld`` version (part of every translation's cache key)."""
    import importlib.metadata

    return importlib.metadata.version("fast-downward-textworld")


def write_atomically(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` through a temporary file in its folder and a rename, so that no reader (another
    thread or process) ever sees half a file. Returns ``False``, leaving nothing behind, when the folder cannot be
    written (read-only, full): a cache file is then simply not kept."""
    import os
    import tempfile

    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        return True
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        return False


PARSERS = (("textworld.envs.pddl.textgen", 8192), ("textworld.envs.pddl.logic", 256), ("textworld.logic", 8192))
"""TextWorld's ``tatsu`` parse-and-convert functions that `_memoise_parsers` memoises, with each LRU's size:
the text-grammar rules (every step's feedback), a game's logic and grammar file (every ``load``), and the
conjunctive queries of grammar conditions (every derivation)."""


def _memoise_parsers() -> None:
    """Memoise TextWorld's parses (``_parse_and_convert`` of each module of `PARSERS`).

    TextWorld parses each text-grammar rule string afresh with ``tatsu`` on every derivation (over half of an
    ALFWorld step), the game's logic and grammar file on every ``load`` and each grammar condition on every
    ``replace`` / ``query``; profiled with cProfile (figures: ``lab/notes/cpu-measurements.md``,
    "benchmarks/alfworld/game.py"). Each parse is a pure function of its text and rule name. The LRU keeps the
    result pickled and every call unpickles its own copy (callers set contexts on symbols and add types to a
    logic; unpickling is several times faster than ``copy.deepcopy``).
    Gold episodes give identical observations and rewards with and without it (``tests/test_alfworld.py``). Calls
    with the ``trace`` flag or other parser options, or arguments that are not strings, go to the parser as before.
    """
    import importlib
    import pickle

    with _translate_lock:
        for name, size in PARSERS:
            module = importlib.import_module(name)
            parse = module._parse_and_convert
            if hasattr(parse, "memoised"):
                continue

            @functools.lru_cache(maxsize=size)
            def cached(text: str, rule_name: str, parse=parse) -> bytes:
                return pickle.dumps(parse(text, rule_name=rule_name), protocol=pickle.HIGHEST_PROTOCOL)

            def memoised(text, rule_name=None, trace=False, *, parse=parse, cached=cached, **options):
                if trace or options or not isinstance(text, str) or not isinstance(rule_name, str):
                    return parse(text, rule_name=rule_name, trace=trace, **options)
                return pickle.loads(cached(text, rule_name))

            memoised.memoised, memoised.parse = cached, parse  # the cache, and the parser it wraps
            module._parse_and_convert = memoised


def _copy_contexts_shallowly() -> None:
    """Make TextWorld's text-grammar context copy (``textworld.envs.pddl.textgen.copy_context``) copy the
    ``variables`` and ``mapping`` dicts instead of deep-copying their values.

    ``copy_context`` runs for every symbol of every derivation and deep-copies each entity's ``EntityInfo`` and each
    placeholder's ``Variable``: a large share of an ALFWorld step's time (cProfile, after the parse memo; figures:
    ``lab/notes/cpu-measurements.md``, "benchmarks/alfworld/game.py"). Derivation only
    adds keys to the copied dicts (``query``'s ``update``); the grammars' expressions only read attributes
    (``o.name``, ``r.indefinite``, ``r.name or r.id``, ... in every ALFWorld game), so the values can be shared. Gold
    episodes give identical observations and rewards either way (``tests/test_alfworld.py``).
    """
    import textworld.envs.pddl.textgen as textgen

    with _translate_lock:
        if hasattr(textgen.copy_context, "deep"):
            return
        deep = textgen.copy_context

        def copy_context(context):
            return {"state": context["state"], "facts": context["facts"], "variables": dict(context["variables"]),
                    "mapping": dict(context["mapping"]), "entity_infos": context["entity_infos"]}

        copy_context.deep = deep  # the copy it replaces
        textgen.copy_context = copy_context


class ALFWorldGame:
    """One TextWorld PDDL game instance (one copy of fast-downward's library), loaded with ALFWorld's wrappers.

    Methods return ``(feedback, admissible commands, won)``. Not thread-safe: one episode at a time. Instances
    are reused through `acquire_game` / `release_game` rather than discarded: each holds a copy of
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
        _memoise_parsers()
        _copy_contexts_shallowly()
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
"""Held while the process-wide game (`shared_game`) plays: records and goal validation."""


def shared_game() -> ALFWorldGame:
    """The process-wide game instance used for records and goal validation; hold `shared_lock` while
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
    (``$GENENV_CACHE/alfworld/<key>.json``); a cache miss costs one game load + replay (figures:
    ``lab/notes/cpu-measurements.md``, "benchmarks/alfworld/game.py").
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
        write_atomically(path, json.dumps(record).encode())
    _records[key] = record
    return record
