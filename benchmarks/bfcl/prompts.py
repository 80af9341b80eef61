"""What the BFCL agent is shown besides the entry: system instructions, one worked example turn (shared by the
single-turn and multi-turn envs) and the per-language notes for Java / JavaScript categories."""

SYSTEM_PROMPT = (
    "You are an expert in composing functions. You are given a request and a set of functions in JSON format. "
    "Make one or more function calls to achieve the purpose, each as "
    '<tool_call>{"name": <function name>, "arguments": <JSON object of arguments>}</tool_call>, and nothing else. '
    "If none of the functions can be used, reply in plain text that no function applies, without any call."
)
# One worked example as a chat turn (small models follow a demonstrated turn far better than an instruction;
# see shared/NOTES-verl-and-cpu.md). It is not taken from any BFCL entry.
DEMO_FUNCTIONS = [{"name": "get_weather", "description": "Current weather of a city.", "parameters": {
    "type": "dict", "properties": {"city": {"type": "string", "description": "City name."},
                                   "unit": {"type": "string", "description": "celsius or fahrenheit"}},
    "required": ["city"]}}]
DEMO_REQUEST = "What's the weather in Paris in celsius?"
DEMO_REPLY = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}</tool_call>'

LANGUAGE_NOTE = {
    "python": "",
    "java": "These are Java methods: give every argument value as a JSON string holding Java source, e.g. "
            "\"true\", \"42\", \"3.5f\", \"new ArrayList<>(Arrays.asList(\\\"a\\\", \\\"b\\\"))\".",
    "javascript": "These are JavaScript functions: give every argument value as a JSON string holding "
                  "JavaScript source, e.g. \"true\", \"42\", \"'text'\", \"[1, 2]\", \"{key: 'v'}\".",
}


