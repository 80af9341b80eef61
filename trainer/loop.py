"""The co-evolution loop (GenEnv, arXiv 2512.19682, Algorithm 1), written against the engine interface
(`Backend`).

One iteration t:

An arm of the loop is two registered strategies (`genenv.trainer.strategies`): the run's **task source**
(``task_source``: what the environment policy writes, when, and whether it learns) and its **agent batch**
(``agent_batch``: which tasks the agent is rolled out and trained on). The loop itself never branches on an arm.

1. **Environment generation** and 2. **validation** — at the iterations the task source writes
   (`writes_at`), the environment policy writes its
   prompts (under the spec's JSON Schema when ``generation.constrained``), the benchmark spec admits or rejects
   each (`genenv.trainer.generation`); rejections are counted by reason and get R_env = 0.
3. **Agent rollouts** — the agent batch's tasks (every admitted task, ``generation.rollouts_per_task`` episodes
   each, whatever the batch size; then pool tasks, ``agent.n`` episodes each), through the one episode loop;
   agent reward per paper Eq. 1 (`roll_out`, with
   informative refill under ``agent.filter_groups.enable``).
4. **p̂ per task** = mean agent reward over its n episodes (= the success rate for binary rewards).
5. **Environment reward** — the task source scores each generation
   (`score`): R_env(p̂) (``curriculum.env_reward``: Eq. 3 by
   default, `genenv.rewards.env_policy_reward`) and the difficulty filter |p̂ - α| ≤ k_min.
6. **Environment-policy update** — when the task source learns, ``env_policy.update_mode``
   (`genenv.trainer.strategies.env_policy_updates`): RWR on the in-band admitted generations (the paper) or GRPO on R_env.
7. **Agent update** — GRPO with veRL's functions on the groups the agent batch names; groups whose rewards are
   all equal are dropped and counted. Skipped by the ``frozen`` agent batch (a stationary agent, so the
   environment policy's learning is measured alone).
8. Admitted tasks join the pool; metrics are written; a checkpoint is saved (`genenv.trainer.checkpoint`).
   A killed run resumes from the last checkpoint.
"""
from __future__ import annotations

import json
import logging
import numbers
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from genenv.benchmarks.registry import get_benchmark
from genenv.envs.data import data_label, folders_read, jsonl_line, write_json
from genenv.trainer.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from genenv.trainer.engines import build_backend
from genenv.trainer.engines.base import ROLES
from genenv.trainer.generation import GenerationRecord, record_row, run_generation_budget
from genenv.trainer.metrics import IterationOutcome, MetricsWriter, drop_rows_from, metrics_row
from genenv.runtime.episodes import Rollout, RolloutSpec, per_task
from genenv.trainer.settings import run_settings
from genenv.trainer.strategies import build_agent_batch, build_task_source
from genenv.trainer.task_pool import TaskPool
from genenv.trainer.updates.sample import agent_samples

__all__ = ["CoEvolutionTrainer"]

log = logging.getLogger(__name__)
RUN_LOGS = ("metrics.jsonl", "generations.jsonl", "heldout.jsonl")  # per-iteration rows, cut back on resume


class CoEvolutionTrainer:
    """Runs the loop for ``cfg.iterations`` iterations in ``cfg.run_dir`` (see ``configs/train.yaml`` for keys).

    Args:
        cfg: the composed OmegaConf config.
        backend: a `Backend`; built from the run's settings (``engine``) when
            ``None``.
    Raises:
        ConfigError: a config value the run cannot use (`run_settings`), or a
            ``generation.max_new_tokens`` that cannot hold a complete generation
            (`run_generation_budget`), before any model loads.
    """

    def __init__(self, cfg, backend=None):
        self.cfg = cfg  # kept only to record the run's config (config.yaml)
        self.settings = st = run_settings(cfg)  # validated once; the loop reads every decision from here
        self.spec = get_benchmark(st.benchmark, st.data_dir, grounded=st.generation.grounded)
        self.run_dir = Path(st.run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.task_source = build_task_source(st)  # unknown strategy names fail here, before any model loads
        self.agent_batch = build_agent_batch(st)
        # tokens per generation of the environment policy; ConfigError here, before any model loads, when
        # generation.max_new_tokens cannot hold a complete generation
        self.generation_budget = run_generation_budget(st)
        self.backend = backend if backend is not None else build_backend(st)
        self.rng = random.Random(st.seed)
        torch.manual_seed(st.seed)
        self.iteration = 0
        self.counters: Counter = Counter()
        self.pool = TaskPool()
        self.initial_fingerprint = {r: self.backend.fingerprint(r) for r in ROLES}
        self.env_kwargs = st.env_kwargs
        self.metrics = MetricsWriter(self.run_dir, st.tensorboard)

    # ----- set-up, checkpoints -----
    def seed_pool(self) -> None:
        """Fill the pool with the benchmark's training split (its `seed_options` updated by the run's
        ``benchmark.seed_options``: `pool_options`; ``seed_limit``), then
        let the task source add what it writes before the first iteration
        (`prepare`; ``static_aug``'s up-front tasks)."""
        tasks = self.spec.load(split="train", **self.spec.pool_options(self.settings.seed_options))
        limit = self.settings.seed_limit
        self.pool = TaskPool(tasks[:limit] if limit else tasks)
        self.task_source.prepare(self)

    def latest_checkpoint(self) -> Path | None:
        """The checkpoint named in ``checkpoints/latest``, if any."""
        return latest_checkpoint(self.ckpt_dir)

    def save_checkpoint(self) -> Path:
        """Save everything needed to resume after iteration ``self.iteration - 1``; keeps the last K."""
        state = {"counters": dict(self.counters), "initial_fingerprint": self.initial_fingerprint}
        return save_checkpoint(self.ckpt_dir, self.iteration, self.backend, self.pool, state, self.rng,
                               keep=self.settings.keep_checkpoints)

    def resume(self, path: Path) -> None:
        """Restore policies, optimisers, pool, RNG states and counters; drop the rows of unfinished iterations."""
        self.pool, state = load_checkpoint(path, self.backend, self.rng)
        self.iteration = state["iteration"]
        self.counters = Counter(state["counters"])
        self.initial_fingerprint = state["initial_fingerprint"]
        for name in RUN_LOGS:
            drop_rows_from(self.run_dir / name, self.iteration)
        log.info("resumed from %s at iteration %d with %d pool tasks", path, self.iteration, len(self.pool))

    # ----- the loop -----
    def run(self) -> list[dict[str, Any]]:
        """Resume if a checkpoint exists (``resume: true``), else seed the pool; run the remaining iterations.

        Returns the metric rows of the iterations run by this call.
        """
        ckpt = self.latest_checkpoint() if self.settings.resume else None
        if ckpt is not None:
            self.resume(ckpt)
        else:  # a fresh start: rows of a run killed before its first checkpoint are not kept
            for name in RUN_LOGS:
                (self.run_dir / name).unlink(missing_ok=True)
            self.seed_pool()
        from omegaconf import OmegaConf
        from tqdm.auto import tqdm

        (self.run_dir / "config.yaml").write_text(OmegaConf.to_yaml(self.cfg, resolve=True))
        if ckpt is None:  # the data the seed pool was read from (a resume reads no data)
            write_json(self.run_dir / "data.json", {"data_dir": data_label(self.settings.data_dir),
                                                    "data_folders": folders_read()})
        rows = []
        bar = tqdm(total=self.settings.iterations, initial=self.iteration, desc="co-evolution", unit="iter")
        while self.iteration < self.settings.iterations:
            row = self.run_iteration()
            rows.append(row)
            bar.update(1)
            bar.set_postfix(reward=f"{row['agent/reward_mean']:.2f}", admitted=row["gen/admitted"],
                            pool=row["pool/size"])
        bar.close()
        self.metrics.close()
        return rows

    def generate_tasks(self, it: int) -> tuple[list[GenerationRecord], Counter]:
        """Steps 1-2: the task source's writing
        (`write`); nothing at an iteration the task
        source does not write."""
        if not self.task_source.writes_at(it):
            return [], Counter()
        return self.task_source.write(self, it)

    def rollout(self, tasks, n: int | Sequence[int] | None = None) -> Rollout:
        """``n`` (default ``agent.n``; or one count per task, all decoded in one batch) agent episodes on each of
        ``tasks`` through the engine, sampled as the run's settings say
        (`RolloutSpec`); the agent batch's one way to play episodes. Returns the
        trajectories and their timings.

        Raises:
            ValueError: ``n`` gives counts, but not one per task, or a count below 1
                (`per_task`).
        """
        if not tasks:
            return Rollout([])
        a = self.settings.agent
        n = a.n if n is None else n
        counts = None if isinstance(n, numbers.Integral) else tuple(per_task(n, len(tasks)))
        spec = RolloutSpec(n=int(a.n if counts else n), group_sizes=counts, temperature=a.temperature,
                           max_new_tokens=a.max_new_tokens, max_response_tokens=a.response_budget,
                           env_kwargs=self.env_kwargs, env_server=self.settings.engine.env_server)
        return self.backend.rollout(tasks, spec)

    def run_iteration(self) -> dict[str, Any]:
        """One full iteration (see module docstring); returns its metric row."""
        st, it = self.settings, self.iteration
        timing: dict[str, float] = {}
        t0 = time.perf_counter()
        records, rejected = self.generate_tasks(it)
        timing["task_generation"] = time.perf_counter() - t0

        new_tasks = [r.task for r in records if r.task is not None]
        rolled = self.agent_batch.roll_out(self, new_tasks)
        trajs = rolled.trajectories
        timing["agent_rollout"] = rolled.timings.generate_seconds
        timing["env_steps"] = rolled.timings.env_seconds

        t1 = time.perf_counter()
        rewards_by_task: dict[str, list[float]] = {}
        for t in trajs:
            rewards_by_task.setdefault(t.task.id, []).append(t.reward)
        p_hat = {tid: float(np.mean(rs)) for tid, rs in rewards_by_task.items()}
        scored = self.task_source.score(self, records, rolled, p_hat)
        timing["env_reward"] = time.perf_counter() - t1

        t2 = time.perf_counter()
        samples, estimator = self.task_source.update_samples(scored)
        env_update = self.backend.update("env_policy", samples, estimator) if estimator else {"skipped": True}
        timing["env_policy_update"] = time.perf_counter() - t2

        t3 = time.perf_counter()
        if not self.agent_batch.trains:  # a stationary agent: the environment policy is measured alone
            agent_update = {"skipped": True, "frozen": True, "groups_dropped": 0}
        else:
            agent_update = self.backend.update("agent", agent_samples(rolled.update_trajectories), "grpo")
        timing["agent_update"] = time.perf_counter() - t3

        for task in new_tasks:
            self.pool.add(task)
        self.pool.record(it, p_hat)
        self.counters["admitted"] += len(new_tasks)
        self.counters["generated"] += len(records)
        for reason, c in rejected.items():
            self.counters[f"rejected/{reason}"] += c
        self.counters["groups_dropped"] += agent_update.get("groups_dropped", 0)
        timing["total"] = time.perf_counter() - t0

        with open(self.run_dir / "generations.jsonl", "a", encoding="utf-8") as fh:
            for s in scored:
                fh.write(json.dumps(record_row(it, s.record, p_hat, s.r_env), ensure_ascii=False) + "\n")
        outcome = IterationOutcome(it, scored, rejected, new_tasks, trajs, p_hat, agent_update, env_update, timing,
                                   trained=rolled.trained, refill_rounds=rolled.refill_rounds)
        deltas = {r: abs(self.backend.fingerprint(r) - self.initial_fingerprint[r]) for r in ROLES}
        row = metrics_row(outcome, st.curriculum, self.pool.counts(), len(self.pool), deltas)
        row.update(self.sampler_state())
        self.iteration += 1
        if st.eval_every and (self.iteration % st.eval_every == 0 or self.iteration == st.iterations):
            row.update(self.evaluate_heldout(log_iteration=it))
        self.metrics.write(row)
        if self.iteration % st.save_every == 0 or self.iteration == st.iterations:
            self.save_checkpoint()
        return row

    def sampler_state(self) -> dict[str, Any]:
        """The stale-weight guard, for engines whose samplers name their weights (``sampler_fingerprint``; the
        ``local`` engine): per role, ``sampler/<role>_fingerprint`` (the weights the sampler holds) and
        ``sampler/<role>_stale`` (whether they differ from the trained weights' `fingerprint`, logged as a warning);
        ``{}`` for other engines."""
        held = getattr(self.backend, "sampler_fingerprint", None)
        if held is None:
            return {}
        out: dict[str, Any] = {}
        for role in ROLES:
            value = held(role)
            stale = value != self.backend.fingerprint(role)
            if stale:
                log.warning("the %s sampler holds weights %r, not the trained %r: it samples from stale weights",
                            role, value, self.backend.fingerprint(role))
            out[f"sampler/{role}_fingerprint"], out[f"sampler/{role}_stale"] = value, stale
        return out

    def evaluate_heldout(self, log_iteration: int | None = None) -> dict[str, float]:
        """Greedy evaluation of the agent on the held-out split (``eval.limit`` tasks per unit) with the
        leaderboard's `evaluate`: ``heldout/<metric key>`` for every
        metric, ``heldout/score`` and ``heldout/n`` for the benchmark's headline metric, ``time/heldout_eval``.
        With ``log_iteration``, each task's outcome is appended to ``heldout.jsonl`` as ``{"iteration", "unit",
        "task_id", "reward", "success"}`` (one row per held-out task)."""
        from genenv.runtime.evaluation import evaluate

        t = time.perf_counter()
        res = evaluate(self.backend.policy("agent"), [self.spec.name], split="heldout", data_dir=self.settings.data_dir,
                       limit=self.settings.eval_limit,
                       options={self.spec.name: self.spec.pool_options(self.settings.seed_options)},
                       spec=RolloutSpec(max_new_tokens=self.settings.agent.max_new_tokens, env_kwargs=self.env_kwargs),
                       progress=False)
        out = {f"heldout/{m.key}": m.value for m in res.metrics}
        head = res.headlines.get(self.spec.name)
        if head is not None:  # the benchmark's headline metric, the score an experiment compares
            out["heldout/score"] = head.value
            out["heldout/n"] = head.n
        out["time/heldout_eval"] = time.perf_counter() - t
        if log_iteration is not None:
            with open(self.run_dir / "heldout.jsonl", "a", encoding="utf-8") as fh:
                for r in res.rows:
                    fh.write(jsonl_line({"iteration": log_iteration, "unit": r.get("unit"), "task_id": r["task_id"],
                                         "reward": float(r["reward"]), "success": bool(r["success"])}))
        return out

