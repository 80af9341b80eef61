"""The co-evolution loop (GenEnv, arXiv 2512.19682, Algorithm 1), written against the engine interface
(:class:`~genenv.trainer.engines.base.Backend`).

One iteration t:

1. **Environment generation** and 2. **validation** — the environment policy writes tasks (under the spec's JSON
   Schema when ``generation.constrained``), the benchmark spec admits or rejects each
   (:mod:`genenv.trainer.generation`; skipped with ``generation.enabled: false``; in EnvGen mode only every
   ``generation.every`` iterations, prompted with per-skill success rates); rejections are counted by reason and
   get R_env = 0.
3. **Agent rollouts** — every admitted task, ``generation.rollouts_per_task`` episodes each (``agent.n`` when
   null), whatever the agent's batch size; plus tasks drawn from the pool up to ``agent.batch_tasks``,
   ``agent.n`` episodes each (``pool.sampling``: uniformly, or by curated replay; EnvGen: generated tasks mixed
   with at least half a batch of original ones, :meth:`CoEvolutionTrainer.agent_batch`), through the one episode
   loop; agent reward per paper Eq. 1. With ``agent.filter_groups.enable`` (informative batches, DAPO's dynamic
   sampling) more pool tasks are rolled out until ``agent.batch_tasks`` groups have unequal rewards or
   ``agent.filter_groups.max_rollouts`` is reached (:meth:`CoEvolutionTrainer.fill_informative`; generated tasks
   fill at most ``agent.filter_groups.generated_share`` of those groups). With
   ``agent.frozen`` only the admitted tasks are rolled out (their p̂ is all the environment policy needs).
4. **p̂ per task** = mean agent reward over its n episodes (= the success rate for binary rewards).
5. **Environment reward** R_env(p̂) (``curriculum.env_reward``: Eq. 3 by default,
   :mod:`genenv.rewards.env_policy_reward`) and the difficulty filter |p̂ - α| ≤ k_min.
6. **Environment-policy update** — ``env_policy.update_mode`` (:mod:`genenv.trainer.env_policy_updates`): RWR on
   the in-band admitted generations (the paper), GRPO on R_env, or none; never in EnvGen mode (a frozen LLM).
7. **Agent update** — GRPO with veRL's functions; groups whose rewards are all equal are dropped and counted
   (with informative batches, only the first ``agent.batch_tasks`` informative groups are trained on).
   Skipped with ``agent.frozen: true`` (a stationary agent, so the environment policy's learning is measured
   alone).
8. Admitted tasks join the pool; metrics are written; a checkpoint is saved (:mod:`genenv.trainer.checkpoint`).
   A killed run resumes from the last checkpoint.
"""
from __future__ import annotations

import json
import logging
import math
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch

from genenv.benchmarks.registry import get_benchmark
from genenv.envs.data import jsonl_line
from genenv.envs.task import Task
from genenv.rewards.env_policy_reward import difficulty_filter, env_reward
from genenv.trainer.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from genenv.trainer.engines import build_backend
from genenv.trainer.engines.base import ROLES
from genenv.trainer.env_policy_updates import ScoredGeneration, env_policy_samples
from genenv.trainer.generation import GenerationRecord, record_row, write_tasks
from genenv.trainer.metrics import IterationOutcome, MetricsWriter, drop_rows_from, metrics_row
from genenv.runtime.episodes import Trajectory
from genenv.trainer.settings import run_settings
from genenv.trainer.task_pool import TaskPool
from genenv.trainer.updates import Sample
from genenv.trainer.updates.advantages import informative_task_ids

log = logging.getLogger(__name__)
RUN_LOGS = ("metrics.jsonl", "generations.jsonl", "heldout.jsonl")  # per-iteration rows, cut back on resume


class CoEvolutionTrainer:
    """Runs the loop for ``cfg.iterations`` iterations in ``cfg.run_dir`` (see ``configs/train.yaml`` for keys).

    Args:
        cfg: the composed OmegaConf config.
        backend: a :class:`~genenv.trainer.engines.base.Backend`; built from the run's settings (``engine``) when
            ``None``.
    """

    def __init__(self, cfg, backend=None):
        self.cfg = cfg  # kept only to record the run's config (config.yaml)
        self.settings = st = run_settings(cfg)  # validated once; the loop reads every decision from here
        self.spec = get_benchmark(st.benchmark, st.data_dir, grounded=st.generation.grounded)
        self.run_dir = Path(st.run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.run_dir.mkdir(parents=True, exist_ok=True)
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
        """Fill the pool with the benchmark's training split (its :attr:`seed_options` updated by the run's
        ``benchmark.seed_options``: :meth:`~genenv.benchmarks.spec.BenchmarkSpec.pool_options`; ``seed_limit``), then,
        with ``generation.upfront_tasks`` = N > 0, with N tasks written once up front by the environment policy
        as it is (:meth:`write_upfront`)."""
        tasks = self.spec.load(split="train", **self.spec.pool_options(self.settings.seed_options))
        limit = self.settings.seed_limit
        self.pool = TaskPool(tasks[:limit] if limit else tasks)
        if self.settings.generation.upfront_tasks > 0:
            self.write_upfront(self.settings.generation.upfront_tasks)

    def write_upfront(self, target: int) -> None:
        """The paper's static augmentation: generation rounds (:func:`~genenv.trainer.generation.write_tasks`,
        the same prompts and validation as every iteration) until ``target`` tasks are admitted or
        ``generation.upfront_max_rounds`` rounds have run; the admitted tasks (at most ``target``) join the pool
        before the first iteration. Each generation is written to ``generations.jsonl`` with ``"upfront": true``
        and iteration -1 - round; the counts go to the counters ``upfront/generated``, ``upfront/admitted`` and
        ``upfront/rounds`` and ``upfront/seconds`` (saved with every checkpoint)."""
        start = time.perf_counter()
        admitted: list[Task] = []
        max_rounds = self.settings.generation.upfront_max_rounds
        rounds = 0
        while len(admitted) < target and rounds < max_rounds:
            it = -1 - rounds
            records, _ = write_tasks(self.spec, self.backend.policy("env_policy"), self.pool, self.rng,
                                     self.settings.generation, self.settings.curriculum.alpha, it)
            rounds += 1
            with open(self.run_dir / "generations.jsonl", "a", encoding="utf-8") as fh:
                for r in records:
                    keep = r.task is not None and len(admitted) < target
                    if keep:
                        admitted.append(r.task)
                        self.pool.add(r.task)
                    fh.write(json.dumps({**record_row(it, r, {}, 0.0), "upfront": True,
                                         "kept": keep}, ensure_ascii=False) + "\n")
                    self.counters["upfront/generated"] += 1
        self.counters["upfront/admitted"] = len(admitted)
        self.counters["upfront/rounds"] = rounds
        self.counters["upfront/seconds"] = time.perf_counter() - start
        log.info("static augmentation: %d of %d tasks admitted in %d rounds", len(admitted), target, rounds)

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
        """Steps 1-2 (:func:`~genenv.trainer.generation.write_tasks`); nothing when generation is off or, in
        EnvGen mode, between its calls (:meth:`~genenv.trainer.settings.RunSettings.generates_at`)."""
        if not self.settings.generates_at(it):
            return [], Counter()
        return write_tasks(self.spec, self.backend.policy("env_policy"), self.pool, self.rng, self.settings.generation,
                           self.settings.curriculum.alpha, it)

    def rollout(self, tasks, n: int | None = None) -> tuple[list[Trajectory], dict[str, float]]:
        """Step 3: ``n`` (default ``agent.n``) agent episodes on each of ``tasks`` through the engine; returns
        them and the phase seconds (``generate_seconds``, ``env_seconds``)."""
        a = self.settings.agent
        stats: dict[str, float] = {}
        if not tasks:
            return [], stats
        trajs = self.backend.rollout(tasks, n=int(n or a.n), temperature=a.temperature,
                                     max_new_tokens=a.max_new_tokens, env_kwargs=self.env_kwargs,
                                     max_response_tokens=a.response_budget, stats=stats)
        return trajs, stats

    def rollout_batch(self, new_tasks: list[Task], batch: list[Task]) -> tuple[list[Trajectory], dict[str, float]]:
        """Step 3 for one iteration's ``batch`` (:meth:`agent_batch`): the newly admitted tasks with
        ``generation.rollouts_per_task`` episodes each when it is set and differs from ``agent.n``, the rest with
        ``agent.n``; seconds of both calls added up."""
        n_gen = self.settings.generation.rollouts_per_task
        if n_gen == self.settings.agent.n:
            return self.rollout(batch)
        new_ids = {t.id for t in new_tasks}
        trajs, stats = self.rollout([t for t in batch if t.id in new_ids], n_gen)
        more, more_stats = self.rollout([t for t in batch if t.id not in new_ids])
        for k, v in more_stats.items():
            stats[k] = stats.get(k, 0.0) + v
        return trajs + more, stats

    def score_generations(self, records: list[GenerationRecord], p_hat: dict[str, float]) -> list[ScoredGeneration]:
        """Steps 4-5: R_env of every generation (0 when rejected) and whether its task is in the α band."""
        cur = self.settings.curriculum
        scored = []
        for r in records:
            if r.task is None:
                scored.append(ScoredGeneration(r, 0.0, False))
            else:
                ph = p_hat[r.task.id]
                scored.append(ScoredGeneration(r, float(env_reward(cur.env_reward, ph, alpha=cur.alpha, beta=cur.beta)),
                                               bool(difficulty_filter(ph, cur.alpha, cur.k_min))))
        return scored

    def agent_batch(self, new_tasks: list[Task]) -> list[Task]:
        """The tasks rolled out this iteration. GenEnv: every newly admitted task (its p̂ is its R_env), then pool
        samples up to ``agent.batch_tasks``; with ``agent.frozen`` the new tasks only. EnvGen: generated tasks (the
        new ones, or, between LLM calls, half the
        batch sampled from the pool's generated tasks) mixed with at least half a batch of original (seed) tasks,
        whose p̂ are the per-skill success rates the next EnvGen prompt reports."""
        k = self.settings.agent.batch_tasks
        if self.settings.agent.frozen:
            return list(new_tasks)
        if self.settings.generation.mode != "envgen":
            return new_tasks + self.draw_pool(max(0, k - len(new_tasks)))
        generated = new_tasks or self.draw_pool(k // 2, origin="generated")
        seeds = self.draw_pool(max(k - len(generated), (k + 1) // 2), origin="seed")
        return generated + seeds

    def draw_pool(self, k: int, exclude: list[str] | tuple = (), origin: str | None = None) -> list[Task]:
        """``k`` distinct pool tasks (not in ``exclude``; of ``origin`` when given) by ``pool.sampling``: uniformly
        (:meth:`TaskPool.sample`) or by curated replay (:meth:`TaskPool.sample_replay`)."""
        pool = self.settings.pool
        if pool.sampling == "learnability":
            return self.pool.sample_replay(k, self.rng, self.iteration, pool.temperature, pool.staleness, exclude,
                                           origin)
        return self.pool.sample(k, self.rng, exclude, origin)

    def fill_informative(self, batch: list[Task], trajs: list[Trajectory], stats: dict[str, float]
                         ) -> tuple[list[Task], list[Trajectory], int]:
        """Informative batches (DAPO's dynamic sampling, Yu et al. 2025; veRL's ``algorithm.filter_groups``): while
        fewer than ``agent.batch_tasks`` of the rolled-out groups have unequal rewards, draw more pool tasks not yet
        rolled out this iteration (:meth:`draw_pool`) and roll them out, ``agent.n`` episodes each, never past
        ``agent.filter_groups.max_rollouts`` rollouts in the iteration. Each round draws the missing number of
        groups divided by the informative share seen so far (at least 1/4), so a batch of mostly equal groups
        refills in few rounds. ``stats`` gains the rounds' seconds.

        Returns:
            the tasks rolled out (``batch`` then the drawn ones, in order), all trajectories, the rounds run.
        """
        a = self.settings.agent
        k, n, cap = a.batch_tasks, a.n, a.max_rollouts
        tasks, trajs, rounds = list(batch), list(trajs), 0
        while True:
            informative = len(self.trained_groups(trajs))
            groups = len({t.task.id for t in trajs})
            room = (cap - len(trajs)) // n
            if informative >= k or room <= 0:
                break
            share = informative / groups if groups else 1.0
            more = self.draw_pool(min(room, math.ceil((k - informative) / max(share, 0.25))),
                                  exclude=[t.id for t in tasks])
            if not more:
                break
            more_trajs, more_stats = self.rollout(more)
            for key, v in more_stats.items():
                stats[key] = stats.get(key, 0.0) + v
            tasks += more
            trajs += more_trajs
            rounds += 1
        return tasks, trajs, rounds

    def trained_groups(self, trajs: list[Trajectory]) -> list[str]:
        """The task groups an informative batch trains on: the informative ones
        (:func:`~genenv.trainer.updates.advantages.informative_task_ids`) in rollout order, at most
        ``agent.batch_tasks``, of which at most ``agent.filter_groups.generated_share`` x ``agent.batch_tasks``
        (rounded down) are generated tasks."""
        k = self.settings.agent.batch_tasks
        most_generated = math.floor(self.settings.agent.generated_share * k + 1e-9)
        out, generated = [], 0
        origin = {t.task.id: t.task.origin for t in trajs}
        for task_id in informative_task_ids(trajs):
            if origin[task_id] == "generated":
                if generated >= most_generated:
                    continue
                generated += 1
            out.append(task_id)
            if len(out) == k:
                break
        return out

    def run_iteration(self) -> dict[str, Any]:
        """One full iteration (see module docstring); returns its metric row."""
        st, it = self.settings, self.iteration
        timing: dict[str, float] = {}
        t0 = time.perf_counter()
        records, rejected = self.generate_tasks(it)
        timing["task_generation"] = time.perf_counter() - t0

        new_tasks = [r.task for r in records if r.task is not None]
        batch = self.agent_batch(new_tasks)
        trajs, stats = self.rollout_batch(new_tasks, batch)
        refills = 0
        if st.agent.frozen:
            trained = []
        elif st.agent.filter_groups:
            batch, trajs, refills = self.fill_informative(batch, trajs, stats)
            trained = self.trained_groups(trajs)
        else:
            trained = informative_task_ids(trajs)  # the update drops equal-reward groups itself
        timing["agent_rollout"] = stats.get("generate_seconds", 0.0)
        timing["env_steps"] = stats.get("env_seconds", 0.0)

        t1 = time.perf_counter()
        rewards_by_task: dict[str, list[float]] = {}
        for t in trajs:
            rewards_by_task.setdefault(t.task.id, []).append(t.reward)
        p_hat = {tid: float(np.mean(rs)) for tid, rs in rewards_by_task.items()}
        scored = self.score_generations(records, p_hat)
        timing["env_reward"] = time.perf_counter() - t1

        t2 = time.perf_counter()
        update_mode = "none" if st.generation.mode == "envgen" else st.env_update_mode
        samples, estimator = env_policy_samples(update_mode, scored, st.curriculum.lam)  # EnvGen's LLM is frozen
        env_update = self.backend.update("env_policy", samples, estimator) if estimator else {"skipped": True}
        timing["env_policy_update"] = time.perf_counter() - t2

        t3 = time.perf_counter()
        if st.agent.frozen:  # a stationary agent: the environment policy is measured alone
            agent_update = {"skipped": True, "frozen": True, "groups_dropped": 0}
        else:
            keep = set(trained) if st.agent.filter_groups else {t.task.id for t in trajs}
            agent_update = self.backend.update("agent", agent_samples([t for t in trajs if t.task.id in keep]), "grpo")
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
                                   trained=trained, refill_rounds=refills)
        deltas = {r: abs(self.backend.fingerprint(r) - self.initial_fingerprint[r]) for r in ROLES}
        row = metrics_row(outcome, st.curriculum, self.pool.counts(), len(self.pool), deltas)
        self.iteration += 1
        if st.eval_every and (self.iteration % st.eval_every == 0 or self.iteration == st.iterations):
            row.update(self.evaluate_heldout(log_iteration=it))
        self.metrics.write(row)
        if self.iteration % st.save_every == 0 or self.iteration == st.iterations:
            self.save_checkpoint()
        return row

    def evaluate_heldout(self, log_iteration: int | None = None) -> dict[str, float]:
        """Greedy evaluation of the agent on the held-out split (``eval.limit`` tasks per unit) with the
        leaderboard's :func:`~genenv.runtime.evaluation.evaluate`: ``heldout/<metric key>`` for every
        metric, ``heldout/score`` and ``heldout/n`` for the benchmark's headline metric, ``time/heldout_eval``.
        With ``log_iteration``, each task's outcome is appended to ``heldout.jsonl`` as ``{"iteration", "unit",
        "task_id", "reward", "success"}`` (one row per held-out task)."""
        from genenv.runtime.evaluation import evaluate

        t = time.perf_counter()
        res = evaluate(self.backend.policy("agent"), [self.spec.name], split="heldout", data_dir=self.settings.data_dir,
                       limit=self.settings.eval_limit,
                       options={self.spec.name: self.spec.pool_options(self.settings.seed_options)},
                       max_new_tokens=self.settings.agent.max_new_tokens, progress=False, env_kwargs=self.env_kwargs)
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


def agent_samples(trajectories: list[Trajectory]) -> list[Sample]:
    """The agent's update samples: each episode's sequences (:meth:`Trajectory.segments`), rewarded with its
    return, grouped by task, one episode counted once."""
    samples = []
    for t in trajectories:
        episode = f"{t.task.id}#{t.sample_index}"
        for seg in t.segments():
            samples.append(Sample(seg.prompt_ids, seg.response_ids, t.reward, t.task.id,
                                  response_mask=seg.response_mask, episode=episode))
    return samples
