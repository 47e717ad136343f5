"""How each tool-call format writes tool definitions, earlier calls and their results.

Four formats, each the one its model family was trained on:
- "react" (Qwen-1): an instruction listing the tools, prepended to the last user turn as
  `{instruction}\\n\\nQuestion: {query}`; calls are `Thought/Action/Action Input` lines and
  results continue the same assistant turn as `\\nObservation: {result}`.
- "hermes" (Qwen2.5, Qwen3): tools as JSON lines inside `<tools></tools>` in the system turn,
  calls as `<tool_call>` JSON, results in a user turn inside `<tool_response>`.
- "chatglm3": the system turn's content followed by the tools as JSON (indent 4); a call is an
  assistant turn whose metadata line is the tool name; results are `<|observation|>` turns.
- "json" (llama3): tools as JSON objects in the system turn, calls as bare JSON objects.
Tool definitions and arguments are data from the client, so they are encoded as plain text.
"""
from __future__ import annotations

import json
from typing import Any

from chatlab.errors import ChatlabError

REACT_TOOL = ("{name}: Call this tool to interact with the {human} API. What is the {human} API "
              "useful for? {description} Parameters: {parameters}")
REACT_INSTRUCTION = """Answer the following questions as best you can. You have access to the following APIs:

{tools_text}

Use the following format:

Question: the input question you must answer
Thought: you should always think about what to do
Action: the action to take, should be one of [{names}]
Action Input: the input to the action
Observation: the result of the action
... (this Thought/Action/Action Input/Observation can be repeated zero or more times)
Thought: I now know the final answer
Final Answer: the final answer to the original input question

Begin!"""
HERMES_HEAD = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
HERMES_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name and "
               "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
               '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')
CHATGLM3_SYSTEM = "Answer the following questions as best as you can. You have access to the following tools:"
JSON_HEAD = ("You can call the functions below. To call one, answer with nothing but a JSON object "
             '{"name": function name, "parameters": object of argument names and values}.')
FORMATS = ["react", "hermes", "chatglm3", "json"]


def normalize_tools(tools: Any = None, functions: Any = None) -> list[dict]:
    """OpenAI `tools` (or legacy `functions`) as a list of {"type": "function", "function": {...}}."""
    items: list[dict] = []
    for label, value, legacy in (("tools", tools, False), ("functions", functions, True)):
        if value is None:
            continue
        if not isinstance(value, list):
            raise ChatlabError(f"{label} must be a list, got {type(value).__name__}; pass "
                               '[{"type": "function", "function": {"name": ..., "parameters": {...}}}]')
        for i, tool in enumerate(value):
            fn = tool if legacy else (tool.get("function") if isinstance(tool, dict) else None)
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"].strip():
                raise ChatlabError(f"{label}[{i}] has no name; each tool needs "
                                   '{"type": "function", "function": {"name": "...", "parameters": {...}}}')
            params = fn.get("parameters", {"type": "object", "properties": {}})
            _check_schema(fn["name"], params)
            items.append({"type": "function", "function": dict(fn)})
    return items


def _check_schema(name: str, schema: Any) -> None:
    from chatlab.tools.schema import check_schema

    try:
        check_schema(schema)
    except ChatlabError as err:
        raise ChatlabError(f"tool {name!r} has an invalid JSON schema in 'parameters': {err}; "
                           "fix the schema") from None


def dumps(value: Any, indent: int | None = None) -> str:
    """JSON exactly as Hugging Face's `tojson` filter writes it (so exports match)."""
    return json.dumps(value, ensure_ascii=False, indent=indent)


def react_instruction(tools: list[dict]) -> str:
    lines, names = [], []
    for tool in tools:
        fn = tool["function"]
        lines.append(REACT_TOOL.format(name=fn["name"], human=fn["name"],
                                       description=fn.get("description") or "",
                                       parameters=dumps(fn.get("parameters", {}))))
        names.append(fn["name"])
    return REACT_INSTRUCTION.format(tools_text="\n\n".join(lines), names=", ".join(names))


def py_literal(value: Any) -> str:
    """A JSON value as ChatGLM3's `tool_call(k=v)` writes it (True/False/None at top level)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if value is None:
        return "None"
    return dumps(value)


def chatglm3_call(args: dict) -> str:
    kwargs = ", ".join(f"{k}={py_literal(v)}" for k, v in args.items())
    return f"```python\ntool_call({kwargs})\n```"


def function_defs(tools: list[dict]) -> list[dict]:
    return [t["function"] for t in tools]
