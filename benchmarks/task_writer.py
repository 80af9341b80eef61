"""The task-writer part of a benchmark spec: what the environment policy is asked for and how its text becomes a
task. `TaskWriter` holds the prompt (the benchmark's format, seed tasks from the training pool as
demonstrated turns, the agent's recent success rate or EnvGen's per-skill rates), the JSON Schema of one generation
(structured decoding), the strict-JSON parser and the validator, and the near-duplicate check. A generation that
fails any check is a `Rejection` with a reason from a fixed vocabulary, counted by the trainer and given
environment-policy reward 0; it never enters the task pool. `BenchmarkSpec` joins
it with the benchmark's evaluation part; the trainer's task writing (`genenv.trainer.generation`) and the env
server's inline tasks use only this part.
"""
from __future__ import annotations

import abc
import json
import random
from dataclasses import dataclass
from typing import Any, Sequence

from genenv.benchmarks.bounded_schema import fits
from genenv.envs.parsing import raw_decode_json
from genenv.envs.task import Task

__all__ = ["Rejection", "TaskWriter", "extract_json_object", "final_request"]

NEAR_DUPLICATE_THRESHOLD = 90.0  # rapidfuzz token_set_ratio (0-100) at or above which a task is a near-duplicate


@dataclass(frozen=True)
class Rejection:
    """A generated task that was not admitted: ``reason`` (a short key counted in metrics) and ``detail``."""

    reason: str
    detail: str = ""


def extract_json_object(text: str) -> dict[str, Any] | Rejection:
    """The first complete JSON object in generated text, strictly parsed.

    Scans to the first ``{`` and decodes one value with `genenv.envs.parsing.raw_decode_json` (standard
    JSON, no repair; numeric literals and nesting bounded as for agent actions); text after the object (small
    models often add stray braces or commentary) is ignored. Returns a `Rejection` (``no_json`` /
    ``invalid_json`` / ``not_object``) instead of raising.
    """
    if not isinstance(text, str) or len(text) > 20_000:
        return Rejection("no_json", "output is not a string or is too long")
    start = text.find("{")
    if start < 0:
        return Rejection("no_json", "no {...} object in the output")
    try:
        obj, _ = raw_decode_json(text, start)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, or ActionParseError: a bound exceeded
        return Rejection("invalid_json", str(exc)[:200])
    if not isinstance(obj, dict):
        return Rejection("not_object", type(obj).__name__)
    return obj


def final_request(ask: str, p_hat: float | None, alpha: float, feedback: str | None = None) -> str:
    """The generation prompt's last user turn: ``feedback`` (EnvGen) or the α-curriculum feedback (the agent's
    recent success rate p̂ and the target α), then ``ask``."""
    if feedback is not None:
        return f"{feedback} {ask} Make it different from the previous ones."
    rate = f"The agent currently solves {p_hat:.0%} of such tasks. " if p_hat is not None else ""
    return f"{rate}{ask} Make it different from the previous ones, so that the agent solves it about " \
           f"{alpha:.0%} of the time."


class TaskWriter(abc.ABC):
    """The task-writer part of a benchmark spec (see the module docstring).

    Class attributes: ``name`` (the benchmark's registry key, the default skill), ``rejection_reasons`` (the spec's
    own reasons; `all_rejection_reasons` adds the shared ones), ``generation_system_prompt``,
    ``grounding_reasons`` (the reasons only grounded validation gives; empty: no such rules).

    Args:
        grounded: grounded validation (``generation.grounded``): gold values must be stated in the request.
    """

    name: str = ""
    rejection_reasons: tuple[str, ...] = ()
    COMMON_REJECTION_REASONS = ("no_json", "invalid_json", "not_object", "near_duplicate")

    def __init__(self, grounded: bool = True):
        self._grounded = bool(grounded)

    @property
    def grounded(self) -> bool:
        """Grounded validation of generated tasks (``generation.grounded``; fixed when the spec is made, so a
        shared instance never changes): ``False`` checks format, types and execution only."""
        return self._grounded

    @property
    def all_rejection_reasons(self) -> tuple[str, ...]:
        """Every reason a generation of this benchmark can be rejected for (the metrics' vocabulary)."""
        return self.COMMON_REJECTION_REASONS + tuple(self.rejection_reasons)

    def generation_messages(self, seeds: Sequence[Task], p_hat: float | None, alpha: float,
                            feedback: str | None = None) -> list[dict[str, str]]:
        """Chat messages asking the environment policy for one new task in strict JSON.

        Layout: the benchmark's system instructions; each seed task as a demonstrated turn (a request, then the
        seed in the output JSON format as the assistant's reply: small models copy a demonstrated format far
        more reliably than a described one); finally the request carrying the feedback: by default (GenEnv) the
        agent's recent success rate p̂ and the target rate α (`final_request`); ``feedback``
        replaces it (EnvGen's per-skill success rates, `genenv.trainer.generation`).
        """
        ask = "Write one new task as a single JSON object."
        messages = [{"role": "system", "content": self.generation_system_prompt}]
        for seed in seeds:
            messages += [{"role": "user", "content": ask},
                         {"role": "assistant", "content": json.dumps(self.as_generation(seed), ensure_ascii=False)}]
        messages.append({"role": "user", "content": final_request(ask, p_hat, alpha, feedback)})
        return messages

    def skill_of(self, task: Task) -> str:
        """The skill ``task`` exercises (EnvGen's unit of feedback: the agent's success rate is reported per
        skill); one skill for the whole benchmark by default."""
        return self.name

    generation_system_prompt: str = ""
    grounding_reasons: tuple[str, ...] = ()  # the reasons only grounded validation gives (empty: no such rules)

    def generation_schema(self, seeds: Sequence[Task]) -> dict[str, Any] | None:
        """The JSON Schema of one generation (the format `as_generation` writes, properties in its order),
        for structured decoding (`genenv.runtime.grammar`); ``seeds`` are the prompt's
        demonstrations (a spec may narrow the schema to their context, e.g. ALFWorld's scene). ``None`` (the
        default): the environment policy samples freely."""
        return None

    def demonstrable(self, task: Task) -> bool:
        """Whether ``task`` can serve as a demonstration in the generation prompt (all tasks by default). A spec
        demonstrates only tasks its own validator admits, so that no demonstration teaches a rejected format."""
        return True

    def admits_own_demonstration(self, task: Task) -> bool:
        """Whether `parse_generated` admits ``task``'s own demonstration (`as_generation`), with
        ``task`` as the parent, and the demonstration fits `generation_schema` of ``[task]`` (so structured
        decoding could write it: a demonstration with a character or a length the schema excludes would teach
        what the grammar refuses); cached per task id and `grounded` (validation may execute calls). A
        demonstration the format cannot express (``ValueError``) is not admitted."""
        key = (task.id, self.grounded)
        cache = self.__dict__.setdefault("_admits_own", {})
        if key not in cache:
            try:
                demo = self.as_generation(task)
                text = json.dumps(demo, ensure_ascii=False)
            except (ValueError, KeyError, TypeError):
                cache[key] = False
            else:
                schema = self.generation_schema([task])
                cache[key] = (schema is None or fits(demo, schema)) and isinstance(
                    self.parse_generated(text, f"{task.id}-demo", 0, task), Task)
        return cache[key]

    @abc.abstractmethod
    def as_generation(self, task: Task) -> dict[str, Any]:
        """``task`` in the JSON format the environment policy must produce (used for the demonstrations)."""

    @abc.abstractmethod
    def parse_generated(self, text: str, task_id: str, iteration: int, parent: Task | None) -> Task | Rejection:
        """Parse and validate one generation into a `Task` (origin ``generated``, ``admitted_iteration`` =
        ``iteration``, the training iteration that wrote it) or a `Rejection`. Callers pass the arguments
        by position."""

    def difficulty_levels(self, options: dict[str, Any]) -> list[str]:
        """The generator's difficulty levels that the ``oracle`` task source steers (`genenv.trainer.strategies.oracle`),
        for a pool read with ``options`` (the run's seed options): level names, easiest-first where known. Empty
        (the default): the benchmark has no generator to steer, and ``task_source=oracle`` is refused."""
        return []

    def level_text(self, level: str, rng: random.Random) -> str:
        """The text of one task at ``level`` (one of `difficulty_levels`), in the format `parse_generated` reads,
        drawn with ``rng``: what a writer that knew the agent's success per level would write.

        Raises:
            NotImplementedError: the benchmark has no levels (the default).
        """
        raise NotImplementedError(f"{type(self).__name__} has no difficulty levels")

    def difficulty_level(self, task: Task) -> str | None:
        """The level of ``task`` among `difficulty_levels` (any split), or ``None`` when it is at none of them."""
        return None

    def dedup_text(self, task: Task) -> str:
        """The text compared for near-duplicates (the prompt by default)."""
        return task.prompt

    def duplicate_key(self, task: Task) -> tuple | None:
        """An exact identity for benchmarks where text similarity is the wrong notion of "the same task" (a text
        game's parameters and seed, a goal in a scene); ``None`` (the default): compare texts."""
        return None

    def gold_key(self, task: Task) -> str:
        """The task's gold answer in a canonical form (JSON, keys sorted): two requests that read alike but have
        different gold answers are different tasks (`near_duplicate`). A spec whose seed and generated golds
        are written differently overrides it."""
        return json.dumps(task.gold, sort_keys=True, ensure_ascii=False, default=str)

    def near_duplicate(self, task: Task, pool: Sequence[Task], threshold: float = NEAR_DUPLICATE_THRESHOLD
                       ) -> Rejection | None:
        """``Rejection("near_duplicate")`` if a pool task of this benchmark is the same task, else ``None``.

        The same task: for benchmarks with a `duplicate_key`, the same key; otherwise a request within
        ``threshold`` (rapidfuzz ``token_set_ratio`` of `dedup_text`, case and punctuation aside) that is
        either the same text
        (rapidfuzz's default processing: case, punctuation and spacing aside) or has the same gold answer
        (`gold_key`). A request that restates a pool task with other values (another city, another
        number) and so another gold answer is a new task."""
        key = self.duplicate_key(task)
        if key is not None:
            same = next((o for o in pool if o.benchmark == task.benchmark and self.duplicate_key(o) == key), None)
            return Rejection("near_duplicate", f"the same task as pool task {same.id}") if same else None
        from rapidfuzz import fuzz, process, utils

        choices = [self.dedup_text(t) for t in pool]
        if not choices:
            return None
        text = self.dedup_text(task)
        gold = None
        for _, score, index in process.extract(text, choices, scorer=fuzz.token_set_ratio, score_cutoff=threshold,
                                               processor=utils.default_process, limit=None):
            if utils.default_process(text) == utils.default_process(choices[index]):
                return Rejection("near_duplicate", f"the request of pool task {pool[index].id}")
            gold = self.gold_key(task) if gold is None else gold
            if self.gold_key(pool[index]) == gold:
                return Rejection("near_duplicate", f"{score:.0f} similar to pool task {pool[index].id}, "
                                                   "the same gold answer")
        return None
