"""The environment policy writes tasks (GenEnv Algorithm 1, steps 1-2; or EnvGen's skill-targeted batches):
generation prompts, sampling, and the benchmark spec's parsing and validation, each generation recorded with its
verdict.

Two kinds of prompts, chosen by the run's task source (`genenv.trainer.strategies.task_sources`):

- GenEnv's (`genenv_plans`): every iteration, ``generation.prompts_per_iteration`` prompts, each with
  ``generation.seed_examples`` demonstrations drawn from the task pool and the agent's recent success rate p̂
  against the target α; the environment policy is trained on R_env.
- EnvGen's (`envgen_plans`; Zala et al., COLM 2024): every ``generation.every`` iterations only, a *frozen* environment
  policy gets the agent's per-skill success rates measured on the original (seed) tasks
  (`skill_success`, skills from
  `skill_of`) and is asked for tasks aimed at the weakest skills:
  ``prompts_per_iteration * every`` prompts (the same generation budget as GenEnv over those iterations), prompt
  ``i`` targeting the ``i``-th weakest skill with demonstrations of that skill. The generated tasks join the pool,
  where the agent trains on them mixed with the original tasks.

The environment policy samples ``generation.generations_per_prompt`` texts per prompt, under the spec's JSON Schema
when ``generation.constrained`` (`genenv.runtime.grammar`), each with the token budget that schema needs
(`generation_budget`: a complete object always fits, so a constrained generation never ends inside the
grammar). Each text is parsed and validated by the
spec (`parse_generated`; grounded rules when ``generation.grounded``),
then checked for near-duplicates of the pool and of the tasks admitted before it; a rejection is counted by reason
and never enters the pool.
"""
from __future__ import annotations

import logging
import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from genenv.benchmarks.bounded_schema import UnboundedSchema, max_json_bytes
from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.task_writer import Rejection, TaskWriter
from genenv.envs.task import Task
from genenv.runtime.policies import Generation, Policy, Prompt
from genenv.trainer.settings import ConfigError
from genenv.trainer.task_pool import TaskPool

__all__ = [
    "GenerationRecord", "PromptPlan", "check_generation_budget", "envgen_plans", "genenv_plans", "generation_budget",
    "record_row", "run_generation_budget", "skill_feedback", "weakest_skills", "write_tasks",
]

log = logging.getLogger(__name__)
FEEDBACK_SKILLS = 8  # skills listed in an EnvGen prompt (the weakest first)


@dataclass
class GenerationRecord:
    """One generation of the environment policy and its verdict: ``prompt_index`` (its generation prompt, the
    GRPO group of the environment policy's optional GRPO update), the `Generation` (text and token ids),
    either the admitted ``task`` or the ``rejection``, the ``parent`` task it was written for (its prompt's first
    demonstration), and, in EnvGen mode, the ``feedback`` its prompt carried (``{"target_skill",
    "skill_success": {skill: [rate, n]}}``)."""

    prompt_index: int
    generation: Generation
    task: Task | None = None
    rejection: Rejection | None = None
    feedback: dict[str, Any] | None = None
    parent: Task | None = None

    @property
    def admitted(self) -> bool:
        """Whether the generation became a task."""
        return self.task is not None


def skill_feedback(rates: dict[str, tuple[float, int]], target: str) -> str:
    """The EnvGen request: the agent's success rate per skill on the original tasks (the
    `FEEDBACK_SKILLS` weakest measured ones) and the skill to train."""
    measured = sorted((r, s, n) for s, (r, n) in rates.items() if n and not math.isnan(r))[:FEEDBACK_SKILLS]
    if not measured:
        return f"The agent has not been measured yet. Write a task that trains the skill '{target}'."
    listing = ", ".join(f"{s} {r:.0%} ({n} tasks)" for r, s, n in measured)
    return (f"The agent's success rate on the original tasks, per skill (weakest first): {listing}. "
            f"Write a task that trains the skill '{target}', one of its weakest.")


def weakest_skills(rates: dict[str, tuple[float, int]], k: int, rng: random.Random) -> list[str]:
    """``k`` target skills: the measured skills from the lowest success rate up (ties in random order), cycled
    when fewer than ``k``; skills at random when none is measured yet."""
    measured = [s for s, (r, n) in rates.items() if n and not math.isnan(r)]
    if measured:
        order = sorted(measured, key=lambda s: (rates[s][0], rng.random()))
    else:
        order = list(rates)
        rng.shuffle(order)
    return [order[i % len(order)] for i in range(k)] if order else []


@dataclass(frozen=True)
class PromptPlan:
    """One generation prompt to write: its ``seeds`` (the demonstrated pool tasks; the first is the parent of every
    task written from it), the EnvGen ``request`` text (``None``: a GenEnv prompt, which shows the agent's recent p̂
    against α instead) and the ``feedback`` recorded with its generations (EnvGen: ``{"target_skill",
    "skill_success": {skill: [rate, n]}}``; ``None`` otherwise)."""

    seeds: list[Task]
    request: str | None = None
    feedback: dict[str, Any] | None = None


def genenv_plans(spec: TaskWriter, pool: TaskPool, rng: random.Random, g) -> list[PromptPlan]:
    """GenEnv's prompts: ``g.prompts_per_iteration`` of them, each demonstrating ``g.seed_examples`` pool tasks
    drawn at random (among those the spec can demonstrate)."""
    seeds_all = [t for t in pool.tasks if spec.demonstrable(t)]
    return [PromptPlan(rng.sample(seeds_all, min(g.seed_examples, len(seeds_all))))
            for _ in range(g.prompts_per_iteration)]


def envgen_plans(spec: TaskWriter, pool: TaskPool, rng: random.Random, g) -> list[PromptPlan]:
    """EnvGen's prompts: ``g.prompts_per_iteration * g.every`` of them, prompt ``i`` aimed at the ``i``-th weakest
    skill (`weakest_skills` of the agent's per-skill success rates on the original tasks), demonstrating
    ``g.seed_examples`` tasks of that skill (any pool task when the skill has none) and carrying the rates."""
    seeds_all = [t for t in pool.tasks if spec.demonstrable(t)]
    rates = pool.skill_success(spec.skill_of)
    plans = []
    for target in weakest_skills(rates, int(g.prompts_per_iteration) * int(g.every), rng):
        of_skill = [t for t in seeds_all if spec.skill_of(t) == target] or seeds_all
        plans.append(PromptPlan(rng.sample(of_skill, min(g.seed_examples, len(of_skill))),
                                skill_feedback(rates, target),
                                {"target_skill": target,
                                 "skill_success": {s: [None if math.isnan(r) else r, n] for s, (r, n) in rates.items()}}))
    return plans


def generation_budget(schema: dict[str, Any] | None, cap: int | None, constrained: bool) -> int:
    """The tokens one generation may take (``max_new_tokens``): with a schema, ``max_json_bytes(schema) + 1`` (the
    longest object its grammar accepts, at least one byte a token, then the end-of-turn token;
    `genenv.benchmarks.bounded_schema`), so a complete object always fits; without one, ``cap``.

    Args:
        schema: the generation's JSON Schema (`generation_schema`),
            or ``None`` (the spec has none).
        cap: ``generation.max_new_tokens``: ``None`` derives the budget from the schema; a number is the most the
            run allows (free sampling takes it as the budget when smaller than the schema's).
        constrained: ``generation.constrained``.
    Raises:
        ConfigError: under ``constrained`` the schema needs more than ``cap``, or is unbounded
            (`UnboundedSchema`); no schema and no ``cap``.
    """
    if schema is None:
        if cap is None:
            raise ConfigError("generation.max_new_tokens: this benchmark has no generation schema to derive the "
                              "budget from; set a number")
        return int(cap)
    try:
        need = max_json_bytes(schema) + 1
    except UnboundedSchema as exc:
        if constrained or cap is None:
            raise ConfigError(f"generation.constrained: {exc}; bound it (genenv.benchmarks.bounded_schema) "
                              "or sample freely with generation.max_new_tokens set") from None
        return int(cap)
    if cap is None:
        return need
    if constrained and int(cap) < need:
        raise ConfigError(f"generation.max_new_tokens={cap} is below the {need} tokens the generation schema can "
                          "need (a complete object must fit the budget); raise it or set it to null (derived)")
    return need if constrained else min(int(cap), need)


def check_generation_budget(spec: TaskWriter, tasks: Sequence[Task], g) -> int | None:
    """Start-up check of `generation_budget` over the schemas a run's prompts can get: one per demonstrable
    task of ``tasks`` (the seed pool) as a prompt's first seed (the shipped specs' schemas depend on that seed at
    most). Logs and returns the largest budget (``None``: no demonstrable task).

    Raises:
        ConfigError: as `generation_budget`, naming the first failing seed task.
    """
    budgets, seen = [], set()
    for task in tasks:
        if not spec.demonstrable(task):
            continue
        schema = spec.generation_schema([task])
        key = repr(schema)
        if key in seen:
            continue
        seen.add(key)
        try:
            budgets.append(generation_budget(schema, g.max_new_tokens, g.constrained))
        except ConfigError as exc:
            raise ConfigError(f"{exc} (schema of seed task {task.id})") from None
    budget = max(budgets, default=None)
    log.info("environment policy: at most %s tokens per generation (%d schemas)", budget, len(seen))
    return budget


def run_generation_budget(settings) -> int | None:
    """`check_generation_budget` of a run's benchmark and seed pool (``settings``: a
    `RunSettings`): the response length an engine must allow the environment
    policy (veRL's ``rollout.response_length``)."""
    spec = get_benchmark(settings.benchmark, settings.data_dir, grounded=settings.generation.grounded)
    tasks = spec.load(split="train", **spec.pool_options(settings.seed_options))
    return check_generation_budget(spec, tasks[:settings.seed_limit] if settings.seed_limit else tasks,
                                   settings.generation)


def write_tasks(spec: TaskWriter, policy: Policy, pool: TaskPool, g, alpha: float, iteration: int,
                plans: list[PromptPlan]) -> tuple[list[GenerationRecord], Counter]:
    """Steps 1-2: sample task texts from the environment ``policy`` for each of ``plans`` and validate them.

    Args:
        spec: the benchmark spec's task-writer part (prompts, schema, parsing, validation, near-duplicates).
        pool: the task pool (recent p̂ shown in GenEnv prompts, the near-duplicate check).
        g: the run's `GenerationSettings` (``generations_per_prompt``,
            ``temperature``, ``max_new_tokens``, ``constrained``); each prompt's budget is `generation_budget`.
        alpha: the target success rate named in GenEnv prompts.
        iteration: the iteration (ids ``gen-<iteration>-<prompt>-<k>`` and the tasks' ``admitted_iteration``).
        plans: the prompts to write (`genenv_plans`, `envgen_plans`).
    Returns:
        one `GenerationRecord` per generation, and the rejection counts by reason.
    Raises:
        ConfigError: a prompt's budget (`generation_budget`).
    """
    prompts: list[Prompt] = []
    for plan in plans:
        schema = spec.generation_schema(plan.seeds)
        p_hat_shown = None if plan.request is not None else pool.recent_p_hat()
        prompts.append(Prompt(spec.generation_messages(plan.seeds, p_hat_shown, alpha, plan.request),
                              max_new_tokens=generation_budget(schema, g.max_new_tokens, g.constrained),
                              json_schema=schema if g.constrained else None))
    outputs = policy.generate(prompts, n=g.generations_per_prompt, temperature=g.temperature,
                              max_new_tokens=max((p.max_new_tokens for p in prompts), default=1))
    records: list[GenerationRecord] = []
    rejected: Counter = Counter()
    admitted: list[Task] = []
    for pi, (plan, group) in enumerate(zip(plans, outputs)):
        parent = plan.seeds[0] if plan.seeds else None
        for k, gen in enumerate(group):
            out = spec.parse_generated(gen.text, f"gen-{iteration}-{pi}-{k}", iteration, parent)
            if isinstance(out, Task):
                out = spec.near_duplicate(out, pool.tasks + admitted) or out
            if isinstance(out, Rejection):
                rejected[out.reason] += 1
                records.append(GenerationRecord(pi, gen, rejection=out, feedback=plan.feedback, parent=parent))
            else:
                admitted.append(out)
                records.append(GenerationRecord(pi, gen, task=out, feedback=plan.feedback, parent=parent))
    return records, rejected


def record_row(iteration: int, record: GenerationRecord, p_hat: dict[str, float], r_env: float) -> dict[str, Any]:
    """One line of ``generations.jsonl``: the text, its verdict, the admitted task's p̂ and R_env, and in EnvGen
    mode the skill feedback its prompt carried."""
    task, rej = record.task, record.rejection
    row = {"iteration": iteration, "prompt_index": record.prompt_index, "text": record.generation.text,
           "admitted": task is not None, "task_id": task.id if task else None,
           "rejection": rej.reason if rej else None, "detail": rej.detail if rej else None,
           "p_hat": p_hat.get(task.id) if task else None, "r_env": r_env}
    if record.feedback is not None:
        row["feedback"] = record.feedback
    return row
