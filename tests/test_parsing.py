"""The shared action parser: accepted forms, and no exception on any input (property test, >= 1,000 inputs)."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genenv.envs.parsing import ActionParseError, ToolCall, parse_free_text, parse_tool_calls


def test_tool_call_tags_json_list_and_python_syntax_parse_to_the_same_calls():
    want = [ToolCall("math.hypot", {"x": 4, "y": 5}), ToolCall("f", {"s": "a,b", "l": [1, 2.5], "d": {"k": None}})]
    tags = "".join(f"<tool_call>{json.dumps(c.to_json())}</tool_call>\n" for c in want)
    json_list = json.dumps([c.to_json() for c in want])
    python = "[" + ", ".join(c.to_python() for c in want) + "]"
    fenced = "Sure!\n```json\n" + json_list + "\n```"
    for text in (tags, json_list, python, fenced, "<think>hmm</think>" + tags):
        assert parse_tool_calls(text) == want, text


def test_openai_shape_string_arguments_and_api_bank_prefix():
    assert parse_tool_calls('{"function": {"name": "g", "arguments": "{\\"a\\": 1}"}}') == [ToolCall("g", {"a": 1})]
    assert parse_tool_calls("API-Request: [ToolSearcher(keywords='weather')]") == [
        ToolCall("ToolSearcher", {"keywords": "weather"})]
    assert parse_tool_calls("[]") == []


@pytest.mark.parametrize("text,reason", [
    ("", "empty"),
    ("I cannot help with that.", "no tool call"),
    ("__import__('os').system('rm -rf /')", "dotted identifier"),
    ("os.system('rm -rf /')", "positional"),
    ("f(x=__import__('os').getcwd())", "not a literal"),
    ("f(x=open('/etc/passwd').read())", "not a literal"),
    ('<tool_call>{"name": "f", "arguments": [1]}</tool_call>', "must be an object"),
    ('<tool_call>{"name": "f", "arguments": {"a": </tool_call>', "malformed"),
    ("x" * 30_000, "too long"),
])
def test_malformed_outputs_raise_parse_error_with_reason(text, reason):
    with pytest.raises(ActionParseError, match=reason):
        parse_tool_calls(text)


def test_free_text_answer_extraction():
    assert parse_free_text("Let me think.\nAnswer: James Madison\nbecause...") == "James Madison"
    assert parse_free_text("<think>x</think><answer> Titan IIIE </answer>") == "Titan IIIE"
    assert parse_free_text("  Paris  ") == "Paris"
    with pytest.raises(ActionParseError):
        parse_free_text("Answer:   \n  ")


ADVERSARIAL = [
    "[" * 5000, "{" * 5000 + "}" * 5000, "f(" * 3000, "1" * 5000, "f(x=" + "9" * 5000 + ")",
    "f(x=1e999999)", "f(x=(1,)*10**9)", "f(x=[1]*10**9)", "lambda: 0", "f(**{'a': 1})", "a.b.c(d=1)(e=2)",
    '<tool_call>{"name": "\\ud800", "arguments": {}}</tool_call>', "\x00\x01\x02", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢(x='☃')",
    '{"name": 5}', '{"name": "f", "arguments": {"1": 1}}', "[f(a=1), 3]", "```json\n{```", "<tool_call>",
    "exec('import os')", "f(x=b'bytes')", "f(x={1, 2})", "f(x=...)", "import os", "os.system('ls')",
]


@settings(max_examples=1000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(
    st.text(max_size=300),
    st.sampled_from(ADVERSARIAL),
    st.builds(lambda a, b: a + b, st.sampled_from(ADVERSARIAL), st.text(max_size=50)),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                 lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                 max_leaves=20).map(lambda v: json.dumps({"name": "f", "arguments": v}, allow_nan=True)),
))
def test_parser_and_rewards_never_raise_on_any_model_output(text):
    from genenv.benchmarks.bamboogle.env import BamboogleEnv
    from genenv.envs.base import InvalidAction
    from genenv.benchmarks.bfcl.env import BFCLEnv
    from genenv.benchmarks.bfcl.checker import bfcl_check
    from genenv.rewards.text import exact_match, fuzz_ratio, token_f1

    try:
        calls = parse_tool_calls(text)
        assert isinstance(calls, list) and all(isinstance(c, ToolCall) for c in calls)
    except ActionParseError:
        calls = None
    action = BFCLEnv.parse_lenient(text)
    assert isinstance(action, (list, InvalidAction))
    fn = [{"name": "f", "description": "", "parameters": {"type": "dict", "properties": {
        "a": {"type": "integer"}}, "required": ["a"]}}]
    res = bfcl_check(None if calls is None else [c.to_bfcl() for c in calls], fn, [{"f": {"a": [1]}}],
                     "simple_python", "x")
    assert res.valid in (True, False)
    answer = BamboogleEnv.parse_lenient(text)
    if isinstance(answer, str):
        for metric in (exact_match, token_f1, fuzz_ratio):
            assert 0.0 <= metric(answer, "George VI") <= 1.0


def test_api_bank_request_inside_prose_and_toolrl_json_lines():
    text = "Sure.\nAPI-Request: [QueryStock(stock_code='AAPL', date='2022-01-05')]->182.6\nThe price is 182.6."
    assert parse_tool_calls(text) == [ToolCall("QueryStock", {"stock_code": "AAPL", "date": "2022-01-05"})]
    block = ('<think>two calls</think>\n<tool_call>\n{"name": "A", "parameters": {"x": "1"}}\n'
             '{"name": "B", "parameters": {}}\n</tool_call>\n<response>done</response>')
    assert parse_tool_calls(block) == [ToolCall("A", {"x": "1"}), ToolCall("B", {})]


@pytest.mark.parametrize("text", [
    '<tool_call>{"name": "f", "arguments": {"x": ' + "9" * 5000 + "}}</tool_call>",
    '{"name": "f", "arguments": "{\\"x\\": ' + "9" * 5000 + '}"}',
    "API-Request: [f(x=" + "9" * 5000 + ")]",
    "f(x=0x" + "f" * 5000 + ")",
    "f(x=" + "[" * 40 + "]" * 40 + ")",
    '{"name": "f", "arguments": {"x": ' + "[" * 40 + "]" * 40 + "}}",
])
def test_huge_numbers_and_deep_nesting_are_parse_errors(text):
    """An integer literal beyond Python's 4,300-digit int-string limit, or nesting past MAX_NESTING levels, is a
    parse error (numbers are bounded to MAX_NUMBER_CHARS characters in every parser), never a ValueError."""
    with pytest.raises(ActionParseError):
        parse_tool_calls(text)


def test_parse_literal_bounds_numbers_and_nesting_but_keeps_ordinary_values():
    from genenv.envs.parsing import MAX_NESTING, MAX_NUMBER_CHARS, check_value, loads_json, parse_literal

    for text in ('[{"days": ' + "1" * 4301 + "}]", "[{'days': " + "1" * 5000 + "}]", "[{'days': 0x" + "f" * 9000 + "}]",
                 "[" * (MAX_NESTING + 5) + "]" * (MAX_NESTING + 5), "[" * 100_000):
        with pytest.raises(ActionParseError):
            parse_literal(text)
    assert parse_literal('[{"days": 1, "cost": ' + "9" * MAX_NUMBER_CHARS + "}]")[0]["cost"] == int("9" * 100)
    assert parse_literal("[" * MAX_NESTING + "]" * MAX_NESTING) is not None
    assert loads_json('{"a": [1.5, -2, "' + "9" * 5000 + '"]}')["a"][2] == "9" * 5000  # digits in a string are text
    with pytest.raises(ActionParseError):
        check_value(1 << 400)
    from genenv.benchmarks.task_writer import extract_json_object
    assert extract_json_object('{"days": ' + "7" * 5000 + "}").reason == "invalid_json"
