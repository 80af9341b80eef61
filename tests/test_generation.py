"""Environment-policy task generation: strict-JSON parsing, validation, rejection reasons, near-duplicates."""
from __future__ import annotations

import dataclasses
import json

import pytest

from genenv.benchmarks.registry import get_benchmark
from genenv.benchmarks.bfcl.env import BFCLEnv, load_bfcl_tasks
from genenv.envs.task import Task

from conftest import DATA_DIR

BFCL = get_benchmark("bfcl", DATA_DIR)
BAMBOOGLE = get_benchmark("bamboogle", DATA_DIR)


def _bfcl_generation(**over):
    gen = {"function": {"name": "convert_currency", "description": "Convert an amount between currencies.",
                        "parameters": {"type": "dict", "properties": {
                            "amount": {"type": "float", "description": "Amount."},
                            "source": {"type": "string", "description": "ISO code."},
                            "target": {"type": "string", "description": "ISO code."}},
                            "required": ["amount", "source", "target"]}},
           "question": "How many EUR is 120.5 USD?",
           "answer": {"name": "convert_currency", "arguments": {"amount": 120.5, "source": "USD", "target": "EUR"}}}
    gen.update(over)
    return "Here is a task:\n" + json.dumps(gen)


def test_valid_bfcl_generation_is_admitted_and_solvable_by_its_gold_call():
    task = BFCL.parse_generated(_bfcl_generation(), "gen-0-0-0", 3, None)
    assert isinstance(task, Task), task
    assert task.origin == "generated" and task.admitted_iteration == 3 and task.metadata["category"] == "simple_python"
    env = BFCLEnv(tasks=[task])
    env.reset(options={"task_index": 0})
    assert env.step(BFCLEnv.gold_action(task))[1] == 1.0
    env.reset(options={"task_index": 0})
    wrong = [{"name": "convert_currency", "arguments": {"amount": 120.5, "source": "USD", "target": "GBP"}}]
    assert env.step(wrong)[1] == 0.0


@pytest.mark.parametrize("text,reason", [
    ("no json at all", "no_json"),
    ('{"function": {"name": "f",}', "invalid_json"),
    (json.dumps({"question": "q"}), "missing_fields"),
    (_bfcl_generation(function={"name": "bad name", "parameters": {}}), "bad_schema"),
    (_bfcl_generation(function={"name": "f", "parameters": {"type": "object", "properties": {}}}), "bad_schema"),
    (_bfcl_generation(answer={"name": "other", "arguments": {}}), "bad_answer"),
    (_bfcl_generation(answer={"name": "convert_currency", "arguments": {"amount": "lots", "source": "USD",
                                                                        "target": "EUR"}}), "gold_type_mismatch"),
    (_bfcl_generation(answer={"name": "convert_currency", "arguments": {"amount": True, "source": "USD",
                                                                        "target": "EUR"}}), "gold_type_mismatch"),
    (_bfcl_generation(answer={"name": "convert_currency", "arguments": {"amount": 1.0}}), "gold_fails_checker"),
    (_bfcl_generation(answer={"name": "convert_currency", "arguments": {"amount": 1.0, "source": "USD",
                                                                        "target": "EUR", "fee": 2}}),
     "gold_fails_checker"),
])
def test_bfcl_garbage_is_rejected_with_a_counted_reason(text, reason):
    out = BFCL.parse_generated(text, "gen-0-0-0", 0, None)
    assert not isinstance(out, Task) and out.reason == reason


def test_bamboogle_generation_rules():
    ok = BAMBOOGLE.parse_generated('{"question": "Who founded the company that makes the iPhone?", '
                                   '"answer": "Steve Jobs"}', "g", 1, None)
    assert isinstance(ok, Task) and ok.gold == "Steve Jobs" and ok.action_kind == "free_text"
    for text, reason in [('{"question": "", "answer": "x"}', "empty_field"),
                         ('{"question": "Why?", "answer": "' + "word " * 20 + '"}', "answer_not_short"),
                         ('{"question": "Is Paris in France?", "answer": "Paris"}', "answer_in_question"),
                         ('{"q": 1}', "missing_fields"), ("[1, 2]", "no_json")]:
        out = BAMBOOGLE.parse_generated(text, "g", 1, None)
        assert getattr(out, "reason", None) == reason, text


def test_near_duplicates_of_the_pool_are_rejected():
    seeds = load_bfcl_tasks("simple_python")[:20]
    copy_of_seed = BFCL.parse_generated(json.dumps(BFCL.as_generation(seeds[0])), "g", 0, seeds[0])
    assert isinstance(copy_of_seed, Task)
    assert BFCL.near_duplicate(copy_of_seed, seeds).reason == "near_duplicate"
    fresh = BFCL.parse_generated(_bfcl_generation(), "g2", 0, None)
    assert BFCL.near_duplicate(fresh, seeds) is None


def test_a_restated_request_is_a_new_task_only_with_another_gold_answer():
    """Near-duplicates are the same task: a request that reads like a pool task's with the same gold call (here
    with a word added) or the same request text (case and punctuation aside) is rejected; the same request with
    other values, so another gold call, is a new task."""
    seed = next(t for t in load_bfcl_tasks("simple_python") if t.id == "simple_python_43")
    demo = BFCL.as_generation(seed)
    assert "20 Amperes" in demo["question"] and demo["answer"]["arguments"]["current"] == 20

    def task(question, **arguments):
        text = json.dumps({**demo, "question": question, "answer": {"arguments": {**demo["answer"]["arguments"],
                                                                                   **arguments}}})
        out = BFCL.parse_generated(text, "g", 0, seed)
        assert isinstance(out, Task), out
        return out

    same_call = task(demo["question"].replace("Calculate the", "Please calculate the"))
    assert BFCL.near_duplicate(same_call, [seed]).detail.endswith("the same gold answer")
    other_value = task(demo["question"].replace("20 Amperes", "35 Amperes"), current=35)
    assert BFCL.near_duplicate(other_value, [seed]) is None
    same_text = dataclasses.replace(other_value, prompt=seed.prompt.upper())
    assert BFCL.near_duplicate(same_text, [seed]).detail == f"the request of pool task {seed.id}"


def test_generation_prompt_holds_format_seeds_and_success_rate():
    seeds = load_bfcl_tasks("simple_python")[:2]
    msgs = BFCL.generation_messages(seeds, p_hat=0.25, alpha=0.5)
    assert msgs[0]["role"] == "system" and '"function"' in msgs[0]["content"]
    assert json.loads(msgs[2]["content"])["question"] == seeds[0].prompt
    assert "25%" in msgs[-1]["content"] and "50%" in msgs[-1]["content"]
