"""What measuring the environment policy's learning needs: the contrastive ``grpo`` update mode, the frozen-agent
setting, rollouts per generated task decoupled from the agent's batch, the in-band share of all generations, per-task
held-out outcomes, the TextWorldExpress ``steps`` field the policy controls, and the paired statistic of the report
(a permutation test that finds a planted effect and no effect where there is none)."""
from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.task_writer import Rejection
from genenv.benchmarks.twx.spec import pin_steps
from genenv.envs.task import Task
from genenv.trainer.experiments import alignment, stats
from genenv.trainer.cli import compose_config
from genenv.trainer.strategies.env_policy_updates import ScoredGeneration, env_policy_samples
from genenv.trainer.experiments.run import run_experiment
from genenv.trainer.experiments.report import compare_arms, read_rows
from genenv.trainer.generation import GenerationRecord
from genenv.trainer.loop import CoEvolutionTrainer
from genenv.runtime.policies import Generation
from genenv.trainer.updates.advantages import get_advantage


def _record(k: int, admitted: bool, prompt_index: int = 0) -> GenerationRecord:
    gen = Generation(f"text {k}", prompt_ids=[1, 2, 3], response_ids=[4, 5 + k])
    if admitted:
        task = Task(id=f"t{k}", benchmark="bamboogle", split="generated", prompt="q", gold="a",
                    action_kind="free_text")
        return GenerationRecord(prompt_index, gen, task=task)
    return GenerationRecord(prompt_index, gen, rejection=Rejection("bad_json"))


def test_grpo_mode_learns_from_every_generation_and_rwr_from_the_band_only():
    scored = [ScoredGeneration(_record(0, False), 0.0, False),   # rejected
              ScoredGeneration(_record(1, True), 1.0, True),     # in band
              ScoredGeneration(_record(2, True), 0.29, False),   # too hard (p̂ 0 at α 0.25, β 20)
              ScoredGeneration(_record(3, True), 0.007, False)]  # too easy
    samples, mode = env_policy_samples("grpo", scored, 1.0)
    assert mode == "grpo" and [s.reward for s in samples] == [0.0, 1.0, 0.29, 0.007]
    assert {s.uid for s in samples} == {"prompt-0"}  # one GRPO group per generation prompt
    samples, mode = env_policy_samples("rwr", scored, 1.0)
    assert mode == "rwr" and [s.reward for s in samples] == [1.0]


def _shipped_generation_groups(run: Path) -> dict[tuple[int, int], list[ScoredGeneration]]:
    """The generation groups (iteration, prompt) of a shipped run, each generation with its logged R_env."""
    groups: dict[tuple[int, int], list[ScoredGeneration]] = {}
    for k, row in enumerate(read_rows(run / "generations.jsonl")):
        scored = ScoredGeneration(_record(k, row["admitted"], row["prompt_index"]), row["r_env"], False)
        groups.setdefault((row["iteration"], row["prompt_index"]), []).append(scored)
    return groups


def test_drgrpo_moves_the_writer_by_the_reward_gap_where_grpo_moves_it_a_whole_unit(shipped):
    """The shipped TWX rerun's ``genenv`` seed 2 (env_policy.update_mode=grpo, β 20): in a group where the best
    generation is an admitted game at p̂ 0 or 1 (R_env 0.0067) beside rejected ones (0), GRPO's std-normalised
    advantage of that game is as large as that of an in-band game (R_env 1) in its own group; Dr. GRPO's is
    its reward gap, under 0.01, and the in-band game keeps an advantage above 0.5."""
    groups = _shipped_generation_groups(shipped("twx_informative/genenv/seed2"))
    best = {key: max(s.r_env for s in group) for key, group in groups.items()}
    unwinnable = [g for key, g in groups.items() if 0.006 < best[key] < 0.007 and min(s.r_env for s in g) == 0.0]
    in_band = [g for key, g in groups.items() if best[key] == 1.0]
    assert len(unwinnable) == 13 and len(in_band) == 1

    def top_advantage(group: list[ScoredGeneration], mode: str) -> float:
        samples, estimator = env_policy_samples(mode, group, 1.0)
        assert estimator == mode
        _, advantages, metrics = get_advantage(estimator)(samples)
        assert metrics == {"groups_kept": 1, "groups_dropped": 0}
        return max(advantages)

    grpo_unwinnable = [top_advantage(g, "grpo") for g in unwinnable]
    assert min(grpo_unwinnable) > 0.49 and np.mean(grpo_unwinnable) > 1.0  # +1.5 beside three rejected ones
    assert top_advantage(in_band[0], "grpo") == pytest.approx(max(grpo_unwinnable), rel=1e-3)  # the same push
    assert max(top_advantage(g, "drgrpo") for g in unwinnable) < 0.01
    assert top_advantage(in_band[0], "drgrpo") > 0.5


def _tiny_twx_overrides(tiny_model_dir) -> list[str]:
    return ["benchmark=twx", "tensorboard=false", "threads=1", f"agent.policy.model={tiny_model_dir}",
            f"env_policy.policy.model={tiny_model_dir}", "generation.prompts_per_iteration=1",
            "generation.generations_per_prompt=4", "generation.temperature=1.0", "agent.n=2",
            "agent.max_new_tokens=4", "benchmark.env_kwargs.max_steps=2", "+benchmark.seed_options.episodes=4"]


def _tiny_twx(tmp_path, tiny_model_dir, *extra):
    return compose_config([f"run_dir={tmp_path}/run", *_tiny_twx_overrides(tiny_model_dir), "agent.batch_tasks=3",
                           *extra])


def test_frozen_agent_rolls_out_only_new_tasks_and_never_updates(tmp_path, tiny_model_dir):
    """agent_batch=frozen: the agent's weights stay, only the admitted generated tasks are rolled out
    (generation.rollouts_per_task each), the environment policy is updated; held-out outcomes per task."""
    cfg = _tiny_twx(tmp_path, tiny_model_dir, "iterations=2", "agent_batch=frozen", "env_policy.update_mode=grpo",
                    "generation.rollouts_per_task=3", "eval.every=1", "eval.limit=2")
    rows = CoEvolutionTrainer(cfg).run()
    for row in rows:
        assert row["weights/agent_delta"] == 0.0 and row["agent_update/frozen"] is True
        assert row["agent/tasks"] == row["gen/admitted"] and row["agent/rollouts"] == 3 * row["gen/admitted"]
        assert row["gen/in_band_share"] == row["gen/in_band"] / row["gen/generated"]
        assert sum(row["p_hat/generated_histogram"]) == row["gen/admitted"]
    assert sum(r["gen/admitted"] for r in rows) > 0, "the schema-constrained tiny model should write valid games"
    heldout = read_rows(tmp_path / "run" / "heldout.jsonl")
    assert [r["iteration"] for r in heldout] == [0, 0, 1, 1]
    assert all(r["task_id"].startswith("twx_coin_dev_") and r["success"] in (True, False) for r in heldout)


def test_rollouts_per_generated_task_are_decoupled_from_the_agents_batch(tmp_path, tiny_model_dir):
    """New tasks get ``generation.rollouts_per_task`` episodes, pool tasks ``agent.n``, all in one engine rollout
    (one count per task) so that they decode in one batch."""
    cfg = _tiny_twx(tmp_path, tiny_model_dir, "iterations=1", "generation.rollouts_per_task=3")
    trainer = CoEvolutionTrainer(cfg)
    rollout, specs = trainer.backend.rollout, []

    def spy_rollout(tasks, spec):
        specs.append((list(tasks), spec))
        return rollout(tasks, spec)

    trainer.backend.rollout = spy_rollout
    row = trainer.run()[0]
    new = row["gen/admitted"]
    pool = max(0, 3 - new)
    assert row["agent/tasks"] == new + pool and row["agent/rollouts"] == 3 * new + 2 * pool
    assert len(specs) == 1
    tasks, spec = specs[0]
    assert spec.sizes(len(tasks)) == [3 if t.origin == "generated" else 2 for t in tasks]
    assert sum(spec.sizes(len(tasks))) == row["agent/rollouts"]


def test_twx_steps_field_pins_the_gold_length_the_policy_writes():
    spec = get_benchmark("twx")
    for steps in (2, 3, 4):
        task = spec.parse_generated(json.dumps({"game": "coin", "params": {"numLocations": 4, "includeDoors": 0},
                                                "steps": steps, "seed": 100}), f"g{steps}", 0, None)
        assert isinstance(task, Task) and len(task.gold) == steps and task.gold[-1] == "take coin"
        again = spec.parse_generated(json.dumps(spec.as_generation(task)), "again", 0, None)
        assert again.metadata["seed"] == task.metadata["seed"] and len(again.gold) == steps
    far = spec.parse_generated('{"game": "coin", "params": {"numLocations": 2, "includeDoors": 0}, "steps": 6, "seed": 5}', "x", 0, None)
    assert isinstance(far, Rejection) and far.reason == "steps_unreachable"
    bad = spec.parse_generated('{"game": "coin", "params": {}, "steps": 0, "seed": 5}', "y", 0, None)
    assert isinstance(bad, Rejection) and bad.reason == "bad_steps"
    assert pin_steps("coin", {"numLocations": 2, "includeDoors": 0}, 999, 3).metadata["seed"] in range(0, 1000)  # wraps in the fold
    schema = spec.generation_schema([])
    assert all("steps" in branch["required"] for branch in schema["anyOf"])


def _rows(shares, generated=10):
    return [{"iteration": i, "gen/generated": generated, "gen/in_band": round(s * generated),
             "p_hat/generated": [0.25]} for i, s in enumerate(shares)]


def test_sign_flip_test_finds_a_planted_effect_and_not_a_null_one():
    rng = np.random.default_rng(0)
    control = {s: _rows(rng.uniform(0.1, 0.4, 10)) for s in range(6)}
    planted = {s: _rows([min(1.0, alignment.in_band_shares(control[s])[i] + 0.2 + rng.normal(0, 0.1))
                         for i in range(10)]) for s in range(6)}
    stat = alignment.compare(planted, control)
    assert stat["n_cells"] == 54 and stat["n_seeds"] == 6  # iterations 1-9 of 6 paired seeds; tested over seeds
    assert stat["p_value"] == pytest.approx(2 / 2 ** 6) and stat["difference"]["low"] > 0.1  # every seed above
    null = {s: _rows([min(1.0, max(0.0, alignment.in_band_shares(control[s])[i] + rng.normal(0, 0.1)))
                      for i in range(10)]) for s in range(6)}
    stat = alignment.compare(null, control)
    assert stat["p_value"] > 0.05 and stat["difference"]["low"] < 0 < stat["difference"]["high"]
    assert stats.sign_flip_p([0.0, 0.0, 0.0]) == 1.0 and stats.sign_flip_p([0.3]) is None
    # exact over 2^4 sign patterns: four positive cells of one size give p = 2/16
    assert stats.sign_flip_p([0.1, 0.1, 0.1, 0.1]) == pytest.approx(0.125)


def test_frozen_agent_experiment_reports_the_paired_alignment_statistic(tmp_path, tiny_model_dir, monkeypatch):
    """genenv-experiment with agent_batch=frozen and no held-out evaluation: each arm-seed runs in a process of its
    own, seed by seed in the order of the arms; the report pairs genenv with random_env by seed (iteration 0 is left
    out: both arms generate it from the same weights) and draws alignment.png."""
    from genenv.trainer.experiments import run as runner

    exp = tmp_path / "exp"
    cfg = compose_config([f"experiment_dir={exp}", "arms=[genenv,random_env]", "seeds=[0,1]", "iterations=2",
                          "eval.every=0", "agent_batch=frozen", "env_policy.update_mode=grpo",
                          *_tiny_twx_overrides(tiny_model_dir)],
                         config_name="experiment")
    started, fresh = [], runner.in_fresh_process
    monkeypatch.setattr(runner, "in_fresh_process",
                        lambda target, *args, name="": (started.append(name), fresh(target, *args, name=name)))
    run_experiment(cfg)
    assert started == ["genenv seed 0", "random_env seed 0", "genenv seed 1", "random_env seed 1"]
    summary = json.loads((exp / "summary.json").read_text())
    stat = summary["alignment"]
    assert summary["agent_frozen"] is True and stat["n_cells"] == 2
    assert [c[:2] for c in stat["cells"]] == [[0, 1], [1, 1]]
    g0 = read_rows(exp / "genenv/seed0/generations.jsonl")
    r0 = read_rows(exp / "random_env/seed0/generations.jsonl")
    assert [r for r in g0 if r["iteration"] == 0] == [r for r in r0 if r["iteration"] == 0]
    assert "Does the environment policy learn?" in (exp / "summary.md").read_text()
    assert (exp / "alignment.png").stat().st_size > 10_000 and not (exp / "baseline.json").exists()


def test_compare_pairs_arm_folders_of_different_experiments_and_refuses_different_bands(tmp_path, tiny_model_dir,
                                                                                          shipped):
    """``genenv-experiment compare``: two arms of *different* experiments (here genenv of a ``grpo`` and of an ``rwr``
    experiment, same seeds and band) get the report's statistic, named by folder; iteration 0 is left out (same
    weights, same generations); arms under different α bands, or with no finished seed in common, are refused."""
    exps = {}
    for mode, seeds in (("grpo", "[0,1]"), ("rwr", "[1]")):
        exps[mode] = tmp_path / mode
        run_experiment(compose_config([f"experiment_dir={exps[mode]}", "arms=[genenv]", f"seeds={seeds}",
                                       "iterations=2", "eval.every=0", "agent_batch=frozen",
                                       f"env_policy.update_mode={mode}", *_tiny_twx_overrides(tiny_model_dir)],
                                      config_name="experiment"))
    stat = compare_arms(exps["rwr"] / "genenv", exps["grpo"] / "genenv")
    assert list(stat["arms"]) == ["rwr/genenv", "grpo/genenv"]
    assert stat["band"] == (0.25, 0.15)  # the CPU profile's band
    assert stat["n_cells"] == 1 and list(stat["per_seed"]) == [1] and stat["arms"]["grpo/genenv"]["seeds"] == [1]
    out = subprocess.run([sys.executable, "-m", "genenv.trainer.experiments.run", "compare", str(exps["rwr"] / "genenv"),
                          str(exps["grpo"] / "genenv"), "--plot", str(tmp_path / "a.png")],
                         capture_output=True, text=True, check=True).stdout
    assert "difficulty alignment, rwr/genenv vs grpo/genenv" in out and "- over the 1 seeds:" in out
    assert "- cells (descriptive; the iterations of one seed are not independent): 1," in out
    assert (tmp_path / "a.png").stat().st_size > 10_000
    grpo_rows = read_rows(exps["grpo"] / "genenv/seed1/generations.jsonl")
    rwr_rows = read_rows(exps["rwr"] / "genenv/seed1/generations.jsonl")
    assert [r for r in grpo_rows if r["iteration"] == 0] == [r for r in rwr_rows if r["iteration"] == 0]
    with pytest.raises(ValueError, match="different α bands"):
        compare_arms(exps["rwr"] / "genenv", shipped("bamboogle_env_policy/genenv"))
    other = tmp_path / "other"
    (other / "genenv").mkdir(parents=True)
    shutil.copyfile(exps["rwr"] / "experiment.yaml", other / "experiment.yaml")
    shutil.copytree(exps["rwr"] / "genenv/seed1", other / "genenv/seed7")
    with pytest.raises(ValueError, match="no seed finished in both"):
        compare_arms(other / "genenv", exps["grpo"] / "genenv")
    with pytest.raises(FileNotFoundError, match="experiment.yaml"):
        compare_arms(exps["rwr"], exps["grpo"] / "genenv")


def test_a_lever_at_the_same_code_pairs_bitwise_at_iteration_0_and_runs_of_other_code_are_refused(tmp_path,
                                                                                                  tiny_model_dir):
    """Two experiments that differ only in a setting that cannot act before the first writer update (the writer's
    update mode): with the same seed and code, iteration 0 of genenv and random_env in both is the same, generation
    for generation and metric for metric; each sitting records its code; a comparison with a run of other code is
    refused unless asked for, and says what it found; a comparison and the report say whether the environment
    policy's iteration-0 texts are the same, and name the arms that split where one sample departs."""
    from genenv.trainer.experiments.provenance import code_version

    exps = {}
    for name, mode in (("base", "grpo"), ("lever", "drgrpo")):
        exps[name] = tmp_path / name
        run_experiment(compose_config([f"experiment_dir={exps[name]}", "arms=[genenv,random_env]", "seeds=[0]",
                                       "iterations=1", "eval.every=0", "agent_batch=frozen",
                                       f"env_policy.update_mode={mode}", *_tiny_twx_overrides(tiny_model_dir)],
                                      config_name="experiment"))

    def iteration0(exp, arm):
        gens = [r for r in read_rows(exp / f"{arm}/seed0/generations.jsonl") if r["iteration"] == 0]
        row = read_rows(exp / f"{arm}/seed0/metrics.jsonl")[0]
        return gens, {k: v for k, v in row.items() if k.split("/")[0] in ("gen", "agent", "p_hat")}

    ref = iteration0(exps["base"], "genenv")
    assert ref[0] and "agent/rollouts" in ref[1]
    for exp, arm in ((exps["base"], "random_env"), (exps["lever"], "genenv"), (exps["lever"], "random_env")):
        assert iteration0(exp, arm) == ref, (exp.name, arm)
    sittings = read_rows(exps["lever"] / "genenv/seed0/sittings.jsonl")
    assert [s["code"] for s in sittings] == [code_version()] and sittings[0]["host"] and sittings[0]["threads"] >= 1
    note = compare_arms(exps["lever"] / "genenv", exps["base"] / "genenv")["code"]
    assert "in every arm" in note and "iteration 0's environment-policy texts: the same at seed 0" in note
    assert "iteration 0's agent rollouts (tokens, mean reward): the same at seed 0" in note
    assert "environment-policy texts: the same at seed 0; iteration 0's agent rollouts (tokens, mean reward): the " \
           "same at seed 0" in (exps["base"] / "summary.md").read_text()
    gens_path = exps["lever"] / "genenv/seed0/generations.jsonl"
    gens = read_rows(gens_path)
    gens_path.write_text("".join(json.dumps({**r, "text": r["text"] + " " * (i == 0)}) + "\n"
                                 for i, r in enumerate(gens)))  # one sample departs, as on a shared host
    assert "split lever/genenv | base/genenv at seed 0" in compare_arms(exps["lever"] / "genenv",
                                                                     exps["base"] / "genenv")["code"]
    (exps["lever"] / "genenv/seed0/sittings.jsonl").write_text(json.dumps({**sittings[0], "code": "0" * 40}) + "\n")
    with pytest.raises(ValueError, match="different code"):
        compare_arms(exps["lever"] / "genenv", exps["base"] / "genenv")
    assert "code differs" in compare_arms(exps["lever"] / "genenv", exps["base"] / "genenv", mixed_code=True)["code"]
    out = subprocess.run([sys.executable, "-m", "genenv.trainer.experiments.run", "compare",
                          str(exps["lever"] / "genenv"), str(exps["base"] / "genenv")],
                         capture_output=True, text=True).stdout
    assert "difficulty alignment: not compared (runs made with different code" in out


def _heldout_rows(scores, tasks=4):
    return [{"iteration": i, "agent/tasks": tasks, "heldout/score": s} for i, s in enumerate(scores)]


def test_outcome_test_finds_a_planted_held_out_gain_and_not_a_null_one():
    """The held-out outcome statistic (trainer/experiments/outcome.py): genenv's score planted 15 points above the control's
    at every evaluation is found (cells and AUC); genenv equal to the control up to noise is not; iteration 0 is
    left out of the cells; per-seed final differences are the last evaluation's."""
    from genenv.trainer.experiments import outcome
    from genenv.trainer.experiments.report import run_auc

    rng = np.random.default_rng(1)
    control = {s: _heldout_rows(rng.uniform(0.2, 0.5, 8)) for s in range(6)}
    auc = functools.partial(run_auc, baseline=0.25)
    planted = {s: _heldout_rows([r["heldout/score"] + 0.15 + rng.normal(0, 0.03) for r in control[s]])
               for s in range(6)}
    stat = outcome.compare(planted, control, auc)
    assert stat["n_cells"] == 42 and 0.1 < stat["cell_mean"] < 0.2  # iterations 1-7 of 6 paired seeds, described
    assert stat["auc"]["p_value"] == pytest.approx(2 / 2 ** 6) and stat["auc"]["n_seeds"] == 6  # tested over seeds
    assert 0.05 < stat["auc"]["difference"]["low"] < stat["auc"]["difference"]["high"] < 0.25
    assert all(0.08 < d < 0.22 for d in stat["auc"]["per_seed"].values())
    assert stat["final"]["per_seed"][0] == pytest.approx(planted[0][-1]["heldout/score"] - control[0][-1]["heldout/score"])
    null = {s: _heldout_rows([r["heldout/score"] + rng.normal(0, 0.05) for r in control[s]]) for s in range(6)}
    stat = outcome.compare(null, control, auc)
    a = stat["auc"]
    assert a["p_value"] > 0.05 and a["difference"]["low"] < 0 < a["difference"]["high"]
    both = outcome.compare_all({"genenv": planted, "random_env": control, "static": null}, auc)
    assert set(both) == {"random_env", "static"} and both["random_env"]["auc"]["p_value"] < 0.05
    assert outcome.compare_all({"random_env": control}, auc) == {}
    assert "genenv vs" in "\n".join(outcome.markdown(both))
