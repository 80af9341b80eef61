"""genenv-eval: result files and the table beside the paper's rows; the local policy; resumed evaluations;
genenv-envs (the endpoint policy: tests/test_endpoint.py)."""
from __future__ import annotations

import json

import pytest

from genenv.eval.envs_cli import main as envs_main
from genenv.eval.leaderboard import main as eval_main
from genenv.runtime.episodes import RolloutSpec
from genenv.runtime.evaluation import evaluate
from genenv.runtime.policies import Generation, GoldPolicy, TransformersPolicy, make_policy


def test_the_gold_policy_is_named_gold_and_its_former_name_warns():
    """``--policy gold`` builds the gold policy; ``oracle``, its former name (now only a task source's), still builds
    it, with a FutureWarning that names the new one."""
    assert isinstance(make_policy("gold"), GoldPolicy) and make_policy("gold").name == "gold"
    with pytest.warns(FutureWarning, match="--policy gold"):
        assert isinstance(make_policy("oracle"), GoldPolicy)


def test_gold_policy_leaderboard_writes_results_and_prints_the_paper_rows(tmp_path, capsys):
    out = tmp_path / "res"
    assert eval_main(["--benchmarks", "bfcl,bamboogle", "--policy", "gold", "--categories",
                      "simple_python,parallel,irrelevance", "--limit", "10", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Qwen 2.5 7B Instruct (base) (paper) | 7.0 | 68.0" in printed and "| GenEnv (paper) | 41.8 | 76.0 |" in printed
    assert ("| **gold** (this run) | not measured: ran bfcl/ast_accuracy_mean (see below) | n/a offline: needs a "
            "live Google search tool and a GPT-4o judge (see below) |") in printed  # not the paper's protocols
    assert "| **bfcl/ast_accuracy_mean** (bfcl headline) | 100.0 | 30 |" in printed  # our numbers: table 2
    summary = json.loads((out / "summary.json").read_text())
    assert {m["key"]: m["value"] for m in summary["metrics"]}["bfcl/parallel/ast_accuracy"] == 1.0
    assert summary["headlines"]["bamboogle"]["protocol"].startswith("exact match, closed-book")
    assert summary["paper_metrics"]["bfcl"] == {"bfcl": {"reason": "not measured: ran bfcl/ast_accuracy_mean"}}
    rows = [json.loads(x) for x in (out / "tasks.jsonl").read_text().splitlines()]
    assert len(rows) == 40 and all(r["reward"] == 1.0 for r in rows)
    assert {"prompt", "raw_output", "parsed_action", "reward", "error"} <= rows[0].keys()
    assert (out / "summary.csv").read_text().startswith("metric,value,n,protocol")
    assert (out / "leaderboard.png").stat().st_size > 10_000


def test_smollm2_evaluates_through_the_same_path(smollm2_dir):
    policy = TransformersPolicy("smollm2", batch_size=4)
    res = evaluate(policy, ["bfcl", "bamboogle"], limit=2, spec=RolloutSpec(max_new_tokens=32), progress=False,
                   options={"bfcl": {"category": "simple_python"}})
    assert {m.key for m in res.metrics} >= {"bfcl/simple_python/ast_accuracy", "bamboogle/em", "bamboogle/f1"}
    assert len(res.rows) == 4 and all(isinstance(r["raw_output"], str) for r in res.rows)
    assert any(r["raw_output"].strip() for r in res.rows)
    assert all(t["tasks_per_second"] > 0 for t in res.timing.values())


class HalfRightPolicy:
    """The gold answer on tasks whose id ends in an even digit, a wrong one otherwise (a mixed score that is the
    same on every run); raises ``KeyboardInterrupt`` (a user's Ctrl-C) at its ``fail_at``-th call."""

    name = "half-right"

    def __init__(self, fail_at: int | None = None):
        self.fail_at, self.calls = fail_at, 0

    def generate(self, prompts, n=1, temperature=0.0, max_new_tokens=256):
        self.calls += 1
        if self.calls == self.fail_at:
            raise KeyboardInterrupt
        gold = GoldPolicy().generate(prompts, n)
        return [g if int(p.task.id[-1]) % 2 == 0 else [Generation("<answer>nobody</answer>")] * n
                for p, g in zip(prompts, gold)]


def test_an_interrupted_evaluation_resumes_to_the_same_summary(tmp_path, monkeypatch, data_dir):
    import genenv.eval.leaderboard as leaderboard

    def run(out, policy):
        monkeypatch.setattr(leaderboard, "policy_from_args", lambda args: policy)
        return eval_main(["--benchmarks", "bamboogle,bfcl", "--limit", "8", "--save-every", "3", "--out", str(out)])

    assert run(tmp_path / "whole", HalfRightPolicy()) == 0
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "cut", HalfRightPolicy(fail_at=3))  # two chunks of three Bamboogle tasks were written
    log = tmp_path / "cut" / "tasks.jsonl"
    assert len(log.read_text().splitlines()) == 6
    with open(log, "a") as fh:
        fh.write('{"unit": "bamboogle", "index": 6, "task_')  # a record torn by a kill
    resumed = HalfRightPolicy()
    assert run(tmp_path / "cut", resumed) == 0
    assert resumed.calls == 1 + 3  # Bamboogle's last 2 tasks in one chunk, BFCL's 8 in three
    whole, cut = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("whole", "cut"))
    assert cut["metrics"] == whole["metrics"] and 0 < whole["headlines"]["bamboogle"]["value"] < 1
    assert cut["timing"]["bamboogle"]["resumed"] == 6 and cut["timing"]["bamboogle"]["tasks"] == 2
    rows = [(tmp_path / d / "tasks.jsonl").read_text() for d in ("whole", "cut")]
    assert rows[0] == rows[1]
    with pytest.raises(SystemExit, match="other settings"):
        eval_main(["--benchmarks", "bamboogle", "--limit", "8", "--out", str(tmp_path / "cut")])


def test_genenv_envs_lists_envs_splits_and_sizes(capsys):
    assert envs_main([]) == 0
    out = capsys.readouterr().out
    assert "genenv/BFCL-v0" in out and "genenv/Bamboogle-v0" in out
    assert any(line.split()[-1] == "125" for line in out.splitlines() if "Bamboogle" in line and "split=test" in line)


class _AnswerLinePolicy:
    """Answers every Bamboogle prompt with ``Answer: <gold>`` (no <answer> tags) and counts its prompts."""

    name = "answer-line"

    def __init__(self):
        self.prompts = 0

    def generate(self, prompts, n=1, temperature=0.0, max_new_tokens=256):
        from genenv.rewards.text import first_alias
        from genenv.runtime.policies import Generation

        self.prompts += len(prompts)
        return [[Generation(f"Answer: {first_alias(p.task.gold)}")] * n for p in prompts]


def test_the_two_readings_of_the_same_text_and_their_labels():
    """The same outputs under both readings: `Answer: <gold>` is right under lenient, no answer under the official
    (Search-R1) reading; a lenient evaluation says so in every label, an official one in none."""
    policy = _AnswerLinePolicy()
    lenient = evaluate(policy, ["bamboogle"], parsing="lenient", limit=5, progress=False)
    official = evaluate(policy, ["bamboogle"], parsing="official", limit=5, progress=False)
    assert policy.prompts == 10 and [r["raw_output"] for r in official.rows] == [r["raw_output"] for r in lenient.rows]
    got = {m.key: (m.value, m.protocol) for m in lenient.metrics}
    assert got["bamboogle/em"][0] == 1.0 and "LENIENT parsing" in got["bamboogle/em"][1]
    assert all("LENIENT parsing" in m.protocol for m in lenient.metrics)
    assert {m.key: m.value for m in official.metrics}["bamboogle/em"] == 0.0
    assert all("LENIENT" not in m.protocol for m in official.metrics)


@pytest.mark.parametrize("lora_r", [0, 4])
def test_a_training_runs_agent_is_evaluated_from_its_checkpoint(tmp_path, tiny_model_dir, data_dir, lora_r):
    """``--policy RUN_DIR/checkpoints/latest``: the trained agent's weights (full, or a LoRA adapter merged into
    its base) compute what the trainer's agent computes."""
    import torch

    from genenv.trainer.cli import compose_config
    from genenv.trainer.loop import CoEvolutionTrainer
    from genenv.runtime.policies import make_policy

    run = tmp_path / "run"
    trainer = CoEvolutionTrainer(compose_config([
        f"run_dir={run}", "benchmark=bamboogle", "iterations=1", "tensorboard=false", "threads=1",
        f"agent.policy.model={tiny_model_dir}", f"env_policy.policy.model={tiny_model_dir}",
        f"agent.policy.lora_r={lora_r}", "generation.prompts_per_iteration=1",
        "generation.generations_per_prompt=2", "agent.batch_tasks=3", "agent.n=2",
        "agent.max_new_tokens=8", "eval.every=0", "autocast_dtype=float32"]))  # float32: logits compare exactly
    trainer.run()
    trained = trainer.backend.models["agent"]
    torch.manual_seed(0)
    with torch.no_grad():  # the tiny random agent never succeeds (no GRPO signal): move its trainable weights
        for p in trained.parameters():
            if p.requires_grad:
                p.add_(0.05 * torch.randn_like(p))
    trainer.save_checkpoint()
    policy = make_policy(str(run / "checkpoints" / "latest"), dtype="float32")
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    with torch.no_grad():
        want, got = trained(ids).logits, policy.model(ids).logits
        base = TransformersPolicy(str(tiny_model_dir), dtype="float32").model(ids).logits
    assert torch.allclose(got, want, atol=1e-4)
    assert not torch.allclose(got, base, atol=1e-4)  # the update moved the weights, and the checkpoint has them
    out = tmp_path / "eval"
    assert eval_main(["--benchmarks", "bamboogle", "--limit", "2", "--max-new-tokens", "8", "--out", str(out),
                      "--policy", str(run / "checkpoints" / "latest")]) == 0
    assert len((out / "tasks.jsonl").read_text().splitlines()) == 2


def test_evaluation_keeps_the_episodes_and_writes_rows_only_as_records(data_dir):
    """``evaluate`` scores the episodes themselves (with their turns), not rows rebuilt from them: multi-step
    TextWorldExpress episodes keep every turn, and the metrics equal those computed from the records alone."""
    from genenv.benchmarks.registry import get_benchmark
    from genenv.runtime.evaluation import evaluate, row_trajectory
    from genenv.runtime.policies import GoldPolicy

    res = evaluate(GoldPolicy(), ["twx"], data_dir=data_dir, limit=3, progress=False,
                   options={"twx": {"games": "coin"}})
    assert len(res.trajectories) == len(res.rows) == 3
    assert all(len(t.turns) >= 2 and t.success for t in res.trajectories)
    assert [t.task.id for t in res.trajectories] == [r["task_id"] for r in res.rows]
    spec = get_benchmark("twx", data_dir)
    (unit, _), = spec.eval_units({"games": "coin"})
    from_rows = spec.summarize(unit, [row_trajectory(t.task, r) for t, r in zip(res.trajectories, res.rows)])
    assert [(m.key, m.value) for m in from_rows] == [(m.key, m.value) for m in res.metrics]
