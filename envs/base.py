"""Base classes of the benchmark environments: `TaskEnv` (every env; single-step by itself) and
`MultiStepTaskEnv` (its multi-step subclass).

An episode is one `Task`: ``reset`` picks a task and returns its prompt as the
observation. In a single-step env (BFCL single-turn, Bamboogle) ``step(action)`` scores the action against the
gold answer and terminates; in a multi-step env (text games) ``step`` advances the episode's state and returns the
next observation until the task is won, lost, or ``max_steps`` truncates it. The environment takes
*structured* actions (a list of tool calls) or *free text* (a string); `TextActionWrapper`
turns raw model text into them through `TaskEnv.read_action`, and a parse failure arrives here as an
`InvalidAction`, scored 0 with ``info["error"]``. Every env has a ``parsing`` option
(`PARSING_MODES`): ``"official"`` (default) reads model text as the benchmark's
official harness does (`TaskEnv.parse_official`), ``"lenient"`` with our forgiving parsers
(`TaskEnv.parse_lenient`); training configs choose (``parsing`` in ``configs/train.yaml``), evaluation
under the official label always uses ``"official"``.

Subclasses set ``benchmark`` and implement `load_tasks`, `render_messages`, `parse_lenient`,
`gold_action` / `gold_text` (the gold policy's action, used to prove env and reward agree), and either
`TaskEnv.score` (single-step) or `MultiStepTaskEnv.start` / `MultiStepTaskEnv.transition`.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import gymnasium as gym
from genenv.envs.extras import require_extra
from genenv.envs.registry import ENVS
from genenv.envs.parsing import ActionParseError, ToolCall, check_parsing
from genenv.envs.spaces import UnicodeText
from genenv.envs.task import Task

__all__ = ["InvalidAction", "MultiStepTaskEnv", "TaskEnv", "parse_or_invalid"]


@dataclass(frozen=True)
class InvalidAction:
    """An action that could not be parsed from model text; ``reason`` goes to ``info["error"]``."""

    reason: str
    raw: str = ""


def parse_or_invalid(parser: Callable[[str], Any], text: str) -> Any:
    """``parser(text)``, or an `InvalidAction` carrying the `ActionParseError`'s message."""
    try:
        return parser(text)
    except ActionParseError as exc:
        return InvalidAction(str(exc), text if isinstance(text, str) else "")


class TaskEnv(gym.Env, abc.ABC):
    """The base of every benchmark env: an episode over one task of a fixed list. Its own ``step`` is a
    single-step episode (`score` the action, terminate); `MultiStepTaskEnv` replaces ``step`` with
    its episode of several steps and keeps the rest (tasks, reset, the readings of model text, the gold policy).

    Args:
        tasks: the tasks to serve; if ``None`` they are loaded with `load_tasks` from ``split``.
        split: split or category name passed to `load_tasks`.
        data_dir: data directory (see `genenv.envs.data.resolve_data_dir`).
        limit: keep only the first ``limit`` tasks (after loading).
        render_mode: ``None`` or ``"ansi"`` (``render()`` returns the current prompt and last result).
        parsing: ``"official"`` (the official harness's reading of model text, `parse_official`) or
            ``"lenient"`` (ours, `parse_lenient`); see `PARSING_MODES`.
        **load_kwargs: benchmark-specific loader options.

    ``reset(options={"task_index": i})`` or ``{"task_id": id}`` selects a task; otherwise one is drawn with the
    environment's seeded RNG. Observation: the rendered prompt (``str``). ``info`` after reset: ``task_id``,
    ``messages`` (chat messages for a chat model), ``tools``. ``info`` after step: ``success`` (bool),
    ``error`` (str, empty if none) and the benchmark's metric parts.

    A subclass whose benchmark needs an optional extra names it in ``extra`` and the modules it imports in
    ``extra_modules``; constructing it without them raises before anything is loaded.

    Raises:
        ValueError: no tasks to serve, an unknown ``parsing`` setting, or an unknown ``task_id`` /
            out-of-range ``task_index``.
        genenv.envs.extras.MissingExtra: ``extra_modules`` are not installed (the message names ``extra``).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}
    benchmark: ClassVar[str] = ""
    action_kind: ClassVar[str] = "structured"
    ability: ClassVar[str] = ""  # veRL's ``ability`` label of the env's parquet rows (verl_rows); "": the benchmark
    multi_step: ClassVar[bool] = False
    accepts_tool_calls: ClassVar[bool] = False  # a list of ToolCall is an action (action_from_calls), not only text
    thread_safe: ClassVar[bool] = True  # False: episodes of this class in one process run one call at a time
    prompt_window: ClassVar[int | None] = None  # earlier exchanges kept in the prompt (None: all; PromptWindow)
    extra: ClassVar[str] = ""  # the pip extra of genenv that installs extra_modules (genenv.envs.extras)
    extra_modules: ClassVar[tuple[str, ...]] = ()  # top-level modules the env needs beyond the core install

    def __init__(self, tasks: list[Task] | None = None, split: str | None = None, data_dir: str | None = None,
                 limit: int | None = None, render_mode: str | None = None, parsing: str = "official",
                 **load_kwargs: Any):
        if self.extra_modules:
            entry = ENVS.get(self.benchmark)
            require_extra(self.extra, *self.extra_modules, needed_by=entry.env_id if entry else type(self).__name__)
        self.parsing = check_parsing(parsing)
        if tasks is None:
            tasks = self.load_tasks(split=split, data_dir=data_dir, **load_kwargs)
        if limit is not None:
            tasks = tasks[:limit]
        if not tasks:
            raise ValueError(f"{type(self).__name__}: no tasks (split={split!r}, limit={limit})")
        self.tasks = list(tasks)
        self._index = {t.id: i for i, t in enumerate(self.tasks)}
        self.render_mode = render_mode
        self.observation_space = UnicodeText()
        self.action_space = self.make_action_space()
        self.task: Task | None = None
        self._last: dict[str, Any] = {}
        self._messages: dict[str, list[dict[str, str]]] = {}

    # ----- to implement per benchmark -----
    @classmethod
    @abc.abstractmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, **kwargs: Any) -> list[Task]:
        """Load the benchmark's tasks of ``split`` from the data directory."""

    @classmethod
    @abc.abstractmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """Chat messages (``[{"role", "content"}]``) that present ``task`` to a chat model."""

    @classmethod
    @abc.abstractmethod
    def parse_lenient(cls, text: str) -> Any:
        """Turn raw model text into this env's action, or an `InvalidAction` with the reason: the
        ``lenient`` reading (every accepted form listed in the env's docstring)."""

    @classmethod
    def parse_official(cls, text: str) -> Any:
        """The ``official`` reading of model text: as the benchmark's official harness reads it. Default: the same
        as `parse_lenient` (for benchmarks whose official reading is ours; ``docs/official-differences.md``
        says so per benchmark); envs whose harness reads text differently override it."""
        return cls.parse_lenient(text)

    def read_action(self, text: str) -> Any:
        """``text`` read under this env's ``parsing`` setting (`parse_official` or `parse_lenient`);
        an `InvalidAction` when it cannot be read."""
        return self.parse_official(text) if self.parsing == "official" else self.parse_lenient(text)

    @abc.abstractmethod
    def score(self, task: Task, action: Any) -> tuple[float, dict[str, Any]]:
        """Reward in [0, 1] and ``info`` (with ``success`` and ``error``) of ``action`` on ``task``."""

    @classmethod
    @abc.abstractmethod
    def gold_action(cls, task: Task) -> Any:
        """The action that solves ``task`` (the gold policy's action); multi-step envs: the list of actions."""

    @classmethod
    @abc.abstractmethod
    def gold_text(cls, task: Task, turn: int = 0) -> str:
        """The gold action of ``turn`` (0-based; single-step envs have only turn 0) as model text that
        `parse_lenient` turns back into the gold action."""

    @classmethod
    def action_from_calls(cls, calls: list[ToolCall]) -> Any:
        """The env's action for structured tool calls (a client that sends calls instead of model text): the list
        itself where `accepts_tool_calls` is set, for envs whose actions are lists of calls.

        Raises:
            ValueError: this env takes model text only (its actions are not tool calls), or ``calls`` is empty.
        """
        if not cls.accepts_tool_calls:
            raise ValueError(f"{cls.__name__} takes model text, not tool calls")
        if not calls:
            raise ValueError("no tool call given")
        return list(calls)

    @classmethod
    def past_observation(cls, text: str) -> str:
        """How an observation is shown in the prompt once it is no longer the latest (with ``prompt_window``
        set, `PromptWindow`); unchanged by default."""
        return text

    def make_action_space(self) -> gym.Space:
        """The action space; free-text envs use `UnicodeText`."""
        return UnicodeText()

    # ----- Gymnasium API -----
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode on one task; returns ``(prompt, info)``."""
        self.select_task(seed, options)
        return self.first_observation()

    def select_task(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Task:
        """Seed the env (Gymnasium's ``reset(seed=...)``) and pick the episode's task: ``options["task_id"]``,
        ``options["task_index"]``, else one drawn with the env's RNG. Sets and returns ``self.task``.

        Raises:
            ValueError: an unknown ``task_id`` or an out-of-range ``task_index``.
        """
        gym.Env.reset(self, seed=seed)
        options = options or {}
        if "task_id" in options:
            if options["task_id"] not in self._index:
                raise ValueError(f"unknown task_id {options['task_id']!r}")
            idx = self._index[options["task_id"]]
        elif "task_index" in options:
            idx = int(options["task_index"])
            if not 0 <= idx < len(self.tasks):
                raise ValueError(f"task_index {idx} out of range 0..{len(self.tasks) - 1}")
        else:
            idx = int(self.np_random.integers(len(self.tasks)))
        self.task = self.tasks[idx]
        self._last = {}
        return self.task

    def first_observation(self) -> tuple[str, dict[str, Any]]:
        """``(prompt, info)`` of the selected task: the last rendered message and ``info`` with ``task_id``,
        ``messages`` (the chat messages, rendered once per task) and ``tools``."""
        if self.task.id not in self._messages:  # rendered once per task (resets repeat for n rollouts)
            self._messages[self.task.id] = self.render_messages(self.task)
        messages = [dict(m) for m in self._messages[self.task.id]]
        info = {"task_id": self.task.id, "messages": messages, "tools": self.task.tools}
        return messages[-1]["content"], info

    def step(self, action: Any):
        """Score ``action``; the episode always terminates. Returns ``("", reward, True, False, info)``."""
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if isinstance(action, InvalidAction):
            reward, info = self.score_invalid(self.task, action)
        else:
            try:
                reward, info = self.score(self.task, action)
            except (TypeError, ValueError) as exc:  # a structurally wrong action from a scripted agent
                reward, info = 0.0, {"success": False, "error": f"invalid action: {exc}"}
        info.setdefault("error", "")
        info["task_id"] = self.task.id
        self._last = {"reward": reward, **info}
        return "", float(reward), True, False, info

    def score_invalid(self, task: Task, action: InvalidAction) -> tuple[float, dict[str, Any]]:
        """Score of an unparseable action: 0 with the reason (BFCL irrelevance overrides this)."""
        return 0.0, {"success": False, "error": action.reason}

    def render(self):
        """ANSI render: the current prompt and, after a step, the reward and error."""
        if self.render_mode != "ansi" or self.task is None:
            return None
        text = self.render_messages(self.task)[-1]["content"]
        if self._last:
            text += f"\n-> reward {self._last['reward']:.3f} {self._last.get('error', '')}"
        return text


class MultiStepTaskEnv(TaskEnv):
    """An episode of several steps over one task (a text game, a multi-turn tool session).

    Subclasses implement `start` (set up the episode's state for ``self.task``), `transition`
    (apply one parsed action) and `gold_action` (the gold policy's model texts, one per step); `score` is
    not used. The base class counts steps, truncates at
    ``max_steps``, and turns an `InvalidAction` into an observation that says what was wrong (reward 0,
    ``info["error"]``, the episode goes on and the step counts). ``info`` after each step: ``success``,
    ``error``, ``steps``, ``max_steps``, ``task_id`` and the subclass's fields.

    Args:
        max_steps: steps before truncation (default: the class's ``default_max_steps``).
        Other arguments as for `TaskEnv`.
    """

    multi_step: ClassVar[bool] = True
    default_max_steps: ClassVar[int] = 20
    idle_text: ClassVar[str] = ""  # the gold policy's reply once its gold sequence is used up

    def __init__(self, tasks: list[Task] | None = None, split: str | None = None, data_dir: str | None = None,
                 limit: int | None = None, render_mode: str | None = None, max_steps: int | None = None,
                 parsing: str = "official", **load_kwargs: Any):
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         parsing=parsing, **load_kwargs)
        self.max_steps = int(max_steps or self.default_max_steps)
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.steps = 0
        self.done = False

    @abc.abstractmethod
    def start(self, task: Task) -> None:
        """Set up the episode of ``task`` (called by `reset`)."""

    @abc.abstractmethod
    def transition(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        """Apply one parsed action: ``(observation, reward, terminated, info)``; ``info`` carries ``success``."""

    @classmethod
    def gold_text(cls, task: Task, turn: int = 0) -> str:
        """Step ``turn`` of `gold_action` (model texts), or `idle_text` past its end."""
        steps = cls.gold_action(task)
        return steps[turn] if turn < len(steps) else cls.idle_text

    def invalid_observation(self, action: InvalidAction) -> str:
        """The observation shown after an unparseable action."""
        return f"Invalid action: {action.reason}"

    def score(self, task: Task, action: Any) -> tuple[float, dict[str, Any]]:
        """Not used by multi-step envs (their reward comes from `transition`)."""
        raise TypeError(f"{type(self).__name__} is multi-step: use reset() and step()")

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        """Pick the task (see `TaskEnv.reset`), start its state (`start`), then render the first
        observation (so an env whose first observation comes from its engine renders it from the started
        episode instead of loading the game twice)."""
        self.select_task(seed, options)
        self.steps, self.done = 0, False
        self.start(self.task)
        return self.first_observation()

    def step(self, action: Any):
        """One step; returns ``(observation, reward, terminated, truncated, info)``.

        Raises:
            RuntimeError: ``step`` before ``reset`` or after the episode ended.
        """
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        if self.done:
            raise RuntimeError("the episode is over; call reset()")
        if isinstance(action, InvalidAction):
            obs, reward, terminated, info = self.invalid_observation(action), 0.0, False, {
                "success": False, "error": action.reason}
        else:
            obs, reward, terminated, info = self.transition(action)
        self.steps += 1
        truncated = not terminated and self.steps >= self.max_steps
        self.done = terminated or truncated
        info.setdefault("error", "")
        info.setdefault("success", False)
        info.update(task_id=self.task.id, steps=self.steps, max_steps=self.max_steps)
        self._last = {"reward": reward, **info, "observation": obs}
        return obs, float(reward), bool(terminated), bool(truncated), info

    def render(self):
        """ANSI render: the last observation (or the prompt before the first step) and the step count."""
        if self.render_mode != "ansi" or self.task is None:
            return None
        if not self._last:
            return self.render_messages(self.task)[-1]["content"]
        return f"[step {self.steps}/{self.max_steps}] {self._last['observation']}"
