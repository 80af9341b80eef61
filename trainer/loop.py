"""The co-evolution loop (GenEnv, arXiv 2512.19682, Algorithm 1), written against the :class:`Backend` interface.

One iteration t:

1. **Environment generation** — ``prompts_per_iteration`` prompts, each with ``seed_examples`` tasks drawn from
   the pool and the agent's recent success rate; the environment policy samples ``generations_per_prompt``
   task texts per prompt (skipped with ``generation: off``).
2. **Validation** — each text is parsed (strict JSON) and validated by the benchmark spec, then checked for
   near-duplicates of the pool; rejections are counted by reason and get R_env = 0.
3. **Agent rollouts** — the admitted tasks plus tasks sampled from the pool (up to ``agent.batch_tasks``),
   ``n`` rollouts each, through the Gymnasium envs; agent reward per paper Eq. 1.
4. **p̂ per task** = mean agent reward over its n rollouts (= the success rate for binary rewards).
5. **Environment reward** R_env(p̂) (Eq. 3 by default, or another reward from ``rewards/``) and the difficulty
   filter |p̂ - α| ≤ k_min.
6. **Environment update** — RWR (paper) on the in-band admitted generations, or GRPO on R_env, or none.
7. **Agent update** — GRPO with veRL's functions; groups whose rewards are all equal are dropped and counted.
8. Admitted tasks join the pool; metrics are written; a checkpoint is saved (both policies, optimiser states,
   pool, RNG states, counters). A killed run resumes from the last checkpoint.
"""
from __future__ import annotations

import json
import logging
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch

from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.spec import Rejection
from genenv.envs.task import Task
from genenv.rewards.env_reward import difficulty_filter, env_reward
from genenv.trainer.grpo import Sample
from genenv.trainer.pool import TaskPool
from genenv.trainer.policies import Prompt
from genenv.trainer.rollout import rollout_tasks
from genenv.trainer.rwr import rwr_samples

log = logging.getLogger(__name__)

P_HAT_BINS = np.linspace(0.0, 1.0, 11)


class CoEvolutionTrainer:
    """Runs the loop for ``cfg.iterations`` iterations in ``cfg.run_dir`` (see ``configs/train.yaml`` for keys).

    Args:
        cfg: the composed OmegaConf config.
        backend: a :class:`~genenv.trainer.backend.Backend`; built from ``cfg`` when ``None``.
    """

    def __init__(self, cfg, backend=None):
        self.cfg = cfg
        self.spec = get_benchmark(cfg.benchmark.name)
        self.run_dir = Path(cfg.run_dir)
        self.ckpt_dir = self.run_dir / "checkpoints"
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.backend = backend if backend is not None else build_backend(cfg)
        self.rng = random.Random(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.iteration = 0
        self.counters: Counter = Counter()
        self.pool = TaskPool()
        self.initial_fingerprint = {r: self.backend.fingerprint(r) for r in ("agent", "env")}
        self.tb = None

    # ----- set-up, checkpoints -----
    def seed_pool(self) -> None:
        """Fill the pool with the benchmark's training split (``benchmark.seed_options``, ``seed_limit``)."""
        opts = dict(self.cfg.benchmark.get("seed_options") or {})
        tasks = self.spec.load(split="train", data_dir=self.cfg.data_dir, **opts)
        limit = self.cfg.benchmark.get("seed_limit")
        self.pool = TaskPool(tasks[:limit] if limit else tasks)

    def latest_checkpoint(self) -> Path | None:
        """The checkpoint named in ``checkpoints/latest``, if any."""
        pointer = self.ckpt_dir / "latest"
        if not pointer.is_file():
            return None
        path = self.ckpt_dir / pointer.read_text().strip()
        return path if path.is_dir() else None

    def save_checkpoint(self) -> Path:
        """Save everything needed to resume after iteration ``self.iteration - 1``; keeps the last K."""
        path = self.ckpt_dir / f"iter-{self.iteration:05d}"
        tmp = path.with_name(path.name + ".tmp")
        self.backend.save(tmp)
        self.pool.save(tmp / "pool.jsonl")
        state = {"iteration": self.iteration, "counters": dict(self.counters),
                 "initial_fingerprint": self.initial_fingerprint,
                 "python_rng": _jsonable(self.rng.getstate())}
        (tmp / "state.json").write_text(json.dumps(state))
        torch.save({"torch": torch.get_rng_state(), "numpy": np.random.get_state()}, tmp / "rng.pt")
        if path.exists():
            import shutil

            shutil.rmtree(path)
        tmp.rename(path)
        (self.ckpt_dir / "latest.tmp").write_text(path.name)
        (self.ckpt_dir / "latest.tmp").replace(self.ckpt_dir / "latest")
        keep = int(self.cfg.get("keep_checkpoints", 2))
        old = sorted(p for p in self.ckpt_dir.glob("iter-*") if p.is_dir() and not p.name.endswith(".tmp"))
        for p in old[:-keep]:
            import shutil

            shutil.rmtree(p)
        return path

    def resume(self, path: Path) -> None:
        """Restore policies, optimisers, pool, RNG states and counters; drop metric rows of unfinished iterations."""
        self.backend.load(path)
        self.pool = TaskPool.load(path / "pool.jsonl")
        state = json.loads((path / "state.json").read_text())
        self.iteration = state["iteration"]
        self.counters = Counter(state["counters"])
        self.initial_fingerprint = state["initial_fingerprint"]
        self.rng.setstate(_tupled(state["python_rng"]))
        rng = torch.load(path / "rng.pt", weights_only=False)
        torch.set_rng_state(rng["torch"])
        np.random.set_state(rng["numpy"])
        for name in ("metrics.jsonl", "generations.jsonl"):
            f = self.run_dir / name
            if f.is_file():
                rows = [ln for ln in f.read_text().splitlines() if ln.strip()
                        and json.loads(ln)["iteration"] < self.iteration]
                f.write_text("".join(r + "\n" for r in rows))
        log.info("resumed from %s at iteration %d with %d pool tasks", path, self.iteration, len(self.pool))

    # ----- the loop -----
    def run(self) -> list[dict[str, Any]]:
        """Resume if a checkpoint exists (``resume: true``), else seed the pool; run the remaining iterations.

        Returns the metric rows of the iterations run by this call.
        """
        ckpt = self.latest_checkpoint() if self.cfg.get("resume", True) else None
        if ckpt is not None:
            self.resume(ckpt)
        else:
            self.seed_pool()
        (self.run_dir / "config.yaml").write_text(_to_yaml(self.cfg))
        rows = []
        from tqdm.auto import tqdm

        bar = tqdm(total=self.cfg.iterations, initial=self.iteration, desc="co-evolution", unit="iter")
        while self.iteration < self.cfg.iterations:
            row = self.step()
            rows.append(row)
            bar.update(1)
            bar.set_postfix(reward=f"{row['agent/reward_mean']:.2f}", admitted=row["gen/admitted"],
                            pool=row["pool/size"])
        bar.close()
        if self.tb is not None:
            self.tb.close()
        return rows

    def generate_tasks(self, it: int) -> tuple[list[dict[str, Any]], Counter]:
        """Steps 1-2: sample task texts from the environment policy and validate them.

        Returns one record per generation (``prompt`` messages, ``generation``, ``task`` or ``rejection``,
        ``parent``) and the rejection counts by reason.
        """
        g = self.cfg.generation
        if not g.enabled:
            return [], Counter()
        seeds_all = [t for t in self.pool.tasks if self.spec.demonstrable(t)]
        prompts, parents = [], []
        p_hat = self.pool.recent_p_hat()
        for _ in range(g.prompts_per_iteration):
            seeds = self.rng.sample(seeds_all, min(g.seed_examples, len(seeds_all)))
            prompts.append(Prompt(self.spec.generation_messages(seeds, p_hat, self.cfg.curriculum.alpha)))
            parents.append(seeds[0] if seeds else None)
        gens = self.backend.policy("env").generate(prompts, n=g.generations_per_prompt, temperature=g.temperature,
                                                   max_new_tokens=g.max_new_tokens)
        records, rejected = [], Counter()
        admitted_now: list[Task] = []
        for pi, (prompt, parent, group) in enumerate(zip(prompts, parents, gens)):
            for k, gen in enumerate(group):
                task_id = f"gen-{it}-{pi}-{k}"
                out = self.spec.parse_generated(gen.text, task_id, it, parent)
                if isinstance(out, Task):
                    dup = self.spec.near_duplicate(out, self.pool.tasks + admitted_now)
                    out = dup or out
                if isinstance(out, Rejection):
                    rejected[out.reason] += 1
                else:
                    admitted_now.append(out)
                records.append({"prompt_index": pi, "generation": gen, "task": out if isinstance(out, Task) else None,
                                "rejection": out if isinstance(out, Rejection) else None})
        return records, rejected

    def step(self) -> dict[str, Any]:
        """One full iteration (see module docstring); returns its metric row."""
        cfg, it = self.cfg, self.iteration
        timing: dict[str, float] = {}
        t0 = time.perf_counter()
        records, rejected = self.generate_tasks(it)
        timing["env_generation"] = time.perf_counter() - t0
        env_tokens = sum(len(r["generation"].response_ids) for r in records)

        new_tasks = [r["task"] for r in records if r["task"] is not None]
        batch = new_tasks + self.pool.sample(max(0, cfg.agent.batch_tasks - len(new_tasks)), self.rng)
        stats: dict[str, float] = {}
        if self._rollout_mode() == "agent_loop":  # multi-turn path: veRL agent loop, token-level episodes
            from genenv.trainer.agent_loop import rollout_agent_loop

            t_roll = time.perf_counter()
            kw = dict(n=cfg.agent.n, temperature=cfg.agent.temperature, max_new_tokens=cfg.agent.max_new_tokens,
                      env_kwargs=self._env_kwargs(), max_turns=cfg.agent.get("max_turns", 8),
                      response_length=cfg.agent.get("response_length"))
            if hasattr(self.backend, "rollout_agent_loop"):  # verl_ray: veRL's AgentLoopManager on the cluster
                trajs = self.backend.rollout_agent_loop(batch, **kw)
            else:
                trajs = rollout_agent_loop(batch, self.backend.policy("agent"), **kw)
            stats["generate_seconds"] = time.perf_counter() - t_roll  # env steps interleave with generation here
        else:
            trajs = rollout_tasks(batch, self.backend.policy("agent"), n=cfg.agent.n,
                                  temperature=cfg.agent.temperature, max_new_tokens=cfg.agent.max_new_tokens,
                                  env_kwargs=self._env_kwargs(), stats=stats)
        timing["agent_rollout"] = stats.get("generate_seconds", 0.0)
        timing["reward"] = stats.get("reward_seconds", 0.0)
        agent_tokens = sum(len(t.response_ids) for t in trajs)

        t1 = time.perf_counter()
        rewards_by_task: dict[str, list[float]] = {}
        for t in trajs:
            rewards_by_task.setdefault(t.task.id, []).append(t.reward)
        p_hat = {tid: float(np.mean(rs)) for tid, rs in rewards_by_task.items()}
        cur = cfg.curriculum
        env_samples, in_band, admitted, r_env_all = [], [], [], []
        for r in records:
            gen = r["generation"]
            if r["task"] is None:
                reward, keep = 0.0, False
            else:
                ph = p_hat[r["task"].id]
                reward = float(env_reward(cur.env_reward, ph, alpha=cur.alpha, beta=cur.beta))
                keep = bool(difficulty_filter(ph, cur.alpha, cur.k_min))
            r_env_all.append(reward)
            if gen.response_ids:
                env_samples.append(Sample(gen.prompt_ids, gen.response_ids, reward, f"prompt-{r['prompt_index']}"))
                in_band.append(keep)
                admitted.append(r["task"] is not None)
        timing["reward"] += time.perf_counter() - t1

        t2 = time.perf_counter()
        env_metrics: dict[str, Any] = {"skipped": True}
        mode = cfg.env_update.mode
        if mode == "rwr":
            env_metrics = self.backend.update("env", rwr_samples(env_samples, in_band, cur.lam), "rwr")
        elif mode == "grpo":  # rejected generations (R_env 0) and in-band admitted ones; out-of-band ones sit out
            kept = [s for s, keep, adm in zip(env_samples, in_band, admitted) if keep or not adm]
            env_metrics = self.backend.update("env", kept, "grpo")
        elif mode != "none":
            raise ValueError(f"env_update.mode must be rwr, grpo or none, got {mode!r}")
        timing["env_update"] = time.perf_counter() - t2

        t3 = time.perf_counter()
        agent_samples = [Sample(t.prompt_ids, t.response_ids, t.reward, t.task.id,
                                response_mask=t.info.get("response_mask")) for t in trajs if t.response_ids]
        agent_metrics = self.backend.update("agent", agent_samples, "grpo")
        timing["agent_update"] = time.perf_counter() - t3

        for task in new_tasks:
            self.pool.add(task)
        self.pool.record(it, p_hat)
        self.counters["admitted"] += len(new_tasks)
        self.counters["generated"] += len(records)
        for reason, c in rejected.items():
            self.counters[f"rejected/{reason}"] += c
        self.counters["groups_dropped"] += agent_metrics.get("groups_dropped", 0)
        timing["total"] = time.perf_counter() - t0

        self._write_generations(it, records, p_hat, r_env_all)
        row = self._metrics_row(it, timing, records, rejected, trajs, p_hat, r_env_all, in_band, new_tasks,
                                env_metrics, agent_metrics, env_tokens, agent_tokens)
        self.iteration += 1
        if cfg.eval.every and (self.iteration % cfg.eval.every == 0 or self.iteration == cfg.iterations):
            row.update(self.evaluate_heldout())
        self._write_metrics(row)
        if self.iteration % cfg.save_every == 0 or self.iteration == cfg.iterations:
            self.save_checkpoint()
        return row

    def evaluate_heldout(self) -> dict[str, float]:
        """Greedy evaluation of the agent on the held-out split with the leaderboard's :func:`evaluate`."""
        from genenv.eval.leaderboard import evaluate

        t = time.perf_counter()
        res = evaluate(self.backend.policy("agent"), [self.spec.name], split="heldout", data_dir=self.cfg.data_dir,
                       limit=self.cfg.eval.limit, options={self.spec.name: dict(self.cfg.benchmark.seed_options or {})},
                       max_new_tokens=self.cfg.agent.max_new_tokens, progress=False, env_kwargs=self._env_kwargs())
        out = {f"heldout/{m.key}": m.value for m in res.metrics}
        out["time/heldout_eval"] = time.perf_counter() - t
        return out

    def _rollout_mode(self) -> str:
        """``agent.rollout``: ``direct`` (batched text rollouts), ``agent_loop`` (veRL agent loop), or ``auto``
        (the agent loop for multi-step envs, whose updates need per-token response masks)."""
        mode = self.cfg.agent.get("rollout", "auto")
        if mode == "auto":
            return "agent_loop" if self.spec.env_class.multi_step else "direct"
        if mode not in ("direct", "agent_loop"):
            raise ValueError(f"agent.rollout must be auto, direct or agent_loop, got {mode!r}")
        return mode

    def _env_kwargs(self) -> dict[str, dict[str, Any]]:
        """Env constructor options: ``benchmark.env_kwargs``, plus ``metric`` = ``reward.free_text_metric`` for
        free-text envs."""
        kwargs = dict(self.cfg.benchmark.get("env_kwargs") or {})
        metric = self.cfg.reward.get("free_text_metric")
        if metric and self.spec.env_class.action_kind == "free_text":
            kwargs.setdefault("metric", metric)
        return {self.spec.name: kwargs}

    def _metrics_row(self, it, timing, records, rejected, trajs, p_hat, r_env_all, in_band, new_tasks,
                     env_metrics, agent_metrics, env_tokens, agent_tokens) -> dict[str, Any]:
        cur = self.cfg.curriculum
        p_new = [p_hat[t.id] for t in new_tasks]
        p_all = list(p_hat.values())
        hist, _ = np.histogram(p_all, bins=P_HAT_BINS)
        gen_time = timing["env_generation"]
        roll_time = timing["agent_rollout"]
        row: dict[str, Any] = {
            "iteration": it,
            "gen/generated": len(records), "gen/admitted": len(new_tasks), "gen/rejected": sum(rejected.values()),
            **{f"gen/rejected/{k}": v for k, v in sorted(rejected.items())},
            "agent/reward_mean": float(np.mean([t.reward for t in trajs])) if trajs else 0.0,
            "agent/success_rate": float(np.mean([t.success for t in trajs])) if trajs else 0.0,
            "agent/tasks": len(p_hat), "agent/rollouts": len(trajs),
            "p_hat/mean": float(np.mean(p_all)) if p_all else 0.0,
            "p_hat/histogram": hist.tolist(),
            "p_hat/generated": p_new,
            "p_hat/in_band_share": float(np.mean(difficulty_filter(np.array(p_all), cur.alpha, cur.k_min)))
            if p_all else 0.0,
            "r_env/mean": float(np.mean(r_env_all)) if r_env_all else 0.0,
            "r_env/mean_admitted": float(np.mean([x for x, r in zip(r_env_all, records) if r["task"] is not None]))
            if new_tasks else 0.0,
            "r_env/in_band": int(sum(in_band)),
            "pool/size": len(self.pool), **{f"pool/{k}": v for k, v in self.pool.counts().items()},
            **{f"time/{k}": v for k, v in timing.items()},
            "tokens_per_second/env": env_tokens / gen_time if gen_time > 0 else 0.0,
            "tokens_per_second/agent": agent_tokens / roll_time if roll_time > 0 else 0.0,
            **{f"agent_update/{k}": v for k, v in agent_metrics.items()},
            **{f"env_update/{k}": v for k, v in env_metrics.items()},
            "weights/agent_delta": abs(self.backend.fingerprint("agent") - self.initial_fingerprint["agent"]),
            "weights/env_delta": abs(self.backend.fingerprint("env") - self.initial_fingerprint["env"]),
        }
        return row

    def _write_generations(self, it: int, records, p_hat: dict[str, float], r_env_all: list[float]) -> None:
        """Append every generation of iteration ``it`` to ``generations.jsonl`` (text, verdict, p̂, R_env)."""
        with open(self.run_dir / "generations.jsonl", "a", encoding="utf-8") as fh:
            for r, r_env in zip(records, r_env_all):
                task, rej = r["task"], r["rejection"]
                fh.write(json.dumps({
                    "iteration": it, "prompt_index": r["prompt_index"], "text": r["generation"].text,
                    "admitted": task is not None, "task_id": task.id if task else None,
                    "rejection": rej.reason if rej else None, "detail": rej.detail if rej else None,
                    "p_hat": p_hat.get(task.id) if task else None, "r_env": r_env}, ensure_ascii=False) + "\n")

    def _write_metrics(self, row: dict[str, Any]) -> None:
        with open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row, default=float) + "\n")
        if self.cfg.get("tensorboard", True):
            if self.tb is None:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(self.run_dir / "tensorboard"))
            for k, v in row.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    self.tb.add_scalar(k, v, row["iteration"])
            if row["p_hat/histogram"]:
                values = np.repeat((P_HAT_BINS[:-1] + P_HAT_BINS[1:]) / 2, row["p_hat/histogram"])
                if len(values):
                    self.tb.add_histogram("p_hat", values, row["iteration"])
            self.tb.flush()


def build_backend(cfg):
    """The back-end named by ``cfg.engine``: ``local`` (:class:`~genenv.trainer.backend.LocalBackend`) or
    ``verl_ray`` (:class:`~genenv.trainer.verl_ray.VerlRayBackend`, imported only then).

    Raises:
        ValueError: an unknown engine.
        RuntimeError: ``verl_ray`` without the GPUs its resource pools need (before any worker starts).
    """
    from genenv.trainer.backend import LocalBackend, RoleConfig

    if cfg.engine == "verl_ray":
        from genenv.trainer.verl_ray import build_verl_ray_backend

        return build_verl_ray_backend(cfg)
    if cfg.engine != "local":
        raise ValueError(f"engine {cfg.engine!r} is not available; choose local or verl_ray")
    roles = {role: RoleConfig(**dict(cfg[role].policy)) for role in ("agent", "env")}
    device = cfg.device
    if device == "auto":  # one GPU when present, else the CPU
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return LocalBackend(roles, device=device, autocast_dtype=cfg.get("autocast_dtype"), threads=cfg.get("threads"))


def _jsonable(state):
    return [list(x) if isinstance(x, tuple) else x for x in state]


def _tupled(state):
    return tuple(tuple(x) if isinstance(x, list) else x for x in state)


def _to_yaml(cfg) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(cfg, resolve=True)
