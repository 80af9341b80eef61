"""Bamboogle: the gold policy answers all questions, rewards follow the configured similarity, both readings of the
answer (official: Search-R1's last closed <answer> block; lenient: ours), gold aliases, ungameable similarity."""
from __future__ import annotations

import json

import pytest

from genenv.benchmarks.bamboogle.env import BamboogleEnv, load_bamboogle_tasks
from genenv.envs.task import Task
from genenv.envs.wrappers import TextActionWrapper
from genenv.rewards.text import FREE_TEXT_METRICS, similarity


@pytest.mark.parametrize("parsing", ["official", "lenient"])
def test_gold_policy_scores_every_question(parsing):
    env = TextActionWrapper(BamboogleEnv(parsing=parsing))
    assert len(env.unwrapped.tasks) == 125
    for i, task in enumerate(env.unwrapped.tasks):
        env.reset(options={"task_index": i})
        _, reward, _, _, info = env.step(BamboogleEnv.gold_text(task))
        assert reward == 1.0 and info["success"] and info["em"] == 1.0, task.id


@pytest.mark.parametrize("metric,expected", [("exact_match", 0.0), ("f1", 0.8), ("fuzz", 0.72)])
def test_reward_uses_the_configured_metric(metric, expected):
    env = TextActionWrapper(BamboogleEnv(metric=metric))
    env.reset(options={"task_id": "bamboogle_1"})  # gold: "james madison"
    _, reward, _, _, info = env.step("<answer>President James Madison</answer>")
    assert reward == pytest.approx(expected, abs=0.01) and info["success"] is False
    assert info["f1"] == pytest.approx(0.8)


# (model text, answer read under official = Search-R1's rule, answer read under lenient); None: no answer
READINGS = [
    ("<answer>James Madison</answer>", "James Madison", "James Madison"),
    ("<answer>George Washington</answer> no wait <answer>James Madison</answer>", "James Madison",
     "George Washington"),                                                    # Search-R1 scores the last block
    ("<answer>James Madison", None, "James Madison"),                           # unclosed: no answer officially
    ("Answer: James Madison", None, "James Madison"),                           # no tag at all
    ("James Madison", None, "James Madison"),
    ("<think>maybe <answer>John Adams</answer></think><answer>James Madison</answer>", "James Madison",
     "James Madison"),
    ("<answer> James Madison </answer>\n", "James Madison", "James Madison"),
    ("<answer></answer>", "", None),                                            # an empty block is an empty answer
]


@pytest.mark.parametrize("text,official,lenient", READINGS)
def test_both_readings_of_an_answer(text, official, lenient):
    for parsing, want in (("official", official), ("lenient", lenient)):
        env = TextActionWrapper(BamboogleEnv(parsing=parsing))
        env.reset(options={"task_id": "bamboogle_1"})  # gold: "James Madison"
        _, reward, _, _, info = env.step(text)
        if want is None:
            assert reward == 0.0 and info["error"] and info["parsed_action"] is None, (parsing, text)
        else:
            assert info["parsed_action"] == want, (parsing, text)
            assert info["success"] is (want == "James Madison"), (parsing, text)


def test_a_list_of_gold_aliases_stays_a_list_and_the_best_alias_counts(tmp_path):
    root = tmp_path / "bamboogle"
    root.mkdir()
    rows = [{"idx": 0, "question": "Who wrote Hamlet?", "answer": ["William Shakespeare", "Shakespeare"]},
            {"idx": 1, "question": "Capital of France?", "answer": "Paris\n"}]
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = load_bamboogle_tasks("test", data_dir=str(tmp_path))
    assert tasks[0].gold == ["William Shakespeare", "Shakespeare"] and tasks[1].gold == "Paris"
    assert Task.from_json(tasks[0].to_json()).gold == tasks[0].gold  # survives the task pool's JSON
    env = TextActionWrapper(BamboogleEnv(tasks=tasks))
    for text, em, f1 in (("<answer>Shakespeare</answer>", 1.0, 1.0), ("<answer>William Shakespeare</answer>", 1.0, 1.0),
                         ("<answer>Christopher Marlowe</answer>", 0.0, 0.0),
                         ("<answer>Bill Shakespeare</answer>", 0.0, 2 / 3)):
        env.reset(options={"task_index": 0})
        _, reward, _, _, info = env.step(text)
        assert (info["em"], info["f1"]) == (em, pytest.approx(f1)), text
    assert BamboogleEnv.gold_text(tasks[0]) == "<answer>William Shakespeare</answer>"


@pytest.mark.parametrize("metric", sorted(FREE_TEXT_METRICS))
def test_no_similarity_gives_full_credit_to_hedged_or_padded_answers(metric):
    gold = "James Madison"
    hedged = ["James Madison or John Adams", "John Adams, Thomas Jefferson, James Madison"]
    padded = "The answer could be many things. " * 40 + "James Madison " + "and more words. " * 40
    assert similarity("james madison", gold, metric) == pytest.approx(1.0, abs=1e-5)  # the gold itself: full credit
    for text in hedged:
        assert similarity(text, gold, metric) < 0.9, (metric, text)
    assert similarity(padded, gold, metric) < 0.5, metric


def test_unknown_metric_fails_fast():
    with pytest.raises(ValueError, match="unknown free-text metric"):
        BamboogleEnv(metric="bleu")
