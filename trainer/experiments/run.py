"""``genenv-experiment``: the curriculum experiment. Arms of the co-evolution loop on one benchmark, equal in
everything but the task source, run for several seeds and compared on the held-out split.

Arms (:data:`ARMS`; GenEnv, arXiv 2512.19682, §5 and its BFCL comparison):

- ``genenv``: the environment policy writes tasks every iteration and is trained on R_env (``env_policy.update_mode``
  as configured, RWR by default).
- ``random_env``: the same generation, the environment policy frozen (``env_policy.update_mode=none``; the
  paper's RandomEnv).
- ``replay``: ``random_env`` (the environment policy frozen) with the pool drawn by curated replay
  (``pool.sampling=learnability``: Prioritized Level Replay on p̂(1-p̂), :meth:`TaskPool.sample_replay`), so a
  comparison with ``genenv`` asks whether *training* the writer adds anything beyond curating what a frozen writer
  wrote.
- ``envgen``: EnvGen mode (a frozen LLM prompted with the agent's per-skill success rates every
  ``generation.every`` iterations; Zala et al., COLM 2024).
- ``static``: the seed tasks only (``generation.enabled=false``).
- ``static_aug``: the seed tasks plus as many generated tasks as the ``genenv`` arm of the same seed admitted over
  its run, written once up front by the frozen environment policy (``generation.upfront_tasks``; the paper's
  static augmentation). It runs after that ``genenv`` arm.

With ``agent.frozen=true`` (and ``eval.every=0``: a frozen agent's held-out score cannot change) the experiment
measures the environment policy alone: ``genenv`` against ``random_env`` on a stationary agent, compared by the
report's difficulty-alignment statistic (:mod:`genenv.trainer.experiments.alignment`).

Every arm has the same iterations, agent batch (``agent.batch_tasks`` tasks x ``agent.n`` rollouts; a GenEnv
iteration that admits more tasks than the batch rolls all of them out, so the report's x-axis is the agent tasks
actually consumed), seeds and held-out tasks; the held-out split is evaluated greedily every ``eval.every``
iterations and after the last, and the untrained agent once per experiment (all arms start from the same
weights). An arm is a normal ``genenv-train`` run directory, ``<experiment_dir>/<arm>/seed<k>``: it resumes from
its last checkpoint, and re-running the command resumes the experiment where it stopped. The report
(:mod:`genenv.trainer.experiments.report`) is written after every arm.

Examples::

    genenv-experiment benchmark=bfcl iterations=12 seeds=[0,1] experiment_dir=experiments/bfcl
    genenv-experiment benchmark=bamboogle iterations=1 seeds=[0] arms=[genenv,static]
    genenv-experiment benchmark=twx arms=[genenv,random_env] agent.frozen=true eval.every=0 \
        env_policy.update_mode=grpo seeds=[0,1,2,3] iterations=10       # does the environment policy learn?
    genenv-experiment report experiments/bfcl          # rewrite summary.md / summary.json / curves.png
    genenv-experiment compare experiments/rwr/genenv experiments/grpo/genenv   # alignment and outcome, two folders
"""
from __future__ import annotations

import gc
import json
import logging
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from genenv.trainer.experiments.report import arm_dir, read_rows, write_report

log = logging.getLogger(__name__)

ARMS: dict[str, dict[str, Any]] = {
    "genenv": {"generation.enabled": True, "generation.mode": "genenv"},
    "random_env": {"generation.enabled": True, "generation.mode": "genenv", "env_policy.update_mode": "none"},
    "replay": {"generation.enabled": True, "generation.mode": "genenv", "env_policy.update_mode": "none",
               "pool.sampling": "learnability"},
    "envgen": {"generation.enabled": True, "generation.mode": "envgen"},
    "static": {"generation.enabled": False},
    "static_aug": {"generation.enabled": False},  # + generation.upfront_tasks from the genenv arm
}


def admitted_over_run(run_dir: Path) -> int:
    """Generated tasks a run admitted over its iterations (sum of ``gen/admitted`` in its ``metrics.jsonl``)."""
    return int(sum(r.get("gen/admitted", 0) for r in read_rows(Path(run_dir) / "metrics.jsonl")))


def check_arm(arm: str) -> None:
    """Raises ``ValueError`` naming the known arms when ``arm`` is not one of :data:`ARMS`."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; arms: {', '.join(ARMS)}")


def arm_config(cfg, arm: str, seed: int):
    """The ``genenv-train`` config of ``arm`` at ``seed``: a copy of ``cfg`` with the arm's settings
    (:data:`ARMS`), ``seed``, ``run_dir`` = :func:`arm_dir` and, for ``static_aug``, ``generation.upfront_tasks`` =
    the tasks the ``genenv`` arm of that seed admitted.

    Raises:
        ValueError: an unknown arm; ``static_aug`` before its ``genenv`` arm has finished; a ``genenv`` arm whose
            environment policy is frozen (``env_policy.update_mode=none`` makes it ``random_env``).
    """
    from omegaconf import OmegaConf

    check_arm(arm)
    out = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    for key in ("arms", "seeds", "experiment_dir", "keep_finished_checkpoints", "score_metric"):
        out.pop(key, None)
    for key, value in ARMS[arm].items():
        OmegaConf.update(out, key, value)
    if arm == "genenv" and out.env_policy.update_mode == "none":
        raise ValueError("the genenv arm trains its environment policy: env_policy.update_mode=none is random_env")
    out.seed = int(seed)
    out.run_dir = str(arm_dir(cfg.experiment_dir, arm, seed))
    if arm == "static_aug":
        source = arm_dir(cfg.experiment_dir, "genenv", seed)
        if not finished(source, int(cfg.iterations)):
            raise ValueError(f"static_aug needs the finished genenv arm of seed {seed} ({source}): put genenv before "
                             "static_aug in arms")
        out.generation.upfront_tasks = admitted_over_run(source)
    return out


def finished(run_dir: Path, iterations: int) -> bool:
    """Whether the run in ``run_dir`` finished ``iterations`` iterations (its ``done.json``).

    Raises:
        ValueError: it finished fewer iterations and its checkpoints were removed, so it cannot be extended.
    """
    done = Path(run_dir) / "done.json"
    if not done.is_file():
        return False
    ran = json.loads(done.read_text())["iterations"]
    if ran >= iterations:
        return True
    if not (Path(run_dir) / "checkpoints" / "latest").is_file():
        raise ValueError(f"{run_dir} finished {ran} iterations and its checkpoints were removed "
                         "(keep_finished_checkpoints=false): run the longer experiment in a new experiment_dir")
    return False


def finish_arm(run_dir: Path, iterations: int, keep_checkpoints: bool) -> None:
    """Mark a finished run (``done.json``), copy its final task pool and loop state next to its metrics
    (``final_pool.jsonl``, ``final_state.json``), and remove its checkpoints unless ``keep_checkpoints``."""
    from genenv.trainer.checkpoint import latest_checkpoint

    run_dir = Path(run_dir)
    ckpt = latest_checkpoint(run_dir / "checkpoints")
    if ckpt is not None:
        shutil.copyfile(ckpt / "pool.jsonl", run_dir / "final_pool.jsonl")
        shutil.copyfile(ckpt / "state.json", run_dir / "final_state.json")
    (run_dir / "done.json").write_text(json.dumps({"iterations": iterations}))
    if not keep_checkpoints:
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)


def run_experiment(cfg, backend_factory=None) -> Path:
    """Run (or resume) every arm x seed of ``cfg`` (``configs/experiment.yaml``) in ``cfg.experiment_dir``, seed
    by seed in the order of ``cfg.arms``; evaluate the untrained agent once (``baseline.json``); write the report
    after every arm. Returns the experiment directory.

    Args:
        backend_factory: ``cfg -> Backend`` (tests); ``None`` builds the configured engine.
    Raises:
        ValueError: see :func:`arm_config` and :func:`finished`; no held-out evaluation (``eval.every`` < 1)
            while the agent trains (with ``agent.frozen`` the experiment measures the environment policy alone
            and needs none).
    """
    from omegaconf import OmegaConf

    from genenv.trainer.loop import CoEvolutionTrainer

    frozen = bool(cfg.agent.frozen)
    if int(cfg.eval.every) < 1 and not frozen:
        raise ValueError("an experiment compares held-out scores: set eval.every >= 1 (or agent.frozen=true to "
                         "measure the environment policy alone)")
    for arm in cfg.arms:
        check_arm(arm)
    exp = Path(cfg.experiment_dir)
    exp.mkdir(parents=True, exist_ok=True)
    (exp / "experiment.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    iterations = int(cfg.iterations)
    for seed in cfg.seeds:
        for arm in cfg.arms:
            run_dir = arm_dir(exp, arm, seed)
            if finished(run_dir, iterations):
                log.info("%s seed %s: finished, kept", arm, seed)
                continue
            arm_cfg = arm_config(cfg, arm, seed)
            start = time.perf_counter()
            trainer = CoEvolutionTrainer(arm_cfg, backend_factory(arm_cfg) if backend_factory else None)
            if not (exp / "baseline.json").is_file() and int(cfg.eval.every) >= 1:
                (exp / "baseline.json").write_text(json.dumps(trainer.evaluate_heldout()))
            log.info("%s seed %s: running in %s", arm, seed, run_dir)
            trainer.run()
            with open(run_dir / "sittings.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"wall_seconds": time.perf_counter() - start}) + "\n")
            del trainer
            gc.collect()
            finish_arm(run_dir, iterations, bool(cfg.get("keep_finished_checkpoints", False)))
            write_report(exp)
    return write_report(exp)


def main() -> int:
    """Dispatch ``report DIR``, ``compare TREATMENT_ARM CONTROL_ARM [--plot FILE]`` or run Hydra's main with
    ``configs/experiment.yaml``."""
    if len(sys.argv) > 1 and sys.argv[1] == "compare":
        import argparse

        from genenv.trainer.experiments import alignment, outcome
        from genenv.trainer.experiments.report import compare_arms, compare_outcome

        ap = argparse.ArgumentParser(prog="genenv-experiment compare",
                                     description="difficulty alignment and held-out outcome of two arm folders, "
                                                 "paired by seed")
        ap.add_argument("treatment", type=Path, help="<experiment_dir>/<arm>, e.g. experiments/rwr/genenv")
        ap.add_argument("control", type=Path, help="<experiment_dir>/<arm>, e.g. experiments/grpo/genenv")
        ap.add_argument("--plot", type=Path, default=None, help="also draw the alignment plot to this file")
        args = ap.parse_args(sys.argv[2:])
        shown = 0
        try:
            stat = compare_arms(args.treatment, args.control)
        except ValueError as e:
            print(f"difficulty alignment: not compared ({e})")
        else:
            print("\n".join(alignment.markdown(stat, *stat["band"])))
            if args.plot:
                alignment.plot(stat, *stat["band"], args.plot)
            shown += 1
        try:
            stat = compare_outcome(args.treatment, args.control)
        except (ValueError, FileNotFoundError) as e:
            print(f"held-out outcome: not compared ({e})")
        else:
            treated, control = stat["arms"]
            print(f"\n## Held-out outcome, {treated} vs {control}\n")
            print("\n".join(outcome.table({control: stat}, treated)))
            shown += 1
        return 0 if shown else 1
    if len(sys.argv) > 1 and sys.argv[1] == "report":
        if len(sys.argv) != 3:
            print("usage: genenv-experiment report EXPERIMENT_DIR", file=sys.stderr)
            return 2
        print(write_report(Path(sys.argv[2])) / "summary.md")
        return 0
    import hydra

    @hydra.main(config_path="../../configs", config_name="experiment", version_base="1.3")
    def _run(cfg) -> None:
        from genenv.runtime.threads import prepare_cpu

        prepare_cpu(cfg.get("threads"))  # before torch loads: the thread count and OpenMP's passive wait
        logging.basicConfig(level=logging.INFO)
        exp = run_experiment(cfg)
        print((exp / "summary.md").read_text())
        print(f"experiment dir: {exp}")

    _run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
