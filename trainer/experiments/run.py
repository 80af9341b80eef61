"""``genenv-experiment``: the curriculum experiment. Arms of the co-evolution loop on one benchmark, equal in
everything but their strategies, run for several seeds and compared on the held-out split.

An arm is a config file, ``configs/arm/<arm>.yaml`` (or any YAML file given by path in ``arms``), that names a task
source and, where the arm is about it, an agent batch (`genenv.trainer.strategies`; GenEnv, arXiv
2512.19682, §5 and its BFCL comparison):

- ``genenv``: the environment policy writes tasks every iteration and is trained on R_env (``env_policy.update_mode``
  as configured, RWR by default).
- ``random_env``: the same writing, the environment policy frozen (the paper's RandomEnv).
- ``replay``: ``random_env``'s writer with the pool drawn by curated replay (Prioritized Level Replay on p̂(1-p̂)),
  so a comparison with ``genenv`` asks whether *training* the writer adds anything beyond curating what a frozen
  writer wrote.
- ``envgen``: EnvGen (a frozen LLM prompted with the agent's per-skill success rates every ``generation.every``
  iterations; Zala et al., COLM 2024).
- ``static``: the seed tasks only.
- ``static_aug``: the seed tasks plus as many generated tasks as the ``genenv`` arm of the same seed admitted over
  its run, written once up front by the frozen environment policy (the paper's static augmentation; its task
  source names the arm it is sized by, `sized_by_arm`).
  It runs after that arm.

An arm that does not name an agent batch gets the experiment's (``agent_batch``, ``uniform`` by default). With
``agent_batch=frozen`` (and ``eval.every=0``: a frozen agent's held-out score cannot change) the experiment
measures the environment policy alone: ``genenv`` against ``random_env`` on a stationary agent, compared by the
report's difficulty-alignment statistic (`genenv.trainer.experiments.alignment`).

Every arm has the same iterations, agent batch size (``agent.batch_tasks`` tasks x ``agent.n`` rollouts; a GenEnv
iteration that admits more tasks than the batch rolls all of them out, so the report's x-axis is the agent tasks
actually consumed), seeds and held-out tasks; the held-out split is evaluated greedily every ``eval.every``
iterations and after the last, and the untrained agent once per experiment (all arms start from the same
weights). An arm is a normal ``genenv-train`` run directory, ``<experiment_dir>/<arm>/seed<k>``: it resumes from
its last checkpoint, and re-running the command resumes the experiment where it stopped. Each arm-seed runs in a
process of its own (`in_fresh_process`). The report
(`genenv.trainer.experiments.report`) is written after every arm.

Examples:

    genenv-experiment benchmark=bfcl iterations=12 seeds=[0,1] experiment_dir=experiments/bfcl
    genenv-experiment benchmark=bamboogle iterations=1 seeds=[0] arms=[genenv,static]
    genenv-experiment benchmark=twx arms=[genenv,random_env] agent_batch=frozen eval.every=0 \
        env_policy.update_mode=grpo seeds=[0,1,2,3] iterations=10       # does the environment policy learn?
    genenv-experiment benchmark=twx arms=[genenv,my_arms/hard_first.yaml]   # an arm file of your own
    genenv-experiment report experiments/bfcl          # rewrite summary.md / summary.json / curves.png
    genenv-experiment compare experiments/rwr/genenv experiments/grpo/genenv   # alignment and outcome, two folders
    genenv-experiment report results/twx_informative.tar.xz --out /tmp/twx   # a shipped experiment, from its archive
    genenv-experiment archive experiments/twx_headroom --finished-only   # ship a running experiment's finished runs
    genenv-experiment compare results/twx_levers.tar.xz:drgrpo/genenv \
        results/twx_informative.tar.xz:genenv               # arm folders inside archives
"""
from __future__ import annotations

import gc
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

from genenv.trainer.experiments.archive import DONE_FILE, REPORT_FILES, experiment_folder
from genenv.trainer.experiments.archive import cli as archive_cli
from genenv.trainer.experiments.provenance import provenance
from genenv.trainer.experiments.report import arm_dir, iterations_run, read_rows, write_report
from genenv.trainer.experiments.settings import (ExperimentSettings, arm_config, arm_file, arm_name,
                                                 experiment_settings)

__all__ = ["arm_run_config", "in_fresh_process", "main", "run_arm_seed", "run_experiment"]

log = logging.getLogger(__name__)

def admitted_over_run(run_dir: Path) -> int:
    """Generated tasks a run admitted over its iterations (sum of ``gen/admitted`` in its ``metrics.jsonl``)."""
    return int(sum(r.get("gen/admitted", 0) for r in read_rows(Path(run_dir) / "metrics.jsonl")))


def arm_run_config(cfg, arm: str, seed: int, exp: ExperimentSettings | None = None):
    """The ``genenv-train`` config of ``arm`` at ``seed`` in the experiment of config ``cfg``
    (`arm_config`, ``run_dir`` = `arm_dir`); for a task source
    sized by another arm (``static_aug``), ``generation.upfront_tasks`` = the tasks that arm's run of the seed
    admitted.

    Raises:
        ValueError: see `arm_config`; ``static_aug`` before the run it is
            sized by has finished.
    """
    from genenv.envs.tables import load_object
    from genenv.trainer.strategies import TASK_SOURCES

    exp = exp or experiment_settings(cfg)
    run_dir = arm_dir(exp.experiment_dir, arm_name(arm), seed)
    out = arm_config(cfg, arm, seed, run_dir)
    sized_by = load_object(TASK_SOURCES.lookup(out.task_source)).sized_by_arm
    if sized_by is None:
        return out
    source = arm_dir(exp.experiment_dir, sized_by, seed)
    if not finished(source, exp.iterations):
        raise ValueError(f"{arm_name(arm)} needs the finished {sized_by} arm of seed {seed} ({source}): put "
                         f"{sized_by} before {arm_name(arm)} in arms")
    return arm_config(cfg, arm, seed, run_dir, upfront_tasks=admitted_over_run(source))


def finished(run_dir: Path, iterations: int) -> bool:
    """Whether the run in ``run_dir`` finished ``iterations`` iterations (its ``done.json``; `iterations_run`).

    Raises:
        ValueError: it finished fewer iterations and its checkpoints were removed, so it cannot be extended.
    """
    ran = iterations_run(run_dir)
    if ran is None:
        return False
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
    (run_dir / DONE_FILE).write_text(json.dumps({"iterations": iterations}))
    if not keep_checkpoints:
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)


def run_arm_seed(run_cfg, run_dir: Path, baseline: Path | None = None, backend_factory=None) -> None:
    """Run one arm-seed (``run_cfg``: its `arm_run_config`, whose run directory is ``run_dir``) to its end in this
    process, resuming from its last checkpoint; first write the untrained agent's held-out score to ``baseline`` when
    that file is given and missing. Appends the sitting (wall seconds and `provenance`) to
    ``<run_dir>/sittings.jsonl`` and stops the sampler's server process, if any. Raises what `CoEvolutionTrainer`
    raises."""
    from genenv.trainer.loop import CoEvolutionTrainer

    start = time.perf_counter()
    trainer = CoEvolutionTrainer(run_cfg, backend_factory(run_cfg) if backend_factory else None)
    try:
        if baseline is not None and not baseline.is_file():
            baseline.write_text(json.dumps(trainer.evaluate_heldout()))
        trainer.run()
        with open(run_dir / "sittings.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"wall_seconds": time.perf_counter() - start, **provenance()}) + "\n")
    finally:
        close = getattr(trainer.backend, "close", None)
        if close is not None:  # a sampler's server process stops with its arm-seed
            close()


def _logging_spec() -> list[tuple[str, logging.Formatter | None]]:
    """This process's root log handlers that a child can open again, as ``(where, formatter)``: ``where`` a file
    name, ``"<stdout>"`` or ``"<stderr>"``; ``formatter`` the handler's own formatter object (a subclass included; it
    crosses to the child by pickle), ``None`` where it has none or it does not pickle (the child then logs in
    logging's default format, and a warning here names the handler and the pickle error). Other handlers (a test
    harness's capture) are left out."""
    import pickle

    out = []
    for h in logging.getLogger().handlers:
        if isinstance(h, logging.FileHandler):
            where = h.baseFilename
        elif isinstance(h, logging.StreamHandler) and h.stream in (sys.stdout, sys.stderr):
            where = "<stdout>" if h.stream is sys.stdout else "<stderr>"
        else:
            continue
        formatter = h.formatter
        try:
            pickle.dumps(formatter)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:  # one that cannot cross (a lock or lambda)
            log.warning("the log formatter of %s cannot cross to the arm-seed's process (%s: %s); its lines there "
                        "use logging's default format", where, type(exc).__name__, exc)
            formatter = None
        out.append((where, formatter))
    return out


def _child_main(parent: int, spec: list, level: int, target, args: tuple) -> None:
    """The start of a fresh process (`in_fresh_process`): log as the parent does, end with the parent
    (`genenv.runtime.processes.end_with_parent`), run ``target``. ``parent`` is the parent's pid, for the log."""
    from genenv.runtime.processes import end_with_parent

    root = logging.getLogger()
    root.setLevel(level)
    for where, formatter in spec:
        handler = (logging.StreamHandler(sys.stdout if where == "<stdout>" else sys.stderr)
                   if where in ("<stdout>", "<stderr>") else logging.FileHandler(where))
        handler.setFormatter(formatter)
        root.addHandler(handler)
    end_with_parent(lambda: log.warning("the experiment's process %d ended: this arm-seed stops too (its last "
                                        "checkpoint stays for the resume)", parent))
    target(*args)


def in_fresh_process(target, *args, name: str = "") -> None:
    """Call ``target(*args)`` in a new Python process (multiprocessing's ``spawn`` start: nothing of this process's
    heap, threads or accelerator state is inherited) and wait for it. The child logs to this process's handlers and
    ends when this process ends, however it ends (`genenv.runtime.processes.end_with_parent`), through an ordinary
    exit that stops the inference servers its sampler started; so a killed experiment leaves no run folder written
    to by an orphan and no server holding memory. ``target`` and ``args`` must pickle (a module-level function).

    Why: a long run's resident size grows past what it holds in use (the allocator keeps freed memory, and inference
    engines keep their device memory until their process ends); a process per arm-seed gives each arm-seed the
    memory the first one had.

    Raises:
        RuntimeError: the child ended with a non-zero exit code (its traceback is on stderr; a negative code is the
            signal that killed it, -9 for example from the kernel's out-of-memory killer). ``name`` names the work.
        KeyboardInterrupt: as usual; the child (which Ctrl-C reaches too) gets 10 s to clean up, then is stopped.
        SystemExit: this process was sent SIGTERM (`exit_on_sigterm`); the child is sent SIGTERM at once and ends
            through its own exit (its server stopped).
    """
    import multiprocessing

    proc = multiprocessing.get_context("spawn").Process(
        target=_child_main, args=(os.getpid(), _logging_spec(), logging.getLogger().level, target, args),
        name=name or getattr(target, "__name__", "child"))
    proc.start()
    try:
        proc.join()
    except KeyboardInterrupt:  # Ctrl-C reached the child too: it gets 10 s to clean up
        proc.join(10)
        raise
    finally:
        if proc.is_alive():  # ended here some other way (SIGTERM, `exit_on_sigterm`): the child ends through its exit
            proc.terminate()
            proc.join(30)
    if proc.exitcode != 0:
        raise RuntimeError(f"{name or 'the child process'} ended with exit code {proc.exitcode}"
                           + (" (killed by a signal)" if (proc.exitcode or 0) < 0 else ""))


def run_experiment(cfg, backend_factory=None) -> Path:
    """Run (or resume) every arm x seed of ``cfg`` (``configs/experiment.yaml``) in its experiment directory, seed
    by seed in the order of its arms; evaluate the untrained agent once (``baseline.json``); write the report
    after every arm. Returns the experiment directory.

    Each arm-seed runs in a fresh process (`in_fresh_process`), so memory one arm-seed leaves behind does not carry
    into the next; with ``backend_factory`` (tests that hand in an object, which cannot cross processes) they run in
    this one.

    Args:
        backend_factory: ``cfg -> Backend`` (tests); ``None`` builds the configured engine.
    Raises:
        ConfigError: see `experiment_settings`.
        ValueError: see `arm_run_config` and `finished`.
        RuntimeError: an arm-seed's process failed (see `in_fresh_process`); the same command resumes it.
    """
    from omegaconf import OmegaConf

    exp = experiment_settings(cfg)
    for arm in exp.arms:
        arm_file(arm)
    exp_dir = Path(exp.experiment_dir)
    exp_dir.mkdir(parents=True, exist_ok=True)
    (exp_dir / "experiment.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    baseline = exp_dir / "baseline.json" if exp.eval_every >= 1 else None
    for seed in exp.seeds:
        for arm in exp.arms:
            run_dir = arm_dir(exp_dir, arm_name(arm), seed)
            if finished(run_dir, exp.iterations):
                log.info("%s seed %s: finished, kept", arm, seed)
                continue
            run_cfg = arm_run_config(cfg, arm, seed, exp)
            log.info("%s seed %s: running in %s", arm, seed, run_dir)
            if backend_factory is None:
                in_fresh_process(run_arm_seed, run_cfg, run_dir, baseline, name=f"{arm_name(arm)} seed {seed}")
            else:
                run_arm_seed(run_cfg, run_dir, baseline, backend_factory)
                gc.collect()
            finish_arm(run_dir, exp.iterations, exp.keep_finished_checkpoints)
            write_report(exp_dir)
    return write_report(exp_dir)


def main() -> int:
    """Dispatch ``report EXPERIMENT [--out DIR] [--cache DIR]``, ``compare TREATMENT_ARM CONTROL_ARM [--plot FILE]
    [--cache DIR] [--mixed-code]``, ``factorial EXPERIMENT [--arms T F TL FL] [--partial] [--json FILE]``
    (`genenv.trainer.experiments.factorial.cli`), ``contrasts EXPERIMENT --contrast T-C ... [--partial] [--json FILE]``
    (`genenv.trainer.experiments.contrasts.cli`), ``archive EXPERIMENT [--out DIR] [--finished-only]``
    (`genenv.trainer.experiments.archive.cli`) or run Hydra's main with ``configs/experiment.yaml``.
    ``EXPERIMENT`` and the arms are folders or archive addresses, ``results/<experiment>.tar.xz[:<subfolder>]``,
    unpacked on demand after their checksum is verified
    (`experiment_folder`); an unreadable one exits with 2 and a message."""
    cache_help = "where archives are unpacked (default: <archive folder>/.unpacked)"
    if len(sys.argv) > 1 and sys.argv[1] == "factorial":
        from genenv.trainer.experiments import factorial

        return factorial.cli(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "contrasts":
        from genenv.trainer.experiments import contrasts

        return contrasts.cli(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "archive":
        return archive_cli(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "compare":
        import argparse

        from genenv.trainer.experiments import alignment, outcome
        from genenv.trainer.experiments.report import compare_arms, compare_outcome
        from genenv.trainer.experiments.stats import correct

        ap = argparse.ArgumentParser(prog="genenv-experiment compare",
                                     description="difficulty alignment and held-out outcome of two arm folders, "
                                                 "paired by seed")
        ap.add_argument("treatment", help="<experiment_dir>/<arm>, e.g. experiments/rwr/genenv, or an archived arm, "
                                          "e.g. results/twx_informative.tar.xz:genenv")
        ap.add_argument("control", help="<experiment_dir>/<arm>, e.g. experiments/grpo/genenv")
        ap.add_argument("--plot", type=Path, default=None, help="also draw the alignment plot to this file")
        ap.add_argument("--cache", type=Path, default=None, help=cache_help)
        ap.add_argument("--mixed-code", action="store_true",
                        help="compare runs made with different code (refused by default: their iteration 0 differs)")
        args = ap.parse_args(sys.argv[2:])
        try:
            args.treatment, args.control = (experiment_folder(a, args.cache) for a in (args.treatment, args.control))
        except (FileNotFoundError, ValueError) as e:
            print(f"genenv-experiment compare: {e}", file=sys.stderr)
            return 2
        try:
            aligned = compare_arms(args.treatment, args.control, args.mixed_code)
        except (ValueError, FileNotFoundError) as e:
            print(f"difficulty alignment: not compared ({e})")
            aligned = None
        try:
            helped = compare_outcome(args.treatment, args.control, args.mixed_code)
        except (ValueError, FileNotFoundError) as e:
            print(f"held-out outcome: not compared ({e})")
            helped = None
        correct(([aligned] if aligned else []) + (outcome.tests({"control": helped}) if helped else []))
        note = (aligned or helped or {}).get("code")
        if note:
            print(f"Runs' {note}.\n")
        if aligned:
            print("\n".join(alignment.markdown(aligned, *aligned["band"])))
            if args.plot:
                alignment.plot(aligned, *aligned["band"], args.plot)
        if helped:
            treated, control = helped["arms"]
            print(f"\n## Held-out outcome, {treated} vs {control}\n")
            print("\n".join(outcome.table({control: helped}, treated)))
        return 0 if aligned or helped else 1
    if len(sys.argv) > 1 and sys.argv[1] == "report":
        import argparse

        ap = argparse.ArgumentParser(prog="genenv-experiment report",
                                     description="write an experiment's report (summary.md, summary.json, curves.png, "
                                                 "alignment.png) from its runs")
        ap.add_argument("experiment", help="an experiment folder, or an archive of one: "
                                           "results/<experiment>.tar.xz[:<subfolder>]")
        ap.add_argument("--out", type=Path, default=None,
                        help="also copy the report into this folder, e.g. docs/curriculum/<experiment>")
        ap.add_argument("--cache", type=Path, default=None, help=cache_help)
        args = ap.parse_args(sys.argv[2:])
        try:
            exp = write_report(experiment_folder(args.experiment, args.cache))
        except (FileNotFoundError, ValueError) as e:
            print(f"genenv-experiment report: {e}", file=sys.stderr)
            return 2
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            for name in REPORT_FILES:
                if (exp / name).is_file():
                    shutil.copyfile(exp / name, args.out / name)
            exp = args.out
        print(exp / "summary.md")
        return 0
    from genenv.envs.extras import MissingExtra, require_extra
    from genenv.trainer.cli import TRAIN_MODULES, with_benchmark_configs

    try:
        require_extra("train", *TRAIN_MODULES, needed_by="genenv-experiment")
    except MissingExtra as exc:
        print(f"genenv-experiment: {exc}", file=sys.stderr)
        return 1
    import hydra

    from genenv.envs.registry import plugin_failures

    for line in plugin_failures():  # a benchmark package that failed to import: said before Hydra's "not found"
        print(f"genenv-experiment: {line}", file=sys.stderr)
    sys.argv[1:] = with_benchmark_configs(sys.argv[1:])

    @hydra.main(config_path="../../configs", config_name="experiment", version_base="1.3")
    def _run(cfg) -> None:
        from genenv.runtime.threads import prepare_cpu

        from genenv.trainer.settings import run_settings

        prepare_cpu(run_settings(cfg).engine.threads)  # before torch loads: the thread count, OpenMP's passive wait
        from genenv.runtime.processes import exit_on_sigterm

        exit_on_sigterm()  # `kill PID` ends the running arm-seed and its inference server too
        logging.basicConfig(level=logging.INFO)
        exp = run_experiment(cfg)
        print((exp / "summary.md").read_text())
        print(f"experiment dir: {exp}")

    _run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
