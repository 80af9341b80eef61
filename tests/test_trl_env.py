"""TRL's GRPOTrainer over genenv-serve (``genenv.runtime.serve.trl``): the adapter's tools against the server, and a
real two-step GRPO run of a tiny random model whose logged rewards are the server's."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import DATA_DIR

from genenv.envs.registry import env_entry, load_plugins
from genenv.runtime.serve.trl import ServerEnvironment, environment_factory, server_reward

load_plugins()
DIR = str(DATA_DIR) if DATA_DIR else None


def bfcl_ids(category: str, k: int) -> list[str]:
    return [t.id for t in env_entry("bfcl").env_class.load_tasks(data_dir=DIR, category=category, split="test")[:k]]


def test_tools_of_the_adapter(env_server_url):
    bamboogle = env_entry("bamboogle").env_class.load_tasks(data_dir=DIR, split="test")[0]
    env = environment_factory(env_server_url)()
    prompt = env.reset(prompt=[{"role": "user", "content": ""}], benchmark="bamboogle", task_id=bamboogle.id)
    assert bamboogle.prompt in prompt and "Tools" not in prompt
    assert "Episode over: reward 0" in env.submit("<answer>nobody at all</answer>") and env.reward == 0.0
    assert env.submit("again") == "The episode is over (reward 0)."
    env.reset(benchmark="bamboogle", task_id=bamboogle.id)
    assert "reward 1" in env.submit(env_entry("bamboogle").env_class.gold_text(bamboogle)) and env.reward == 1.0
    env.reset(benchmark="bfcl", options={"category": "simple_python"}, task_id=bfcl_ids("simple_python", 1)[0])
    assert env.call_tool("f", "{not json").startswith("Error: arguments are not JSON")
    assert env.call_tool("f", "[1]") == "Error: arguments must be a JSON object" and not env.done
    prompt = env.reset(benchmark="bfcl", options={"category": "irrelevance"}, task_id=bfcl_ids("irrelevance", 1)[0])
    assert "Tools (use call_tool" in prompt
    assert server_reward(["I cannot help with that."], environments=[env]) == [1.0]
    assert env.rewards_seen == [0.0, 1.0, 1.0]
    with pytest.raises(ValueError):
        server_reward(["x"])


def test_environment_factory_spreads_instances_over_several_servers(env_server_url):
    """``environment_factory("URL1,URL2")`` makes instances on the servers in turn; each plays its episode there."""
    from genenv.runtime.serve.launch import spawn

    proc, second = spawn("--benchmarks", "bamboogle")
    try:
        make = environment_factory(f"{env_server_url},{second}/")
        envs = [make() for _ in range(4)]
        assert [e.url for e in envs] == [env_server_url, second] * 2
        task = env_entry("bamboogle").env_class.load_tasks(data_dir=DIR, split="test")[1]
        for env in envs:
            assert task.prompt in env.reset(benchmark="bamboogle", task_id=task.id)
            assert "reward 1" in env.submit(env_entry("bamboogle").env_class.gold_text(task))
            env._close()
        with pytest.raises(ValueError, match="http"):
            environment_factory("ftp://x")
    finally:
        proc.terminate()
        proc.wait(30)


def test_grpo_trainer_trains_on_the_server(env_server_url, tiny_model_dir, tmp_path):
    """GRPOTrainer with ``environment_factory`` trains the tiny model for 2 steps; BFCL irrelevance tasks (text
    without a call earns 1) and simple ones (junk earns 0) make the rewards differ; the rewards TRL logs are the
    means of the rewards the server returned to the environments of each step."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    import trl

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    # a chat template that renders tool calls (TRL requires one with tools); TRL ships Qwen2.5's
    tokenizer.chat_template = (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()
    rows = [{"prompt": [{"role": "user", "content": ""}], "benchmark": "bfcl", "options": {"category": c},
             "task_id": i} for c in ("irrelevance", "simple_python") for i in bfcl_ids(c, 2)]
    made: list[ServerEnvironment] = []
    factory = environment_factory(env_server_url)

    def tracked() -> ServerEnvironment:
        env = factory()
        made.append(env)
        return env

    per_step: list[list[float]] = []

    def reward(completions, environments=None, **kwargs):
        out = server_reward(completions, environments=environments, **kwargs)
        per_step.append(list(out))
        return out

    args = GRPOConfig(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=12, learning_rate=1e-4, logging_steps=1, report_to=[], use_cpu=True,
                      bf16=False, save_strategy="no", seed=0, max_tool_calling_iterations=1)
    trainer = GRPOTrainer(model=str(tiny_model_dir), reward_funcs=[reward], args=args, processing_class=tokenizer,
                          train_dataset=Dataset.from_list(rows * 2), environment_factory=tracked)
    trainer.train()
    logged = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    assert trainer.state.global_step == 2 and len(logged) == 2 == len(per_step)
    assert logged == pytest.approx([sum(r) / len(r) for r in per_step])
    assert {r for step in per_step for r in step} == {0.0, 1.0}  # both kinds of task were played
    assert sum(sum(e.rewards_seen) for e in made) == pytest.approx(sum(sum(r) for r in per_step))
