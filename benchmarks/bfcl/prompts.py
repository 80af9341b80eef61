"""What the BFCL agent is shown besides the entry: system instructions, one worked example turn (shared by the
single-turn and multi-turn envs), the per-language notes for Java / JavaScript categories, and how calls are
written as text (`calls_text`: the Qwen function-calling format, ``<tool_call>\n{json}\n</tool_call>``,
which bfcl-eval's ``QwenFCHandler`` reads under ``parsing="official"``)."""
import json

from genenv.envs.parsing import ToolCall

__all__ = ["DEMO_FUNCTIONS", "DEMO_REPLY", "DEMO_REQUEST", "LANGUAGE_NOTE", "SYSTEM_PROMPT", "calls_text"]

SYSTEM_PROMPT = (
    "You are an expert in composing functions. You are given a request and a set of functions in JSON format. "
    "Make one or more function calls to achieve the purpose, each as "
    '<tool_call>\n{"name": <function name>, "arguments": <JSON object of arguments>}\n</tool_call>, and nothing '
    "else. "
    "If none of the functions can be used, reply in plain text that no function applies, without any call."
)
# One worked example as a chat turn (small models follow a demonstrated turn far better than an instruction;
# see shared/NOTES-verl-and-cpu.md). It is not taken from any BFCL entry.
DEMO_FUNCTIONS = [{"name": "get_weather", "description": "Current weather of a city.", "parameters": {
    "type": "dict", "properties": {"city": {"type": "string", "description": "City name."},
                                   "unit": {"type": "string", "description": "celsius or fahrenheit"}},
    "required": ["city"]}}]
DEMO_REQUEST = "What's the weather in Paris in celsius?"
DEMO_REPLY = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'

LANGUAGE_NOTE = {
    "python": "",
    "java": "These are Java methods: give every argument value as a JSON string holding Java source, e.g. "
            "\"true\", \"42\", \"3.5f\", \"new ArrayList<>(Arrays.asList(\\\"a\\\", \\\"b\\\"))\".",
    "javascript": "These are JavaScript functions: give every argument value as a JSON string holding "
                  "JavaScript source, e.g. \"true\", \"42\", \"'text'\", \"[1, 2]\", \"{key: 'v'}\".",
}




def calls_text(calls: list[ToolCall]) -> str:
    """Calls as model text in the demonstrated format: one ``<tool_call>\\n{"name", "arguments"}\\n</tool_call>``
    block per call, blocks on consecutive lines (the Qwen2.5 chat template's tool-call format)."""
    return "\n".join(f"<tool_call>\n{json.dumps(c.to_json(), ensure_ascii=False)}\n</tool_call>" for c in calls)
