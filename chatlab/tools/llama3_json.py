"""llama3-style JSON tool calls (format name "json").

Tools are JSON objects (indent 4) in the system turn; a call is the whole reply, a bare
`{"name": ..., "parameters": {...}}`, maybe after `<|python_tag|>`, several separated by "; ";
results are turns of the template's tool role (llama3's `ipython`). A call opens the reply, so
there is no trigger to wait for: tool_choice "auto" is not constrained.
"""
from __future__ import annotations

from chatlab.tools.format import JsonCallFormat, lit
from chatlab.tools.jsonstyle import JsonCallParser

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


class Llama3Json(JsonCallFormat):
    name = "json"
    description = "llama3: the reply is a bare JSON call {\"name\", \"parameters\"}"
    content_with_calls = False
    parser_class = JsonStyleParser
    template_marks = ("ipython", PYTHON_TAG)  # llama3.1's tool role and its code-call tag
    tools_head, tools_sep, tools_indent = TOOLS_INTRO, "\n\n", 4
    call_head, call_args, call_end, call_sep = CALL_HEAD, CALL_ARGS, CALL_END, SEPARATOR + " "
    jinja_lead = "(" + lit(SEPARATOR + " ") + " if not loop.first else ('\\n' if ns.c else ''))"


JSON = Llama3Json()
