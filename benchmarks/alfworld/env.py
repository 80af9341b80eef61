"""ALFWorld environment (``genenv/ALFWorld-v0``): the real ALFWorld text games through ``alfworld`` + ``textworld``.

Engine: ``alfworld==0.4.2`` (Shridhar et al. 2021, "ALFWorld: Aligning Text and Embodied Environments for
Interactive Learning") through `genenv.benchmarks.alfworld.game`.

Data: ``<data_dir>/alfworld/json_2.1.1/<split>/<task_type>-<Object>-<MovableRecep>-<Recep>-<scene>/<trial>/
game.tw-pddl`` (the official ALFWorld 0.4 layout; ``shared/data/SOURCES.md`` section 2): ``valid_unseen`` (134
games, the out-of-distribution evaluation split), ``valid_seen`` (140), ``train`` (here a 300-game subset, the
co-evolution seed pool). Aliases: ``test`` = valid_unseen, ``heldout`` = valid_seen. A game file's
``walkthrough`` (the expert solution) is the gold sequence and is never shown to the agent.

Two protocols (loader option ``protocol``), each its own task list:

- ``episodic`` (ALFWorld's official protocol): one game per episode. Observation = the game's text plus the
  admissible commands; action = one command; reward 1 when TextWorld reports ``won``; truncation at
  ``max_steps`` (default 50, the usual LLM-agent budget).
  ``info``: ``task_type``, ``won``, ``steps``, ``command``, ``executed`` (steps so far whose text was an
  admissible command, i.e. that the game played), and at the episode's end ``goal_progress`` (share of the
  goal's fluent conditions met, `genenv.benchmarks.alfworld.goals.goal_progress`).
- ``single_step`` (the GenEnv paper's "multi-turn tasks decomposed into single steps"): one task per step of a
  game's expert walkthrough; the observation is the trajectory so far (intro, earlier expert commands and their
  feedback, the current admissible commands), the gold action is the next expert command, one step per episode,
  exact match (an inadmissible command scores 0 with the reason).

Reading model text (the env's ``parsing`` option, `genenv.envs.parsing.PARSING_MODES`):

- ``official`` (default): the raw model text goes to the game, as in ALFWorld's ``AlfredTWEnv`` (TextWorld's
  PDDL back-end, ``textworld/envs/pddl/pddl.py: PddlEnv.step``, strips the text and looks it up exactly among
  the valid commands; anything else leaves the state unchanged and answers "Nothing happens."). Single-step
  tasks: correct iff the stripped text equals the next expert command.
- ``lenient``: `genenv.envs.parsing.parse_command` (``<answer>`` content or the text after the last
  ``Action:``; its first line; ``>`` / ``Action:`` / ``Command:`` prefixes, quotes, backticks and a trailing
  ``.``/``!`` dropped; ``<think>`` blocks removed), then matched to the admissible commands after lower-casing
  and whitespace normalisation; text that matches none is not played: an error observation, reward 0, the step
  counts.

Rendering the first observation needs the game's intro, which only the engine can produce (slowly: TextWorld's
PDDL translation of each game; figures: ``lab/notes/cpu-measurements.md``, "benchmarks/alfworld/env.py"). The env's
own episode provides it when it starts; anywhere else (veRL parquet rows, single-step histories) it comes from a
*game record*: the expert walkthrough replayed once and cached on disk under ``$GENENV_CACHE/alfworld/``
(`game_record`).
"""
from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

from genenv.benchmarks.alfworld.data import games_root
from genenv.benchmarks.alfworld.files import GAME_FILE, GAMES_DIR, TASK_TYPES, folder_goal, read_game, task_sentence
from genenv.benchmarks.alfworld.game import (ALFWorldGame, acquire_game, game_key, game_record, load_task_game,
                                             release_game)
from genenv.benchmarks.alfworld.goals import goal_progress
from genenv.envs.base import InvalidAction, MultiStepTaskEnv, parse_or_invalid
from genenv.envs.data import DataError
from genenv.envs.parsing import parse_command, raw_text
from genenv.envs.task import Task
from genenv.envs.text_games import ACTIONS_HEADER, match_command, observation_text, past_observation

__all__ = ["ALFWorldEnv", "SPLITS", "SPLIT_OPTIONS", "load_alfworld_tasks"]

SPLITS = ("valid_unseen", "valid_seen", "train")
SPLIT_ALIASES = {"test": "valid_unseen", "heldout": "valid_seen"}
PROTOCOLS = ("episodic", "single_step")
SPLIT_OPTIONS = ({"split": "valid_unseen"}, {"split": "valid_seen"}, {"split": "train"},
                 {"split": "valid_unseen", "protocol": "single_step"},
                 {"split": "valid_seen", "protocol": "single_step"})
SYSTEM_PROMPT = ("You are a household robot in a text game. Each turn you see what happened and the list of "
                 "valid actions. Reply with exactly one action from that list, copied exactly, and nothing else.")
DEMO = ("You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, and a "
        "fridge 1.\n\nYour task is to: put a cold egg in countertop." + ACTIONS_HEADER +
        "go to cabinet 1, go to countertop 1, go to fridge 1, inventory, look",
        "go to fridge 1")  # a worked turn in ALFWorld's style, not an ALFWorld game


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


class ALFWorldEnv(MultiStepTaskEnv):
    """``genenv/ALFWorld-v0``: ALFWorld text games, episodic or single-step protocol (see module docstring).

    Constructor: ``split``, ``protocol``, ``task_types``, ``per_type``, ``max_walkthrough`` (loader options) or
    ``tasks``; ``limit``; ``max_steps`` (episodic truncation, default 50; single-step tasks always end after one
    step); ``parsing`` (``"official"``: the raw text goes to the game; ``"lenient"``: see the module docstring).
    """

    extra = "alfworld"
    extra_modules = ("alfworld", "textworld")
    benchmark = "alfworld"
    action_kind = "structured"
    ability = "embodied"
    thread_safe = False  # TextWorld's game loading and PDDL state are shared by the games of one process
    default_max_steps = 50
    idle_text = "look"
    prompt_window = 4  # earlier exchanges kept in the prompt (PromptWindow; observations carry the state)

    def __init__(self, tasks: list[Task] | None = None, split: str | None = "valid_unseen",
                 data_dir: str | None = None, limit: int | None = None, render_mode: str | None = None,
                 max_steps: int | None = None, parsing: str = "official", **load_kwargs: Any):
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         max_steps=max_steps, parsing=parsing, **load_kwargs)
        self.episode_max_steps = self.max_steps
        self.game: ALFWorldGame | None = None
        self._release = None
        self.admissible: list[str] = []
        self.won = False
        self.executed = 0  # steps of this episode whose text was an admissible command (the game played it)

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, **kwargs: Any) -> list[Task]:
        """See `load_alfworld_tasks`."""
        return load_alfworld_tasks(split=split or "valid_unseen", data_dir=data_dir, **kwargs)

    @classmethod
    def past_observation(cls, text: str) -> str:
        """The game text without the admissible-command list
        (`genenv.envs.text_games.past_observation`)."""
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
    def parse_lenient(cls, text: str) -> str | InvalidAction:
        """Lenient reading: one normalised command (`genenv.envs.parsing.parse_command`)."""
        return parse_or_invalid(parse_command, text)

    @classmethod
    def parse_official(cls, text: str) -> str | InvalidAction:
        """Official reading: the raw text, unchanged (the game strips it and matches it exactly; see the module
        docstring). Only text that is not a string or longer than
        `MAX_ACTION_CHARS` is refused (a bound of ours, before the game)."""
        return parse_or_invalid(raw_text, text)

    @classmethod
    def gold_action(cls, task: Task) -> list[str]:
        """The expert walkthrough (episodic) or the next expert command (single-step), as a list of commands."""
        return list(task.gold) if task.metadata["protocol"] == "episodic" else [task.gold]

    def start(self, task: Task) -> None:
        """Episodic: load and reset the game (its intro becomes the first observation). Single-step: the state
        after the walkthrough's first ``step`` commands comes from the game record; one step per episode."""
        self.won, self.executed = False, 0
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
        """Lenient: match ``action`` to the admissible commands, then play it (episodic) or compare it with the
        next expert command (single-step). Official: the text goes to the game as it is (see the module
        docstring)."""
        meta = self.task.metadata
        info: dict[str, Any] = {"task_type": meta["task_type"], "protocol": meta["protocol"], "won": self.won,
                                "executed": self.executed}
        if not isinstance(action, str):
            return (self.invalid_observation(InvalidAction("an action is one command string")), 0.0, False,
                    {**info, "success": False, "error": f"expected a command string, got {type(action).__name__}"})
        if self.parsing == "official":
            return self.official_transition(action, info)
        command = match_command(action, self.admissible)
        if command is None:
            obs = observation_text(f"'{action[:80]}' is not a valid action here.", self.admissible)
            return obs, 0.0, False, {**info, "success": False,
                                     "error": f"not an admissible command: {action[:80]!r}"}
        info["command"] = command
        self.executed = info["executed"] = self.executed + 1
        if meta["protocol"] == "single_step":
            success = command == match_command(self.task.gold, self.admissible)
            return "", float(success), True, {**info, "success": success, "gold": self.task.gold}
        feedback, self.admissible, self.won = self.game.step(command)
        info.update(won=self.won, success=self.won)
        return observation_text(feedback, self.admissible), float(self.won), self.won, info

    def step(self, action: Any):
        """`MultiStepTaskEnv.step`, with ``info["executed"]`` after every step (also after text that could
        not be read) and, when an episodic game ends (won or truncated, whatever the last text was),
        ``info["goal_progress"]``."""
        obs, reward, terminated, truncated, info = super().step(action)
        info.setdefault("executed", self.executed)
        if (terminated or truncated) and self.task.metadata["protocol"] == "episodic":
            info["goal_progress"] = goal_progress(self.game)
        return obs, reward, terminated, truncated, info

    def official_transition(self, text: str, info: dict[str, Any]) -> tuple[str, float, bool, dict[str, Any]]:
        """One step under the official reading: episodic, the game plays ``text`` (TextWorld strips it and
        answers "Nothing happens." unless it is exactly a valid command); single-step, correct iff the stripped
        text equals the next expert command. ``info["error"]`` names text that is not exactly admissible."""
        command = text.strip()
        admissible = command in self.admissible
        info["command"] = command[:200]
        self.executed = info["executed"] = self.executed + admissible
        error = "" if admissible else f"not exactly an admissible command (official parsing): {command[:80]!r}"
        if self.task.metadata["protocol"] == "single_step":  # not admissible: the game's answer; truncated
            success = command == self.task.gold
            obs = "" if admissible else observation_text("Nothing happens.", self.admissible)
            return obs, float(success), admissible, {**info, "success": success, "gold": self.task.gold,
                                                     "error": error}
        feedback, self.admissible, self.won = self.game.step(text)
        info.update(won=self.won, success=self.won, error=error)
        return observation_text(feedback, self.admissible), float(self.won), self.won, info

    def close(self) -> None:
        """Return the game instance for reuse."""
        if self._release is not None:
            self._release()
        self.game, self._release = None, None
