"""BFCL: the gold policy passes every satisfiable entry of every single-turn category under bfcl-eval's own checker,
our reward equals bfcl-eval's verdict on every gold answer, and perturbed gold answers score 0."""
from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from genenv.benchmarks.bfcl.env import SINGLE_TURN_CATEGORIES, BFCLEnv, gold_calls
from genenv.envs.parsing import ToolCall
from genenv.envs.wrappers import TextActionWrapper
from genenv.benchmarks.bfcl.checker import (CHECKER_MODEL_NAME, IRRELEVANCE_CATEGORIES, RELEVANCE_CATEGORIES, UNSATISFIABLE_IDS,
                                 bfcl_check,
                                 language_of)

AST_CATEGORIES = [c for c in SINGLE_TURN_CATEGORIES if c not in IRRELEVANCE_CATEGORIES + RELEVANCE_CATEGORIES]


@pytest.mark.parametrize("category", SINGLE_TURN_CATEGORIES)
def test_gold_policy_passes_every_satisfiable_entry(category):
    env = TextActionWrapper(BFCLEnv(category=category))
    failed = []
    for i, task in enumerate(env.unwrapped.tasks):
        env.reset(options={"task_index": i})
        _, reward, _, _, info = env.step(BFCLEnv.gold_text(task))
        if reward != 1.0:
            failed.append((task.id, info["error"][:150]))
    unsat = {tid for tid, _ in failed} & set(UNSATISFIABLE_IDS)
    assert [f for f in failed if f[0] not in UNSATISFIABLE_IDS] == []
    # the documented answer-key defects really fail (if they are in the data under test)
    present = {t.id for t in env.unwrapped.tasks} & set(UNSATISFIABLE_IDS)
    assert unsat == present


def test_official_reading_is_bfcl_evals_qwen_decoder():
    """parsing=official reads exactly what bfcl-eval's QwenFCHandler reads (newline-delimited <tool_call> blocks,
    undecodable blocks dropped); parsing=lenient also reads inline blocks, JSON and Python call syntax."""
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler

    task = BFCLEnv(category="simple_python", limit=1).tasks[0]
    call = gold_calls(task)[0]
    payload = json.dumps(call.to_json())
    texts = {  # text: (read as the call under official, under lenient)
        f"<tool_call>\n{payload}\n</tool_call>": (True, True),
        f"<tool_call>\n{payload}\n</tool_call>\n<tool_call>\nnot json\n</tool_call>": (True, False),  # dropped / refused
        f"<tool_call>{payload}</tool_call>": (False, True),         # no newlines: bfcl-eval's pattern misses it
        payload: (False, True), f"[{call.to_python()}]": (False, True), f"```json\n{payload}\n```": (False, True),
    }
    for text, (official, lenient) in texts.items():
        assert (QwenFCHandler._extract_tool_calls(text) != []) is official, text  # the library, called directly
        for parsing, want in (("official", float(official)), ("lenient", float(lenient))):
            env = TextActionWrapper(BFCLEnv(tasks=[task], parsing=parsing))
            env.reset(options={"task_index": 0})
            assert env.step(text)[1] == want, (parsing, text)
    irrelevant = BFCLEnv(category="irrelevance", limit=1).tasks[0]
    env = TextActionWrapper(BFCLEnv(tasks=[irrelevant], parsing="official"))
    env.reset(options={"task_index": 0})
    assert env.step(f"<tool_call>{payload}</tool_call>")[1] == 1.0  # officially no call: correct for irrelevance


@pytest.mark.parametrize("category", AST_CATEGORIES)
def test_reward_agrees_with_bfcl_eval_checker_called_directly(category):
    from bfcl_eval.constants.enums import Language, ReturnFormat
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.model_handler.utils import default_decode_ast_prompting

    lang = {"python": Language.PYTHON, "java": Language.JAVA, "javascript": Language.JAVASCRIPT}[language_of(category)]
    env = BFCLEnv(category=category)
    for task in env.tasks:
        calls = gold_calls(task)
        direct = ast_checker(task.tools, [c.to_bfcl() for c in calls], task.gold, lang, category,
                             CHECKER_MODEL_NAME)["valid"]
        env.reset(options={"task_id": task.id})
        _, reward, *_ = env.step(BFCLEnv.parse_lenient(BFCLEnv.gold_text(task)))
        assert reward == float(direct), task.id
        if lang == Language.PYTHON:  # bfcl-eval's own decoder reads the same calls from Python syntax
            decoded = default_decode_ast_prompting("[" + ", ".join(c.to_python() for c in calls) + "]",
                                                   ReturnFormat.PYTHON)
            assert decoded == [c.to_bfcl() for c in calls], task.id


def _wrong(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 12345.5
    if isinstance(value, str):
        return value + "zzqx"
    if isinstance(value, list):
        return value + ["zzqx"]
    if isinstance(value, dict):
        return {**value, "zzqx": 1}
    return "zzqx"


def _wrong_value_calls(task):
    """Gold calls with one parameter of the first call set to a value outside its allowed list (encoded for the
    task's language like the gold), or ``None`` when no parameter has such a value."""
    (name, params), = task.gold[0].items()
    for key in sorted(params):
        allowed = [v for v in params[key] if v != ""]
        if not allowed:
            continue
        wrong = _wrong(allowed[0])
        if wrong in params[key]:
            continue
        gold = copy.deepcopy(task.gold)
        gold[0][name][key] = [wrong]
        return gold_calls(dataclasses.replace(task, gold=gold))
    return None


def _perturbations(task):
    calls = gold_calls(task)
    first = calls[0]
    schema = next(f for f in task.tools if f["name"] == first.name)
    out = {"wrong_name": [ToolCall(first.name + "_zz", first.arguments)] + calls[1:],
           "extra_call": calls + [calls[0]]}
    wrong = _wrong_value_calls(task)
    if wrong is not None:
        out["wrong_value"] = wrong
    required = [r for r in schema["parameters"].get("required", []) if r in first.arguments]
    if required:
        args = copy.deepcopy(first.arguments)
        del args[required[0]]
        out["missing_required"] = [ToolCall(first.name, args)] + calls[1:]
    return out


@pytest.mark.parametrize("category", AST_CATEGORIES)
def test_perturbed_gold_answers_score_zero(category):
    env = BFCLEnv(category=category)
    accepted, counts = [], {}
    for task in env.tasks:
        if task.id in UNSATISFIABLE_IDS:
            continue
        for kind, calls in _perturbations(task).items():
            env.reset(options={"task_id": task.id})
            _, reward, *_ = env.step(calls)
            counts[kind] = counts.get(kind, 0) + 1
            if reward != 0.0:
                accepted.append((task.id, kind))
    assert counts.get("wrong_name") and counts.get("extra_call") and counts.get("wrong_value")
    assert accepted == []


def test_irrelevance_scores_refusals_and_penalises_calls():
    env = TextActionWrapper(BFCLEnv(category="irrelevance", limit=5))
    env.reset(options={"task_index": 0})
    assert env.step("No function fits this request.")[1] == 1.0
    env.reset(options={"task_index": 0})
    fn = env.unwrapped.task.tools[0]["name"]
    _, reward, _, _, info = env.step(f'<tool_call>\n{{"name": "{fn}", "arguments": {{}}}}\n</tool_call>')
    assert reward == 0.0 and info["error_type"] == "irrelevance_error:decoder_success"


def test_no_call_and_malformed_calls_get_the_official_runners_error_types():
    """bfcl-eval's runner passes an empty call list to the AST checker (``wrong_count``) and flags only lists of
    non-``{name: {args}}`` items as ``decoder_wrong_output_format``; ours reports the same labels."""
    fn = [{"name": "f", "description": "d",
           "parameters": {"type": "dict", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}]
    gold = [{"f": {"x": [1]}}]
    assert bfcl_check([], fn, gold, "simple_python").error_type == "simple_function_checker:wrong_count"
    assert bfcl_check([], fn, gold * 2, "parallel").error_type == "parallel_function_checker_no_order:wrong_count"
    for calls in ([{"f": 1}], ["f(x=1)"], [{"f": {"x": 1}, "g": {}}]):
        result = bfcl_check(calls, fn, gold, "simple_python")
        assert not result.valid and result.error_type == "ast_decoder:decoder_wrong_output_format"
    assert bfcl_check([{"f": {"x": 1}}], fn, gold, "simple_python").valid
