"""`genenv-experiment`: arms that differ only in the task source, a resumable experiment, its report; the static
augmentation written up front. The kill/resume test and the arm mechanics use a tiny random model (quality does
not matter); one end-to-end test runs the README's experiment command with the embedded model on real Bamboogle data."""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from genenv.trainer.cli import compose_config
from genenv.trainer.experiments import outcome
from genenv.trainer.experiments.run import arm_run_config
from genenv.trainer.experiments.settings import ARM_DIR
from genenv.trainer.experiments.report import (area_under, compare_arms, compare_outcome, finished_runs, read_rows,
                                               reach_static, run_auc, seed_curve, write_report)
from genenv.trainer.loop import CoEvolutionTrainer
from genenv.runtime.policies import Generation
from genenv.trainer.task_pool import TaskPool

REPORTS = Path(__file__).resolve().parents[1] / "docs" / "curriculum"  # the shipped reports
ARCHIVES = Path(__file__).resolve().parents[1] / "results"  # their runs (the shipped fixture unpacks them)


def _tiny(tiny_model_dir, exp, *extra):
    return [f"experiment_dir={exp}", "benchmark=bamboogle", "tensorboard=false", "threads=1",
            f"agent.policy.model={tiny_model_dir}", f"env_policy.policy.model={tiny_model_dir}",
            "generation.prompts_per_iteration=1", "generation.generations_per_prompt=2",
            "agent.batch_tasks=3", "agent.n=2", "agent.max_new_tokens=8",
            "eval.every=1", "eval.limit=3", "keep_checkpoints=5", *extra]


def _experiment(args, **kw):
    return subprocess.Popen([sys.executable, "-m", "genenv.trainer.experiments.run", *args], env={**os.environ},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def _rows(path):
    """Metric rows without wall-clock figures (which differ between any two runs)."""
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        out.append({k: v for k, v in row.items() if not k.startswith(("time/", "tokens_per_second/"))})
    return out


SERVING = '''"""A stand-in for an arm-seed that samples from a server: the shared sampler code starts a server process
(Python's http.server) in a temporary folder, writes "<server pid> <folder>" to a file, and waits."""
import sys
import time
from pathlib import Path

from genenv.runtime.samplers.server import ServerSampler


def serve(pid_file):
    sampler = ServerSampler(None, None)
    sampler._launch(lambda port: [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"], "/", 60,
                    "http.server")
    Path(pid_file).write_text(f"{sampler.proc.pid} {sampler.workdir}")
    time.sleep(600)
'''


def _started_server(proc, pid_file, timeout=120):
    """``(psutil.Process, folder)`` of the server a `SERVING` process started, once it has written ``pid_file``."""
    import psutil

    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None and not (pid_file.exists() and pid_file.read_text()):
        time.sleep(0.1)
    assert pid_file.exists() and pid_file.read_text(), "the server never started"
    pid, folder = pid_file.read_text().split()
    return psutil.Process(int(pid)), Path(folder)


def test_an_arm_seed_process_that_fails_is_named_and_one_whose_parent_dies_stops_its_server_and_dies(tmp_path):
    """`in_fresh_process`: a child's exit code comes back as an error naming the work; the child logs to the
    parent's handlers; a SIGKILLed parent (a killed experiment) takes its child with it, and the child first stops
    the server its sampler started and removes its folder, so no orphan keeps writing or holding memory; an
    experiment's process sent SIGTERM (`exit_on_sigterm`) exits with 143 and its child stops its server the same
    way."""
    import signal

    import psutil

    from genenv.trainer.experiments.run import in_fresh_process

    with pytest.raises(RuntimeError, match="static seed 3 ended with exit code 7"):
        in_fresh_process(os._exit, 7, name="static seed 3")
    (tmp_path / "serving.py").write_text(SERVING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    log_file, logged, pid_file = tmp_path / "run.log", tmp_path / "logged", tmp_path / "server.pid"
    code = ("import logging, serving; from genenv.trainer.experiments.run import in_fresh_process; "
            f"logging.basicConfig(filename={str(log_file)!r}, level=logging.INFO, format='%(levelname)s|%(message)s'); "
            f"in_fresh_process(logging.info, 'from the child'); open({str(logged)!r}, 'w').close(); "
            f"in_fresh_process(serving.serve, {str(pid_file)!r})")
    parent = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        server, folder = _started_server(parent, pid_file)
        assert logged.exists() and log_file.read_text().splitlines() == ["INFO|from the child"]
        child = [k for k in psutil.Process(parent.pid).children() if "spawn_main" in " ".join(k.cmdline())]
        assert len(child) == 1 and server.ppid() == child[0].pid and folder.is_dir()
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        gone, alive = psutil.wait_procs([child[0], server], timeout=60)
        assert not alive, f"outlived their killed parent: {alive}"
        assert not folder.exists()
        assert "WARNING|the experiment's process" in log_file.read_text()
    finally:
        if parent.poll() is None:
            parent.kill()
    # `kill PID` (SIGTERM) of an experiment's process, which genenv-experiment makes an ordinary exit
    pid_file.unlink()
    stopped = subprocess.Popen([sys.executable, "-c", "import serving; from genenv.runtime.processes import "
                                "exit_on_sigterm; from genenv.trainer.experiments.run import in_fresh_process; "
                                f"exit_on_sigterm(); in_fresh_process(serving.serve, {str(pid_file)!r})"], env=env)
    try:
        server, folder = _started_server(stopped, pid_file)
        child = psutil.Process(server.ppid())
        stopped.send_signal(signal.SIGTERM)
        assert stopped.wait(60) == 128 + signal.SIGTERM
        gone, alive = psutil.wait_procs([child, server], timeout=60)
        assert not alive and not folder.exists()
    finally:
        if stopped.poll() is None:
            stopped.kill()


class _UpperFormatter(logging.Formatter):
    """A custom formatter class, as a user's logging config may install."""

    def format(self, record):
        return super().format(record).upper()


def test_a_child_gets_the_parents_own_formatters_and_the_default_where_one_cannot_cross(tmp_path, caplog):
    """`_logging_spec` hands the child each handler's formatter object, a subclass included; one that does not pickle
    (a lambda in it) becomes ``None``, logging's default format, instead of failing the arm-seed's start, and the
    parent's log says which handler and why."""
    from genenv.trainer.experiments.run import _logging_spec

    custom, unpicklable = _UpperFormatter("%(message)s", "%H"), logging.Formatter("%(message)s")
    unpicklable.converter = lambda t: time.gmtime(t)
    root, handlers = logging.getLogger(), [logging.FileHandler(tmp_path / name) for name in ("a.log", "b.log")]
    handlers[0].setFormatter(custom)
    handlers[1].setFormatter(unpicklable)
    for h in handlers:
        root.addHandler(h)
    try:
        spec = dict(_logging_spec())
    finally:
        for h in handlers:
            root.removeHandler(h)
            h.close()
    assert spec[str(tmp_path / "a.log")] is custom and spec[str(tmp_path / "b.log")] is None
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and str(tmp_path / "b.log") in warned[0] and "default format" in warned[0]


def test_killed_experiment_finishes_with_the_pool_and_metrics_of_an_uninterrupted_one(tmp_path, tiny_model_dir,
                                                                                     kill_when):
    """An experiment killed mid-arm and re-run ends with the task pools, p̂ histories and metric rows of one that was
    never killed; re-run once finished, it runs nothing; lengthened after its checkpoints were removed, it refuses
    and loses nothing, and its report names the runs it does not count."""
    arms = "arms=[genenv,static_aug]"
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    assert _experiment(_tiny(tiny_model_dir, straight, "iterations=4", "seeds=[0]", arms)).wait(600) == 0

    proc = _experiment(_tiny(tiny_model_dir, killed, "iterations=4", "seeds=[0]", arms))
    latest = killed / "genenv" / "seed0" / "checkpoints" / "latest"
    kill_when(proc, latest.is_file)
    assert not (killed / "genenv" / "seed0" / "done.json").exists()  # killed mid-arm
    assert _experiment(_tiny(tiny_model_dir, killed, "iterations=4", "seeds=[0]", arms)).wait(600) == 0

    for arm in ("genenv", "static_aug"):
        a, b = straight / arm / "seed0", killed / arm / "seed0"
        assert TaskPool.load(a / "final_pool.jsonl").tasks == TaskPool.load(b / "final_pool.jsonl").tasks
        assert [e.p_hat_history for e in TaskPool.load(a / "final_pool.jsonl").entries.values()] == \
            [e.p_hat_history for e in TaskPool.load(b / "final_pool.jsonl").entries.values()]
        assert _rows(a / "metrics.jsonl") == _rows(b / "metrics.jsonl")
        assert [r["iteration"] for r in _rows(b / "metrics.jsonl")] == [0, 1, 2, 3]
        assert not (b / "checkpoints").exists()  # keep_finished_checkpoints=false
    summary = json.loads((killed / "summary.json").read_text())
    assert list(summary["arms"]) == ["genenv", "static_aug"]
    assert summary["arms"]["genenv"]["final"] == json.loads((straight / "summary.json").read_text()
                                                            )["arms"]["genenv"]["final"]
    # a finished experiment re-run is not run again
    before = (killed / "genenv" / "seed0" / "metrics.jsonl").read_text()
    assert _experiment(_tiny(tiny_model_dir, killed, "iterations=4", "seeds=[0]", arms)).wait(600) == 0
    assert (killed / "genenv" / "seed0" / "metrics.jsonl").read_text() == before
    # lengthened, it refuses to extend runs whose checkpoints were removed, and the report names the runs not counted
    longer = subprocess.run([sys.executable, "-m", "genenv.trainer.experiments.run",
                             *_tiny(tiny_model_dir, killed, "iterations=5", "seeds=[0]", arms)],
                            capture_output=True, text=True, env={**os.environ})
    assert longer.returncode != 0 and "finished 4 iterations and its checkpoints were removed" in longer.stderr
    assert (killed / "genenv" / "seed0" / "metrics.jsonl").read_text() == before
    write_report(killed)
    summary = json.loads((killed / "summary.json").read_text())
    assert summary["iterations"] == 5 and summary["arms"] == {}
    assert summary["short"] == {"genenv": {"0": 4}, "static_aug": {"0": 4}}
    assert ("Not counted, finished fewer than the experiment's 5 iterations (before it was lengthened): genenv seed 0 "
            "(4); static_aug seed 0 (4).") in (killed / "summary.md").read_text()


def test_arms_differ_only_in_their_strategies():
    """Each shipped arm file names a task source (and, where the arm is about it, an agent batch); the arms' run
    configs are otherwise equal; a frozen-agent experiment freezes every arm that names no batch of its own."""
    cfg = compose_config(["benchmark=bfcl", "experiment_dir=/x", "iterations=12"], "experiment")
    arms = sorted(p.stem for p in ARM_DIR.glob("*.yaml"))
    assert arms == ["envgen", "genenv", "genenv_n8", "genenv_released", "grounded", "oracle", "random_env",
                    "random_env_n8", "replay", "static", "static_aug"]
    configs = {arm: arm_run_config(cfg, arm, 1) for arm in arms if arm != "static_aug"}
    assert {arm: (c.task_source, c.agent_batch) for arm, c in configs.items()} == {
        "genenv": ("genenv", "uniform"), "random_env": ("random_env", "uniform"), "replay": ("random_env", "replay"),
        "envgen": ("envgen", "envgen"), "static": ("static", "uniform"), "genenv_released": ("genenv_released", "uniform"),
        "grounded": ("grounded", "uniform"), "oracle": ("oracle", "uniform"), "genenv_n8": ("genenv", "uniform"),
        "random_env_n8": ("random_env", "uniform")}
    for arm, c in configs.items():
        assert c.run_dir == f"/x/{arm}/seed1" and c.seed == 1 and c.iterations == 12
        assert c.agent == configs["static"].agent and c.eval == configs["static"].eval
        assert c.env_policy == configs["static"].env_policy and c.probe == configs["static"].probe
        n8 = {"rollouts_per_task": 8} if arm.endswith("_n8") else {}  # the n8 arms change that key and no other
        assert {**configs["static"].generation, **n8} == c.generation
    with pytest.raises(ValueError, match="finished genenv arm"):
        arm_run_config(cfg, "static_aug", 1)
    with pytest.raises(ValueError, match="unknown arm"):
        arm_run_config(cfg, "gemini", 0)
    frozen = compose_config(["experiment_dir=/x", "agent_batch=frozen", "eval.every=0"], "experiment")
    assert arm_run_config(frozen, "random_env", 0).agent_batch == "frozen"
    with pytest.raises(ValueError, match="freezes the agent"):
        arm_run_config(frozen, "replay", 0)


def test_paper_profile_composes_a_gpu_experiment():
    cfg = compose_config(["benchmark=bamboogle", "profile=paper", "iterations=1", "seeds=[0]",
                          "arms=[genenv,static]", "experiment_dir=/x"], "experiment")
    assert list(cfg.arms) == ["genenv", "static"] and list(cfg.seeds) == [0]
    for arm in cfg.arms:
        c = arm_run_config(cfg, arm, 0)
        assert c.device == "cuda" and c.curriculum.alpha == 0.5 and c.curriculum.k_min == 0.1
        assert c.agent.batch_tasks == 64 and c.eval.every == 3 and "arms" not in c
        # the same checks the trainer makes before it loads anything
        from genenv.trainer.settings import env_kwargs, response_budget
        assert response_budget(c) > 0 and "bamboogle" in env_kwargs(c)


def test_report_curve_area_and_data_efficiency():
    rows = [{"agent/tasks": 6}, {"agent/tasks": 6, "heldout/score": 0.3}, {"agent/tasks": 8},
            {"agent/tasks": 6, "heldout/score": 0.2}]
    xs, ys = seed_curve(rows, baseline=0.1)
    assert xs == [0.0, 12.0, 26.0] and ys == [0.1, 0.3, 0.2]
    assert area_under(xs, ys) == pytest.approx((12 * 0.2 + 14 * 0.25) / 26) == run_auc(rows, 0.1)
    assert run_auc(rows[:1], 0.1) == 0.1  # no evaluation: the untrained score
    arms = {"static": {"final": {"mean": 0.25}, "curve": {"tasks": [0, 12, 24], "mean": [0.1, 0.2, 0.25]}},
            "genenv": {"final": {"mean": 0.3}, "curve": {"tasks": [0, 12, 24], "mean": [0.1, 0.28, 0.3]}},
            "random_env": {"final": {"mean": 0.2}, "curve": {"tasks": [0, 12, 24], "mean": [0.1, 0.15, 0.2]}}}
    reach_static(arms, baseline=0.1)
    assert arms["genenv"]["tasks_to_static"] == 12 and arms["genenv"]["efficiency_vs_static"] == 2.0
    assert arms["static"]["efficiency_vs_static"] == 1.0 and arms["random_env"]["tasks_to_static"] is None
    reach_static(arms, baseline=0.3)  # static did not improve on the untrained agent: no ratio
    assert all(a["efficiency_vs_static"] is None for a in arms.values())


class _Scripted:
    """An environment policy that writes, per prompt, one valid Bamboogle task and one invalid text."""

    questions = [("Who directed the film Jaws?", "Steven Spielberg"),
                 ("Which element has the chemical symbol Fe?", "Iron"),
                 ("In which city was the composer Mozart born?", "Salzburg"),
                 ("Who painted the Mona Lisa?", "Leonardo da Vinci")]

    def __init__(self):
        self.calls = 0

    def generate(self, prompts, n, temperature, max_new_tokens):
        out = []
        for _ in prompts:
            q, a = self.questions[self.calls % len(self.questions)]
            self.calls += 1
            out.append([Generation(json.dumps({"question": q, "answer": a})), Generation("not a task")][:n])
        return out


def test_static_augmentation_writes_its_tasks_up_front(tmp_path, tiny_model_dir):
    cfg = compose_config([f"run_dir={tmp_path}/run", "benchmark=bamboogle", "iterations=1", "tensorboard=false",
                          "threads=1", f"agent.policy.model={tiny_model_dir}",
                          f"env_policy.policy.model={tiny_model_dir}", "task_source=static_aug",
                          "generation.upfront_tasks=3", "generation.upfront_max_rounds=5",
                          "generation.prompts_per_iteration=1", "generation.generations_per_prompt=2",
                          "agent.batch_tasks=2", "agent.n=2", "agent.max_new_tokens=6"])
    trainer = CoEvolutionTrainer(cfg)
    scripted, policy = _Scripted(), trainer.backend.policy
    trainer.backend.policy = lambda role: scripted if role == "env_policy" else policy(role)
    row = trainer.run()[0]
    assert row["pool/generated"] == 3 and row["gen/generated"] == 0  # written once, none during the run
    assert trainer.counters["upfront/admitted"] == 3 and trainer.counters["upfront/rounds"] == 3
    assert trainer.counters["upfront/generated"] == 6
    gens = [json.loads(x) for x in (tmp_path / "run" / "generations.jsonl").read_text().splitlines()]
    assert [g["iteration"] for g in gens] == [-1, -1, -2, -2, -3, -3] and all(g["upfront"] for g in gens)
    assert sum(g["kept"] for g in gens) == 3 and {g["rejection"] for g in gens if not g["admitted"]} == {"no_json"}


def test_unlimited_rounds_are_bounded(tmp_path, tiny_model_dir):
    cfg = compose_config([f"run_dir={tmp_path}/run", "benchmark=bamboogle", "iterations=1", "tensorboard=false",
                          "threads=1", f"agent.policy.model={tiny_model_dir}",
                          f"env_policy.policy.model={tiny_model_dir}", "task_source=static_aug",
                          "generation.upfront_tasks=50", "generation.upfront_max_rounds=2",
                          "generation.prompts_per_iteration=1", "generation.generations_per_prompt=2"])
    trainer = CoEvolutionTrainer(cfg)
    scripted, policy = _Scripted(), trainer.backend.policy
    trainer.backend.policy = lambda role: scripted if role == "env_policy" else policy(role)
    trainer.seed_pool()
    assert trainer.counters["upfront/rounds"] == 2 and trainer.counters["upfront/admitted"] == 2


def test_genenv_and_static_arms_on_bamboogle_with_the_embedded_model(tmp_path, smollm2_dir):
    exp = tmp_path / "exp"
    out = subprocess.run([sys.executable, "-m", "genenv.trainer.experiments.run", "benchmark=bamboogle", "iterations=1",
                          "seeds=[0]", "arms=[genenv,static]", f"experiment_dir={exp}", "tensorboard=false",
                          "eval.limit=5", "agent.max_new_tokens=32"],
                         capture_output=True, text=True, env={**os.environ}, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads((exp / "summary.json").read_text())
    assert list(summary["arms"]) == ["genenv", "static"] and summary["eval"]["n"] == 5
    for arm in ("genenv", "static"):
        a = summary["arms"][arm]
        assert a["seeds"] == [0] and a["tasks_consumed"]["mean"] >= 6 and 0.0 <= a["final"]["mean"] <= 1.0
        assert len(a["curve"]["tasks"]) == 2  # the untrained agent and after iteration 1
    assert summary["arms"]["genenv"]["generated"] == 8 and summary["arms"]["static"]["generated"] == 0
    md = (exp / "summary.md").read_text()
    assert "| genenv | 1 |" in md and "| static | 1 |" in md and (exp / "curves.png").stat().st_size > 10_000


def _rebuilt_shipped_run(name, shipped):
    """Write the report of the shipped runs ``name`` (unpacked from ``results/``, the ``shipped`` fixture) and check
    its ``summary.json`` and ``summary.md`` are byte for byte the shipped ones in ``docs/curriculum/<name>``; returns
    ``(unpacked folder, summary dict)``."""
    exp = shipped(name)
    write_report(exp)
    for report in ("summary.json", "summary.md"):
        assert (exp / report).read_bytes() == (REPORTS / name / report).read_bytes(), \
            f"{name}/{report} rebuilt differently"
    return exp, json.loads((exp / "summary.json").read_text())


def _env_updates(exp, seeds):
    """Iterations at which the genenv arm's environment policy was updated, per seed."""
    return {seed: [r["iteration"] for r in read_rows(exp / f"genenv/seed{seed}/metrics.jsonl")
                   if not r["env_policy_update/skipped"]] for seed in seeds}


def _generations_part_after(exp, seed, iteration):
    """True when genenv and random_env of ``seed`` wrote the same generations up to and including ``iteration``
    and different ones in the next iteration (rows split by their own ``iteration`` field)."""
    rows = {arm: read_rows(exp / f"{arm}/seed{seed}/generations.jsonl") for arm in ("genenv", "random_env")}
    upto = {arm: [r for r in rs if r["iteration"] <= iteration] for arm, rs in rows.items()}
    nxt = {arm: [r for r in rs if r["iteration"] == iteration + 1] for arm, rs in rows.items()}
    return bool(upto["genenv"]) and upto["genenv"] == upto["random_env"] and nxt["genenv"] != nxt["random_env"]


def test_the_shipped_bfcl_run_reports_what_the_results_page_says(shipped):
    """``docs/curriculum/bfcl`` (docs/results.md, BFCL, 2 seeds): its report is rebuilt from its metrics;
    genenv equals random_env in seed 0 (the environment policy's only update came at the last iteration) and
    their generations part after seed 1's only update (iteration 8)."""
    exp, ours = _rebuilt_shipped_run("bfcl", shipped)
    arms = ours["arms"]
    assert round(100 * arms["static_aug"]["final"]["mean"], 1) == 15.6
    assert round(100 * arms["static"]["final"]["mean"], 1) == 13.8
    assert (exp / "genenv/seed0/generations.jsonl").read_bytes() == \
        (exp / "random_env/seed0/generations.jsonl").read_bytes()
    assert _env_updates(exp, (0, 1)) == {0: [11], 1: [8]}
    assert _generations_part_after(exp, seed=1, iteration=8)


def test_the_shipped_twx_run_reports_what_the_results_page_says(shipped):
    """``docs/curriculum/twx`` (docs/results.md, TextWorldExpress, 2 seeds): its report is rebuilt from its
    metrics; every arm reaches 100 % held-out, and only the genenv/random_env trajectory of seed 0 (identical until
    the environment policy's only update at iteration 10) falls back to the untrained 50 % from iteration 8; in
    seed 1 the environment policy was updated from iteration 0, so the two arms part at iteration 1."""
    exp, ours = _rebuilt_shipped_run("twx", shipped)
    arms = ours["arms"]
    assert ours["baseline"] == 0.5 and ours["eval"]["n"] == 40
    for arm, final in {"genenv": 75.0, "random_env": 75.0, "envgen": 100.0, "static": 100.0,
                       "static_aug": 100.0}.items():
        assert round(100 * arms[arm]["final"]["mean"], 1) == final and arms[arm]["best"]["mean"] == 1.0
    heldout = {arm: [r["heldout/score"] for r in read_rows(exp / f"{arm}/seed0/metrics.jsonl")]
               for arm in ("genenv", "random_env")}
    assert heldout["genenv"] == heldout["random_env"]
    assert max(heldout["genenv"][:8]) == 1.0 and heldout["genenv"][8:] == [0.5] * 4
    assert _env_updates(exp, (0, 1)) == {0: [10], 1: [0, 2, 3, 9, 10]}
    assert _generations_part_after(exp, seed=0, iteration=10)
    assert _generations_part_after(exp, seed=1, iteration=0)


def test_the_shipped_twx_env_policy_run_reports_what_the_results_page_says(shipped):
    """``docs/curriculum/twx_env_policy`` (docs/results.md, "Does the environment policy learn?"): agent frozen, genenv
    against random_env paired by seed; its report is rebuilt from its metrics; the agent never moved; iteration 0 is
    the same in both arms; the results page's alignment figures; genenv learned to write two-step games."""
    exp, ours = _rebuilt_shipped_run("twx_env_policy", shipped)
    stat = ours["alignment"]
    seeds = [0, 1, 2, 3]
    assert ours["agent_frozen"] is True and stat["arms"]["genenv"]["seeds"] == seeds and stat["n_cells"] == 36
    for arm in ("genenv", "random_env"):
        for seed in seeds:
            assert all(r["weights/agent_delta"] == 0.0 for r in read_rows(exp / f"{arm}/seed{seed}/metrics.jsonl"))
    assert all(_generations_part_after(exp, seed=s, iteration=0) for s in seeds)
    g, r = stat["arms"]["genenv"], stat["arms"]["random_env"]
    assert (g["in_band"], g["generated"], g["admitted"]) == (70, 640, 276)
    assert (r["in_band"], r["generated"], r["admitted"]) == (37, 640, 155)
    d = stat["difference"]
    assert [round(100 * d[k], 1) for k in ("mean", "low", "high")] == [5.7, -2.3, 13.7]  # over the 4 seeds
    assert stat["p_value"] == 0.25 and stat["n_seeds"] == 4 and round(100 * stat["cell_mean"], 1) == 5.7
    assert round(ours["arms"]["genenv"]["seconds_per_iteration"]["task_generation"], 1) == 16.4

    def two_step_share(arm, first, last):
        texts = [row["text"] for s in seeds for row in read_rows(exp / f"{arm}/seed{s}/generations.jsonl")
                 if first <= row["iteration"] <= last]
        return sum('"steps": 2,' in t for t in texts), len(texts)

    assert two_step_share("genenv", 0, 4) == (128, 320) and two_step_share("genenv", 5, 9) == (155, 320)
    assert two_step_share("random_env", 0, 4) == (89, 320) and two_step_share("random_env", 5, 9) == (86, 320)


def test_the_shipped_bamboogle_env_policy_run_reports_what_the_results_page_says(shipped):
    """``docs/curriculum/bamboogle_env_policy`` (docs/results.md, "Does the environment policy learn?", Bamboogle):
    agent frozen, genenv against random_env on 4 paired seeds; the report rebuilds from the run folders; iteration
    0 is the same in both arms; the page's alignment figures; genenv stopped writing truncated JSON."""
    exp, ours = _rebuilt_shipped_run("bamboogle_env_policy", shipped)
    stat = ours["alignment"]
    seeds = [0, 1, 2, 3]
    assert ours["agent_frozen"] is True and stat["arms"]["genenv"]["seeds"] == seeds and stat["n_cells"] == 36
    assert all(_generations_part_after(exp, seed=s, iteration=0) for s in seeds)
    g, r = stat["arms"]["genenv"], stat["arms"]["random_env"]
    assert (g["in_band"], g["generated"], g["admitted"]) == (92, 640, 399)
    assert (r["in_band"], r["generated"], r["admitted"]) == (79, 640, 262)
    d = stat["difference"]
    assert [round(100 * d[k], 1) for k in ("mean", "low", "high")] == [2.3, -3.0, 7.5]  # over the 4 seeds
    assert stat["p_value"] == 0.375 and stat["n_seeds"] == 4

    def truncated(arm, first, last):
        return sum(row["rejection"] == "invalid_json" for s in seeds
                   for row in read_rows(exp / f"{arm}/seed{s}/generations.jsonl") if first <= row["iteration"] <= last)

    assert (truncated("genenv", 0, 4), truncated("genenv", 5, 9)) == (52, 12)
    assert (truncated("random_env", 0, 4), truncated("random_env", 5, 9)) == (93, 84)


def _compared(shipped, treatment, control):
    """``(seeds, mean difference in points to 0.1, p over seeds to 4 places)`` of two shipped arm folders."""
    stat = compare_arms(shipped(treatment), shipped(control))
    p = stat["p_value"]
    return stat["n_seeds"], round(100 * stat["difference"]["mean"], 1), None if p is None else round(p, 4)


def test_the_shipped_rwr_run_reports_what_the_results_page_says(shipped):
    """``docs/curriculum/twx_env_policy_rwr`` (docs/results.md, "The paper's RWR update against GRPO"): the report
    rebuilds; the rwr arm trained on a handful of in-band generations against GRPO's every generation; this
    experiment's two arms wrote the same generations through iteration 1; the page's paired figures against the
    grpo experiment's arms."""
    exp, ours = _rebuilt_shipped_run("twx_env_policy_rwr", shipped)
    rwr = finished_runs(exp / "genenv")
    assert sorted(rwr) == [0, 1, 2, 3]
    assert [sum(r.get("env_policy_update/samples", 0) for r in rows) for rows in rwr.values()] == [7, 7, 6, 8]
    assert all(sum(r.get("env_policy_update/samples", 0) for r in rows) >= 144
               for rows in finished_runs(shipped("twx_env_policy/genenv")).values())
    assert _generations_part_after(exp, seed=0, iteration=1)  # the same generations (the sitting resumed at 2)
    assert _compared(shipped, "twx_env_policy_rwr/genenv", "twx_env_policy/genenv") == (4, -7.3, 0.125)
    assert _compared(shipped, "twx_env_policy_rwr/genenv", "twx_env_policy/random_env") == (4, -1.6, 0.625)
    assert _compared(shipped, "twx_env_policy_rwr/genenv", "twx_env_policy_rwr/random_env") == (1, -2.1, None)
    assert _compared(shipped, "twx_env_policy_rwr/random_env", "twx_env_policy/random_env") == (1, 3.5, None)


def test_the_shipped_bamboogle_lever_runs_give_the_results_page_figures(shipped):
    """``docs/curriculum/bamboogle_levers`` (docs/results.md, "Bamboogle: each lever alone"): every folder's report
    rebuilds; each lever put back alone against the full setting and its random_env gives the page's figures."""
    for name in ("full", "rwr", "lr1e-5", "beta2", "g4"):
        _rebuilt_shipped_run(f"bamboogle_levers/{name}", shipped)
    assert _compared(shipped, "bamboogle_levers/full/genenv", "bamboogle_levers/full/random_env") == (2, 7.5, 0.5)
    levers = {"rwr": ((2, -5.6, 0.5), (2, 1.9, 1.0)), "lr1e-5": ((2, -4.4, 0.5), (2, 3.1, 1.0)),
              "beta2": ((2, -1.9, 0.5), (2, 5.6, 0.5)), "g4": ((2, -9.4, 0.5), (2, -1.9, 1.0))}
    for lever, (vs_full, vs_random) in levers.items():
        assert _compared(shipped, f"bamboogle_levers/{lever}/genenv", "bamboogle_levers/full/genenv") == vs_full
        assert _compared(shipped, f"bamboogle_levers/{lever}/genenv", "bamboogle_levers/full/random_env") == vs_random


def test_the_shipped_twx_outcome_run_reports_what_the_results_page_says(shipped):
    """``docs/curriculum/twx_outcome`` (docs/results.md, "Does the trained environment policy help a learning
    agent?"): the agent trained on 4-room Coin Collector games, genenv against random_env and static on 4 paired
    seeds; the report rebuilds from the run folders; the agent's weights moved in every run; every held-out
    evaluation logged its 20 games; the results page's outcome figures (no gain for genenv)."""
    exp, ours = _rebuilt_shipped_run("twx_outcome", shipped)
    seeds = [0, 1, 2, 3]
    assert ours["agent_frozen"] is False and ours["baseline"] == 0.2 and ours["eval"]["n"] == 20
    for arm in ("genenv", "random_env", "static"):
        assert ours["arms"][arm]["seeds"] == seeds
        for seed in seeds:
            rows = read_rows(exp / f"{arm}/seed{seed}/metrics.jsonl")
            assert [r["iteration"] for r in rows if "heldout/score" in r] == [1, 3, 5]
            assert max(r["weights/agent_delta"] for r in rows) > 0
            heldout = read_rows(exp / f"{arm}/seed{seed}/heldout.jsonl")
            assert len(heldout) == 60 and {r["iteration"] for r in heldout} == {1, 3, 5}
            final = [r for r in heldout if r["iteration"] == 5]
            assert sum(r["success"] for r in final) / 20 == pytest.approx(rows[-1]["heldout/score"])
    finals = {arm: round(100 * ours["arms"][arm]["final"]["mean"], 1) for arm in ("genenv", "random_env", "static")}
    assert finals == {"genenv": 23.8, "random_env": 27.5, "static": 35.0}
    vs_random, vs_static = ours["outcome"]["random_env"], ours["outcome"]["static"]
    assert vs_random["n_cells"] == vs_static["n_cells"] == 12
    assert [round(100 * vs_random["auc"]["difference"][k], 1) for k in ("mean", "low", "high")] == [-1.5, -6.8, 3.9]
    assert [round(100 * vs_static["auc"]["difference"][k], 1) for k in ("mean", "low", "high")] == [-7.7, -26.4, 11.0]
    assert vs_random["auc"]["p_value"] == vs_static["auc"]["p_value"] == 0.5  # over the 4 seeds
    assert round(100 * vs_static["cell_mean"], 1) == -9.6 and all(t["p_holm"] == 1.0 for t in outcome.tests(ours["outcome"]))
    assert ours["alignment"]["arms"]["genenv"]["p_hat_histogram"][0] == 47  # of 61 admitted: p̂ 0, too hard


def test_the_shipped_informative_batch_run_rebuilds_and_its_batches_hold(shipped):
    """``docs/curriculum/twx_informative`` (docs/results.md, "Informative batches and curated replay"): the finished
    arm-seeds rebuild their report; every iteration stayed within the 48-rollout cap, trained at most 4 groups,
    every one of them informative, and counted every group once; each held-out evaluation logged its 20 games
    after iterations 2, 4, 6, 8 and 10; the page's genenv − control statistic (AUC and final score per control: mean
    difference, 95 % interval and p over the 6 seeds) is the rebuilt report's."""
    exp, ours = _rebuilt_shipped_run("twx_informative", shipped)
    assert ours["arms"] and all("batches" in a for a in ours["arms"].values())
    for arm, summary in ours["arms"].items():
        for seed in summary["seeds"]:
            rows = read_rows(exp / f"{arm}/seed{seed}/metrics.jsonl")
            assert [r["iteration"] for r in rows] == list(range(10))
            for r in rows:
                assert r["agent/rollouts"] <= 48 and r["agent/rollouts"] == 4 * r["agent/tasks"]
                assert r["agent/groups_trained"] <= 4 and r["agent/groups_trained"] <= r["agent/groups_informative"]
                groups = r["agent/groups_informative"] + r["agent/groups_dropped/seed"] + r["agent/groups_dropped/generated"]
                assert groups == r["agent/tasks"]
                assert r["agent/groups_surplus"] == r["agent/groups_informative"] - r["agent/groups_trained"]
                assert r["agent/groups_trained"] == 4 or r["agent/rollouts"] > 44  # short only when the cap stopped it
            heldout = read_rows(exp / f"{arm}/seed{seed}/heldout.jsonl")
            assert [r["iteration"] for r in rows if "heldout/score" in r] == [1, 3, 5, 7, 9]
            assert len(heldout) == 100
            row = summary["per_seed"][str(seed)]
            assert row["heldout"] == [r["heldout/score"] for r in rows if "heldout/score" in r]
            assert row["groups_dropped"] == {o: sum(r[f"agent/groups_dropped/{o}"] for r in rows)
                                             for o in ("seed", "generated")}
    md = (exp / "summary.md").read_text()
    assert "Agent batches" in md
    section = (REPORTS.parent / "results.md").read_text().split("**The result, all 6 seeds fixed")[1].split("\n\n")
    result = {x.split(" | ")[0][2:]: x.replace("−", "-").split(" | ") for x in section[1].splitlines()[2:]}
    rows = md.split("| genenv vs |")[1].split("\n\n")[0].splitlines()[2:]
    assert sorted(x.split(" | ")[0][2:] for x in rows) == ["random_env", "replay", "static"]
    for row in rows:  # the page's statistic per control is the report's, over the 6 seeds
        cols = row[2:].split(" | ")
        control, seeds = cols[:2]
        assert seeds == "6"
        for page, mean, p in ((result[control][6], cols[3], cols[4]), (result[control][7], cols[7], cols[8])):
            interval, page_p = page.rsplit(", ", 1)
            assert interval == mean and abs(float(page_p) - float(p)) < 0.006, (control, page, mean, p)


def test_each_shipped_lever_run_changes_one_setting_and_pairs_with_the_powered_run(shipped):
    """``docs/curriculum/twx_levers/<lever>`` (docs/results.md, "Settings changed one at a time"): each lever's
    experiment differs from the powered run's in one training setting (its arms, seeds and folders apart); each
    finished seed ran 10 iterations with the same 5 held-out evaluations; ``compare_outcome`` pairs it with the
    powered run's ``genenv`` by seed, 5 cells a seed, and the page quotes that mean difference and interval. A
    warm start (the environment policy's model changed) ships the run it started from in ``source/``: a finished
    frozen-agent ``genenv`` run of 10 iterations whose report rebuilds."""
    import pandas as pd
    from omegaconf import OmegaConf

    def flat(folder: Path) -> dict:  # {"a.b.c": value} of an experiment's resolved config
        return pd.json_normalize(OmegaConf.to_container(OmegaConf.load(folder / "experiment.yaml"))).iloc[0].to_dict()

    powered = shipped("twx_informative")
    base = flat(powered)
    page = " ".join((REPORTS.parent / "results.md").read_text().replace("−", "-").split())
    levers = sorted(shipped("twx_levers").iterdir())
    assert levers
    for lever in levers:
        cfg = flat(lever)
        changed = {k for k in base.keys() | cfg.keys() if base.get(k) != cfg.get(k)}
        assert len(changed - {"run_dir", "experiment_dir", "arms", "seeds"}) == 1, changed
        if "env_policy.policy.model" in changed:
            assert Path(cfg["env_policy.policy.model"]).parts[-2:] == ("genenv", "seed0")
            _, source = _rebuilt_shipped_run(f"twx_levers/{lever.name}/source", shipped)
            assert source["agent_frozen"] and source["seeds"] == [0] and list(source["arms"]) == ["genenv"]
            assert [r["iteration"] for r in finished_runs(lever / "source/genenv")[0]] == list(range(10))
        runs = finished_runs(lever / "genenv")
        seeds = list(runs)
        assert seeds
        for seed, rows in runs.items():
            assert [r["iteration"] for r in rows] == list(range(10))
            assert [r["iteration"] for r in rows if "heldout/score" in r] == [1, 3, 5, 7, 9]
        stat = compare_outcome(lever / "genenv", powered / "genenv")
        assert stat["seeds"] == seeds and stat["n_cells"] == 5 * len(seeds)
        d = stat["auc"]["difference"]  # the page's lever table: AUC over seeds
        assert f"{100 * d['mean']:+.1f} [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}]" in page


def test_compare_gives_the_held_out_outcome_of_arm_folders_of_two_experiments(tmp_path, shipped):
    """``genenv-experiment compare`` on arms with held-out evaluations: within one experiment it gives the report's
    outcome figures; an arm copied into another experiment folder (a run with one setting changed) pairs with the
    main run's arms by seed; experiments whose held-out scores measure different things, or without the untrained
    agent's score, are refused; a frozen-agent experiment gets the alignment and a line saying why no outcome."""
    main = shipped("twx_informative")
    report = json.loads((REPORTS / "twx_informative/summary.json").read_text())
    for control in ("random_env", "replay", "static"):
        stat = json.loads(json.dumps(compare_outcome(main / "genenv", main / control)))
        assert stat["arms"] == ["twx_informative/genenv", f"twx_informative/{control}"]
        for key in ("cells", "n_cells", "cell_mean", "icc", "per_seed"):
            assert stat[key] == report["outcome"][control][key], (control, key)
        for key in ("final", "auc"):  # the report's tests also carry their Holm correction
            ours = {k: v for k, v in report["outcome"][control][key].items() if k not in ("p_holm", "family")}
            assert stat[key] == ours, (control, key)
    lever = tmp_path / "lever"
    shutil.copytree(main / "genenv/seed0", lever / "genenv/seed0")
    for name in ("experiment.yaml", "baseline.json"):
        shutil.copyfile(main / name, lever / name)
    stat = compare_outcome(lever / "genenv", main / "replay")
    assert stat["arms"] == ["lever/genenv", "twx_informative/replay"] and stat["seeds"] == [0]
    assert [list(c) for c in stat["cells"]] == [c for c in report["outcome"]["replay"]["cells"] if c[0] == 0]
    assert stat["auc"]["per_seed"][0] == pytest.approx(report["outcome"]["replay"]["auc"]["per_seed"]["0"])
    out = subprocess.run([sys.executable, "-m", "genenv.trainer.experiments.run", "compare", str(lever / "genenv"),
                          str(main / "replay")], capture_output=True, text=True, check=True).stdout
    assert "difficulty alignment, lever/genenv vs twx_informative/replay" in out
    assert "## Held-out outcome, lever/genenv vs twx_informative/replay" in out and "| lever/genenv vs |" in out
    base = json.loads((main / "baseline.json").read_text())
    (lever / "baseline.json").write_text(json.dumps({**base, "heldout/score": base["heldout/score"] + 0.1}))
    shifted = compare_outcome(lever / "genenv", main / "replay")  # its own untrained score starts its curve
    assert shifted["final"] == stat["final"] and shifted["auc"]["per_seed"][0] > stat["auc"]["per_seed"][0]
    (lever / "baseline.json").unlink()
    with pytest.raises(FileNotFoundError, match="baseline.json"):
        compare_outcome(lever / "genenv", main / "replay")
    shutil.copyfile(main / "baseline.json", lever / "baseline.json")
    (lever / "experiment.yaml").write_text((main / "experiment.yaml").read_text().replace("limit: 20", "limit: 10"))
    with pytest.raises(ValueError, match="different held-out settings .*eval.limit"):
        compare_outcome(lever / "genenv", main / "replay")
    with pytest.raises(ValueError, match="different held-out settings"):
        compare_outcome(shipped("twx_env_policy/genenv"), main / "genenv")
    out = subprocess.run([sys.executable, "-m", "genenv.trainer.experiments.run", "compare",  # archived arms
                          f"{ARCHIVES}/twx_env_policy.tar.xz:genenv", f"{ARCHIVES}/twx_env_policy.tar.xz:random_env",
                          "--cache", str(tmp_path / "cache")], capture_output=True, text=True, check=True).stdout
    assert "difficulty alignment, twx_env_policy/genenv vs twx_env_policy/random_env" in out
    assert "held-out outcome: not compared" in out


def test_the_shipped_confirmatory_run_is_complete_and_its_factorial_rebuilds(shipped):
    """The confirmatory run (``results/twx_confirmatory.tar.xz``, pre-registered in ``docs/results.md``): every planned
    seed, 0-11, finished in all four arms at one commit, so ``genenv-experiment factorial`` computes without a
    partial look; its report is byte for byte the shipped ``docs/curriculum/twx_confirmatory/factorial.md``; the
    iteration-0 check names seeds 3 and 9, whose written default Coin Collector game split the rollouts."""
    from genenv.trainer.experiments import factorial

    result = factorial.analyse(shipped("twx_confirmatory"))
    assert result["complete"] and sorted(result["seeds"]) == list(range(12))
    assert "\n".join(factorial.markdown(result)) + "\n" == (REPORTS / "twx_confirmatory/factorial.md").read_text()
    assert "split genenv | random_env | genenv_n8 | random_env_n8 at seeds 3, 9" in result["code"]
    assert all(len(result["auc"][arm]) == 12 for arm in factorial.DEFAULT_ARMS)


def test_factorial_crosses_a_lever_with_the_writer_by_seed_and_waits_for_every_planned_seed(tmp_path, shipped):
    """``genenv-experiment factorial`` on the shipped powered run, its four arms standing in for a 2x2 design
    (trained = genenv, frozen = random_env, "lever" on = replay, static): each contrast's per-seed AUC difference is
    the one the shipped report gives, the writer-off contrast is ``compare_outcome``'s test, the three p-values are
    Holm-corrected together, and the writer's share is the difference of the two lever contrasts seed by seed. With
    a planned seed unfinished it refuses (the stop rule) unless asked for a partial look."""
    from genenv.trainer.experiments import factorial
    from genenv.trainer.experiments.stats import holm

    main = shipped("twx_informative")
    arms = ("genenv", "random_env", "replay", "static")
    report = json.loads((REPORTS / "twx_informative/summary.json").read_text())
    d = {c: {int(s): v for s, v in report["outcome"][c]["auc"]["per_seed"].items()}
         for c in ("random_env", "replay", "static")}  # genenv − control, per seed
    result = factorial.analyse(main, arms)
    assert result["complete"] and result["seeds"] == sorted(d["random_env"]) and len(result["seeds"]) == 6
    expected = {"lever, writer trained": {s: -v for s, v in d["replay"].items()},
                "lever, writer frozen": {s: d["random_env"][s] - d["static"][s] for s in d["static"]},
                "writer, lever off": d["random_env"]}
    for name, per_seed in expected.items():
        assert result["tests"][name]["per_seed"] == pytest.approx(per_seed), name
        assert result["tests"][name]["family"] == 3
    writer = compare_outcome(main / "genenv", main / "random_env")["auc"]
    assert {k: v for k, v in result["tests"]["writer, lever off"].items() if k not in ("p_holm", "family")} == writer
    ps = [result["tests"][n]["p_value"] for n in factorial.CONTRASTS]
    assert [result["tests"][n]["p_holm"] for n in factorial.CONTRASTS] == holm(ps)
    assert result["writer_share"]["per_seed"] == pytest.approx(
        {s: -d["replay"][s] - d["random_env"][s] + d["static"][s] for s in result["seeds"]})
    share = list(result["writer_share"]["per_seed"].values())
    assert result["writer_share"]["difference"]["mean"] == pytest.approx(sum(share) / len(share))
    assert all(c["n_cells"] == 5 * 6 for c in result["cells"].values())  # 5 evaluations a seed
    assert "the same at seeds" in result["code"] or "split" in result["code"]
    assert "host: " in result["code"] and "different hosts" not in result["code"]
    assert factorial.final_bins([{"iteration": 4, "heldout/score": 0.5, "heldout/twx/coin/graded/steps=2": 1.0},
                                 {"iteration": 5}]) == {"heldout/twx/coin/graded/steps=2": 1.0}

    partial = tmp_path / "twx_informative"
    shutil.copytree(main, partial)
    (partial / "static/seed5/done.json").unlink()
    with pytest.raises(ValueError, match="planned seeds not finished .*static.*5"):
        factorial.analyse(partial, arms)
    look = factorial.analyse(partial, arms, partial=True)
    assert not look["complete"] and look["missing"] == {"static": [5]} and 5 not in look["seeds"]
    with pytest.raises(ValueError, match="four distinct arms"):
        factorial.analyse(main, arms[:3])
    cmd = [sys.executable, "-m", "genenv.trainer.experiments.run", "factorial"]
    out = subprocess.run([*cmd, str(main), "--arms", *arms, "--json", str(tmp_path / "f.json")],
                         capture_output=True, text=True, check=True).stdout
    assert "### Tested: AUC per seed" in out and "| writer, lever off | `genenv` − `random_env` |" in out
    assert json.loads((tmp_path / "f.json").read_text())["seeds"] == result["seeds"]
    refused = subprocess.run([*cmd, str(main)], capture_output=True, text=True)  # no genenv_n8 arm there
    assert refused.returncode == 2 and "ran no arm" in refused.stderr


def test_contrasts_test_named_arm_pairs_by_seed_with_holm_and_keep_the_stop_rule(tmp_path, shipped):
    """``genenv-experiment contrasts`` on the shipped powered run: each contrast's per-seed AUC difference is
    ``compare_outcome``'s, the p-values are Holm-corrected over the named contrasts only, a malformed contrast or an
    arm the experiment did not run exits 2, and an unfinished planned seed is refused (the stop rule)."""
    from genenv.trainer.experiments import contrasts
    from genenv.trainer.experiments.stats import holm

    main = shipped("twx_informative")
    named = {"genenv - static": ("genenv", "static"), "replay - static": ("replay", "static")}
    result = contrasts.analyse(main, named)
    assert result["complete"] and result["arms"] == ["genenv", "static", "replay"] and len(result["seeds"]) == 6
    for name, (t, c) in named.items():
        expected = compare_outcome(main / t, main / c)["auc"]
        assert {k: v for k, v in result["tests"][name].items() if k not in ("p_holm", "family")} == expected
        assert result["tests"][name]["family"] == 2
    assert [result["tests"][n]["p_holm"] for n in named] == holm([result["tests"][n]["p_value"] for n in named])
    assert contrasts.parse_contrast("genenv_n8-random_env") == ("genenv_n8", "random_env")

    # what each arm's source gave its pool, from the runs' own counters and metric rows
    for arm in result["arms"]:
        for seed in result["seeds"]:
            counters = json.loads((main / arm / f"seed{seed}/final_state.json").read_text())["counters"]
            rows = [json.loads(line) for line in (main / arm / f"seed{seed}/metrics.jsonl").read_text().splitlines()]
            src = result["sources"][arm]
            assert src["admitted"][seed] == counters.get("admitted", 0)
            assert src["generated"][seed] == counters.get("generated", 0)
            assert src["in_band"][seed] == sum(r.get("gen/in_band", 0) for r in rows)
    assert not any(result["sources"]["static"]["generated"].values()) and result["sources"]["genenv"]["levels"] == {}
    assert all(n == 80 for n in result["sources"]["genenv"]["generated"].values())  # 8 texts x 10 iterations
    # a bound arm: its contrast decides whether the shares are given; here genenv − static is not shown
    bounded = contrasts.analyse(main, named, bound="genenv")
    auc, bound_test = bounded["auc"], bounded["tests"]["genenv - static"]
    assert not (bound_test["difference"]["mean"] > 0 and bound_test["p_holm"] < 0.05)
    assert bounded["bound"] == {"arm": "genenv", "control": "static", "contrast": "genenv - static", "shown": False}
    assert bounded["shares"] is None
    assert "reaches: not given, since that difference is not shown" in contrasts.source_lines(bounded)[-1]
    # each other arm's share of the bound's AUC difference over its control, seed by seed, and where it is printed
    shares = contrasts.bound_shares(auc, "genenv", "static")
    assert list(shares) == ["replay"]
    share = shares["replay"]
    for seed in bounded["seeds"]:
        gap = auc["genenv"][seed] - auc["static"][seed]
        expected = None if gap == 0 else pytest.approx((auc["replay"][seed] - auc["static"][seed]) / gap)
        assert share["per_seed"][seed] == expected
    assert share["of_means"] == pytest.approx(
        np.mean([auc["replay"][s] - auc["static"][s] for s in bounded["seeds"]])
        / np.mean([auc["genenv"][s] - auc["static"][s] for s in bounded["seeds"]]))
    as_if_shown = {**bounded, "bound": {**bounded["bound"], "shown": True}, "shares": shares}
    assert contrasts.source_lines(as_if_shown)[-1].startswith(
        f"- Share of the `genenv` − `static` AUC difference each arm reaches ((arm − `static`) / (`genenv` − "
        f"`static`)): `replay` {share['of_means']:.2f} of the mean difference, per seed s0 ")
    with pytest.raises(ValueError, match="treatment of no contrast"):
        contrasts.analyse(main, named, bound="static")
    for bad in ("genenv", "genenv-genenv", "a-b-c", "-static"):
        with pytest.raises(ValueError, match="treatment-control"):
            contrasts.parse_contrast(bad)

    partial = tmp_path / "twx_informative"
    shutil.copytree(main, partial)
    (partial / "static/seed5/done.json").unlink()
    with pytest.raises(ValueError, match="planned seeds not finished .*static.*5"):
        contrasts.analyse(partial, named)
    assert 5 not in contrasts.analyse(partial, named, partial=True)["seeds"]
    (partial / "static/seed5/done.json").write_text(json.dumps({"iterations": 3}))  # ran before a lengthening
    with pytest.raises(ValueError, match="planned seeds not finished .*static.*5.* before a lengthening: static seed 5 "
                                         "ran 3"):
        contrasts.analyse(partial, named)
    assert 5 in finished_runs(partial / "static") and 5 not in finished_runs(partial / "static", iterations=4)
    (partial / "static/seed5/done.json").write_text("{}")
    with pytest.raises(ValueError, match="not a finished run's marker"):
        finished_runs(partial / "static")
    cmd = [sys.executable, "-m", "genenv.trainer.experiments.run", "contrasts", str(main)]
    out = subprocess.run([*cmd, "--contrast", "genenv-static", "--contrast", "replay-static"],
                         capture_output=True, text=True, check=True).stdout
    assert "Holm over the 2" in out and "| genenv - static | `genenv` − `static` |" in out
    assert "`static` none; `replay` generated 80.0 (80-80)" in out and "Share of" not in out
    out = subprocess.run([*cmd, "--contrast", "genenv-static", "--contrast", "replay-static", "--bound", "genenv"],
                         capture_output=True, text=True, check=True).stdout
    assert "Share of the `genenv` − `static` AUC difference each arm reaches: not given" in out
    for args, message in ((["--contrast", "oracle-static"], "ran no arm ['oracle']"),
                          (["--contrast", "genenv"], "treatment-control")):
        refused = subprocess.run([*cmd, *args], capture_output=True, text=True)
        assert refused.returncode == 2 and message in refused.stderr


def test_the_shipped_released_and_grounded_runs_rebuild_and_keep_their_rules(shipped):
    """``docs/curriculum/bamboogle_new_arms`` (docs/results.md, "The released GenEnv loop and a grounded writer
    reward"): the report rebuilds byte for byte from ``results/bamboogle_new_arms.tar.xz``; on both seeds the
    ``genenv_released`` arm scored 10 pool tasks 4 times and dropped 2 every iteration, and its final pool holds the
    seed tasks and its last iteration's rewrites only; the ``grounded`` arm held its probe set (8 seed tasks drawn
    with the run's seed) out of the pool, and every generation whose episodes could carry no advantage (rejected,
    or p̂ 0 or 1) has reward 0."""
    import random

    from genenv.benchmarks.registry import get_benchmark

    exp, ours = _rebuilt_shipped_run("bamboogle_new_arms", shipped)
    assert ours["score"] == "bamboogle/f1"
    seed_ids = sorted(t.id for t in get_benchmark("bamboogle", None).load(split="train"))
    for seed in (0, 1):
        rel = exp / f"genenv_released/seed{seed}"
        counters = json.loads((rel / "final_state.json").read_text())["counters"]
        assert (counters["released/scored"], counters["released/dropped"], counters["released/scoring_episodes"]) \
            == (40, 8, 160)
        gens = read_rows(rel / "generations.jsonl")
        pool = [json.loads(line)["task"] for line in (rel / "final_pool.jsonl").read_text().splitlines()]
        assert sorted(t["id"] for t in pool if t["origin"] == "seed") == seed_ids
        assert {t["id"] for t in pool if t["origin"] == "generated"} == \
            {r["task_id"] for r in gens if r["admitted"] and r["iteration"] == 3}
        assert counters["released/retired"] == sum(r["admitted"] for r in gens if r["iteration"] < 3)
        assert all(r["r_env"] > 0 for r in gens if r["admitted"])  # R_env(p̂) is recorded, never trained on
        gro = exp / f"grounded/seed{seed}"
        probe = set(random.Random(seed).sample(seed_ids, 8))
        pool = [json.loads(line)["task"] for line in (gro / "final_pool.jsonl").read_text().splitlines()]
        seeds_left = {t["id"] for t in pool if t["origin"] == "seed"}
        assert seeds_left == set(seed_ids) - probe
        counters = json.loads((gro / "final_state.json").read_text())["counters"]
        assert counters["probe/tasks"] == 8 and counters["probe/trials"] >= 1
        for r in read_rows(gro / "generations.jsonl"):
            if not r["admitted"] or r["p_hat"] in (0.0, 1.0):
                assert r["r_env"] == 0.0


HEADROOM_CONTRASTS = {"oracle - static": ("oracle", "static"), "grounded - genenv": ("grounded", "genenv"),
                      "genenv - static": ("genenv", "static")}


def test_the_shipped_headroom_run_is_complete_and_its_contrasts_rebuild(shipped):
    """The headroom run (``results/twx_headroom.tar.xz``, pre-registered in ``lab/notes/twx-headroom.md``): every
    planned seed, 0-11, finished in all four arms at one commit, so its registered statistic (``genenv-experiment
    contrasts`` with ``oracle - static``, ``grounded - genenv``, ``genenv - static``, ``--bound oracle``) computes
    without a partial look; its report and its result are byte for byte the shipped
    ``docs/curriculum/twx_headroom/contrasts.md`` and ``contrasts.json``, the three tests Holm-corrected together;
    the bound, ``oracle`` − ``static``, is not shown, so no writer's share of it is given."""
    from genenv.trainer.experiments import contrasts
    from genenv.trainer.experiments.stats import holm

    result = contrasts.analyse(shipped("twx_headroom"), HEADROOM_CONTRASTS, bound="oracle")
    assert result["complete"] and result["seeds"] == list(range(12))
    assert result["arms"] == ["oracle", "static", "grounded", "genenv"]
    assert all(len(result["auc"][arm]) == 12 for arm in result["arms"])
    ps = [result["tests"][n]["p_value"] for n in HEADROOM_CONTRASTS]
    assert [result["tests"][n]["p_holm"] for n in HEADROOM_CONTRASTS] == holm(ps)
    assert result["bound"]["shown"] is False and result["shares"] is None
    assert "\n".join(contrasts.markdown(result)) + "\n" == (REPORTS / "twx_headroom/contrasts.md").read_text()
    assert json.dumps(result, indent=1) == (REPORTS / "twx_headroom/contrasts.json").read_text()
