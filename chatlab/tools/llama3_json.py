"""llama3-style JSON tool calls (format name "json").

Tools are JSON objects (indent 4) in the system turn; a call is the whole reply, a bare
`{"name": ..., "parameters": {...}}`, maybe after `<|python_tag|>`, several separated by "; ";
results are turns of the template's tool role (llama3's `ipython`). A call opens the reply, so
there is no trigger to wait for: tool_choice "auto" is not constrained.
"""
from __future__ import annotations

import json
from typing import Sequence

from chatlab.tools.format import (JINJA_ARGS, Bit, JinjaTurns, ToolFormat, calls_after_content, jinja_tools_block,
                                  json_call_bits, lit, schema_grammar, tools_block)
from chatlab.tools.jsonstyle import JsonCallParser
from chatlab.types import ToolCall, ToolSpec

PYTHON_TAG = "<|python_tag|>"
SEPARATOR = ";"
TOOLS_INTRO = ("You can call the functions below. To call one, answer with nothing but a JSON object "
        '{"name": function name, "parameters": object of argument names and values}.')
CALL_HEAD, CALL_ARGS, CALL_END = '{"name": "', '", "parameters": ', "}"


class JsonStyleParser(JsonCallParser):
    """A bare JSON object opens the reply (after an optional lead tag); ';' separates calls."""

    fmt = "json"
    lead_tags = (PYTHON_TAG,)
    separators = SEPARATOR


class Llama3Json(ToolFormat):
    name = "json"
    description = "llama3: the reply is a bare JSON call {\"name\", \"parameters\"}"
    content_with_calls = False
    parser_class = JsonStyleParser
    template_marks = ("ipython", PYTHON_TAG)  # llama3.1's tool role and its code-call tag

    def system_tools(self, tools: Sequence[ToolSpec], after_text: bool) -> list[Bit]:
        return tools_block(tools, after_text, TOOLS_INTRO, "", "\n\n", 4)

    def call_bits(self, calls: Sequence[ToolCall], has_content: bool) -> list[Bit]:
        return [b for j, call in enumerate(calls) for b in json_call_bits(
            call, SEPARATOR + " " if j else ("\n" if has_content else ""), CALL_HEAD, CALL_ARGS, CALL_END)]

    def jinja_system(self) -> str:
        return jinja_tools_block(TOOLS_INTRO, "", "\n\n", 4)

    def jinja_assistant(self, w: JinjaTurns) -> str:
        return calls_after_content(w, "(" + lit(SEPARATOR + " ") + " if not loop.first else ('\\n' if ns.c else '')) + "
                                   + lit(CALL_HEAD) + " + f.name + " + lit(CALL_ARGS) + " + " + JINJA_ARGS + " + "
                                   + lit(CALL_END))

    def call_tag(self, tool: ToolSpec) -> dict:
        return {"type": "tag", "begin": f'{{"name": {json.dumps(tool.name)}, "parameters": ',
                "content": schema_grammar(tool), "end": CALL_END}


JSON = Llama3Json()
