"""Bamboogle: the oracle answers all questions, rewards follow the configured similarity."""
from __future__ import annotations

import pytest

from genenv.benchmarks.bamboogle.env import BamboogleEnv
from genenv.envs.wrappers import TextActionWrapper


def test_oracle_scores_every_question():
    env = TextActionWrapper(BamboogleEnv())
    assert len(env.unwrapped.tasks) == 125
    for i, task in enumerate(env.unwrapped.tasks):
        env.reset(options={"task_index": i})
        _, reward, _, _, info = env.step(BamboogleEnv.gold_text(task))
        assert reward == 1.0 and info["success"] and info["em"] == 1.0, task.id


@pytest.mark.parametrize("metric,expected", [("exact_match", 0.0), ("f1", 0.8), ("fuzz", 1.0)])
def test_reward_uses_the_configured_metric(metric, expected):
    env = TextActionWrapper(BamboogleEnv(metric=metric))
    env.reset(options={"task_id": "bamboogle_1"})  # gold: "james madison"
    _, reward, _, _, info = env.step("Answer: President James Madison")
    assert reward == pytest.approx(expected) and info["success"] is False and info["f1"] == pytest.approx(0.8)


def test_unknown_metric_fails_fast():
    with pytest.raises(ValueError, match="unknown free-text metric"):
        BamboogleEnv(metric="bleu")
