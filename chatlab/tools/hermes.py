"""Hermes tool calls (Qwen2.5, Qwen3, and ChatML models without a format of their own).

Tools are JSON lines inside `<tools></tools>` in the system turn; a call is
`<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>` (several blocks: parallel
calls); results go back in a user turn inside `<tool_response>`, consecutive results sharing
it. The parser also takes a bare JSON call at the start (small models drop the tags) and a
missing close tag once the object is complete.
"""
from __future__ import annotations

from chatlab.tools.format import JinjaTurns, JsonCallFormat, Turn, data, lit, text
from chatlab.tools.jsonstyle import JsonCallParser

OPEN, CLOSE = "<tool_call>", "</tool_call>"
RESULT_OPEN, RESULT_CLOSE = "<tool_response>", "</tool_response>"
TOOLS_HEAD = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOLS_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name and "
        f"arguments within {OPEN}{CLOSE} XML tags:\n{OPEN}\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n' + CLOSE)
CALL_HEAD, CALL_ARGS, CALL_END = OPEN + '\n{"name": "', '", "arguments": ', "}\n" + CLOSE


class HermesParser(JsonCallParser):
    fmt = "hermes"
    open_tag = opener = OPEN
    close_tag = CLOSE


class Hermes(JsonCallFormat):
    name = "hermes"
    description = "Qwen2.5/Qwen3: <tool_call> JSON blocks, results in <tool_response>"
    trigger = OPEN
    parser_class = HermesParser
    template_marks = (OPEN,)
    tools_head, tools_tail, tools_sep = TOOLS_HEAD, TOOLS_TAIL, "\n"
    call_head, call_args, call_end, call_sep = CALL_HEAD, CALL_ARGS, CALL_END, "\n"
    jinja_lead = "('\\n' if (not loop.first or ns.c) else '')"

    def is_result_text(self, content: str) -> bool:
        return content.startswith(RESULT_OPEN) and content.endswith(RESULT_CLOSE)

    def result_turns(self, i: int, content: str, prev: str | None,
                     nxt: str | None) -> tuple[list[Turn], bool]:
        bits = [text("\n" if prev == "tool" else "", "tool_result"),
                text(RESULT_OPEN + "\n", "tool_result"), data(content),
                text("\n" + RESULT_CLOSE, "tool_result")]
        return [Turn("user", bits, header=prev != "tool", footer=nxt != "tool")], False

    def jinja_is_query(self, c: str) -> str:
        return f"not ({c}.startswith({lit(RESULT_OPEN)}) and {c}.endswith({lit(RESULT_CLOSE)}))"

    def jinja_tool(self, w: JinjaTurns) -> str:
        return (w.header("user", "prev != 'tool'") + "{{- ('\\n' if prev == 'tool' else '') + " +
                lit(RESULT_OPEN + "\n") + " + c + " + lit("\n" + RESULT_CLOSE) + " }}" +
                w.footer("user", "nxt != 'tool'"))


HERMES = Hermes()
