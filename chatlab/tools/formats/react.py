"""Qwen-1 ReAct tool calls (make_context's function calling).

An instruction listing the tools is prepended to the last user turn as
`{instruction}\\n\\nQuestion: {query}`; a call is `Thought: ...\\nAction: name\\nAction Input: {json}`
and generation stops at the stop word `Observation:`; the result continues the *same* assistant
turn as `\\nObservation: {result}`, and after the last result the turn is left open at
`\\nThought:` for the model to go on. One call per step: ReAct has no parallel calls.
"""
from __future__ import annotations

from typing import Sequence

from chatlab.errors import ChatlabError
from chatlab.tools.formats.base import (JINJA_ARGS, JINJA_CALLS, Bit, JinjaTurns, ToolFormat, Turn,
                                        data, dumps, jinja_format, lit, schema_grammar, text)
from chatlab.tools.react import ReActMachine
from chatlab.types import ToolCall, ToolSpec

THOUGHT, ACTION, INPUT, OBSERVATION, FINAL = (
    "Thought:", "Action:", "Action Input:", "Observation:", "Final Answer:")
QUESTION = "\n\nQuestion: "
TOOL_LINE = ("{name}: Call this tool to interact with the {human} API. What is the {human} API "
             "useful for? {description} Parameters: {parameters}")
INSTRUCTION = f"""Answer the following questions as best you can. You have access to the following APIs:

{{tools_text}}

Use the following format:

Question: the input question you must answer
{THOUGHT} you should always think about what to do
{ACTION} the action to take, should be one of [{{names}}]
{INPUT} the input to the action
{OBSERVATION} the result of the action
... (this {THOUGHT[:-1]}/{ACTION[:-1]}/{INPUT[:-1]}/{OBSERVATION[:-1]} can be repeated zero or more times)
{THOUGHT} I now know the final answer
{FINAL} the final answer to the original input question

Begin!"""


class ReActParser(ReActMachine):
    fmt = "react"
    THOUGHT, ACTION, INPUT, OBSERVATION, FINAL = (
        THOUGHT, "\n" + ACTION, "\n" + INPUT, "\n" + OBSERVATION, "\n" + FINAL)


def instruction(tools: Sequence[ToolSpec]) -> str:
    lines = [TOOL_LINE.format(name=t.name, human=t.name, description=t.description,
                              parameters=dumps({} if t.parameters is None else t.parameters)) for t in tools]
    return INSTRUCTION.format(tools_text="\n\n".join(lines), names=", ".join(t.name for t in tools))


class ReAct(ToolFormat):
    name = "react"
    description = "Qwen-1: Thought / Action / Action Input lines, results as Observation"
    trigger = ACTION + " "  # the forced call's first words; the parser sees it at a line start
    parallel_calls = False
    stop_words = (OBSERVATION,)
    parser_class = ReActParser

    # -- id level -------------------------------------------------------------------------
    def user_prefix(self, tools: Sequence[ToolSpec]) -> list[Bit]:
        return [data(instruction(tools), "tools"), text(QUESTION)]

    def call_bits(self, calls: Sequence[ToolCall], has_content: bool) -> list[Bit]:
        bits: list[Bit] = []
        for call in calls:
            bits += [text(f"\n{ACTION} ", "tool_call"), data(call.name, "tool_call"),
                     text(f"\n{INPUT} ", "tool_call"), data(call.arguments, "tool_call")]
        return bits

    def assistant_turns(self, i: int, content: str, body: list[Bit], calls: Sequence[ToolCall],
                        prev: str | None, nxt: str | None) -> list[Turn]:
        cont = prev == "tool"  # after a result the same assistant turn goes on
        if calls or cont:
            label = "" if content.startswith(THOUGHT) else THOUGHT + " "
            bits = [text(("\n" if cont else "") + label), data(content)]
        else:
            bits = [data(content)]
        return [Turn("assistant", bits + self.call_bits(calls, bool(content)),
                     header=not cont, footer=nxt != "tool")]

    def result_turns(self, i: int, content: str, prev: str | None,
                     nxt: str | None) -> tuple[list[Turn], bool]:
        if prev not in ("assistant", "tool"):
            raise ChatlabError(f"messages[{i}] is a tool result that follows no assistant tool "
                               "call; put the assistant message with tool_calls before it")
        bits = [text(f"\n{OBSERVATION} ", "tool_result"), data(content)]
        if nxt is None:
            bits.append(text("\n" + THOUGHT, "tool_result"))
        return [Turn("assistant", bits, header=False,
                     footer=nxt not in ("tool", "assistant", None))], nxt is None

    # -- Jinja ----------------------------------------------------------------------------
    def jinja_prelude(self) -> str:
        line = jinja_format(TOOL_LINE, {"name": "f.name", "human": "f.name",
                                        "description": "(f.description or '')",
                                        "parameters": "((f.parameters if f.parameters is defined else {})"
                                                      " | tojson)"})
        return ("{%- set ns.lines = '' %}{%- set ns.names = '' %}{%- for tool in tools or [] %}"
                "{%- set f = tool.function %}{%- set ns.lines = ns.lines + ('\\n\\n' if not loop.first else '') + "
                + line + " %}{%- set ns.names = ns.names + (', ' if not loop.first else '') + f.name %}"
                "{%- endfor %}{%- set instruction = " +
                jinja_format(INSTRUCTION, {"tools_text": "ns.lines", "names": "ns.names"}) + " %}")

    def jinja_user(self) -> str:
        return "(instruction + " + lit(QUESTION) + " + c if tools and i == ns.last_user else c)"

    def jinja_assistant(self, w: JinjaTurns) -> str:
        return ("{%- set cont = prev == 'tool' %}{%- if m.tool_calls or cont %}{%- set ns.body = "
                "('\\n' if cont else '') + ('' if ns.c.startswith(" + lit(THOUGHT) + ") else " +
                lit(THOUGHT + " ") + ") + ns.c %}{%- endif %}" + JINJA_CALLS + "{%- set ns.body = ns.body + " +
                lit(f"\n{ACTION} ") + " + f.name + " + lit(f"\n{INPUT} ") + " + " + JINJA_ARGS +
                " %}{%- endfor %}" + w.turn("assistant", "ns.body", header="not cont", footer="nxt != 'tool'"))

    def jinja_tool(self, w: JinjaTurns) -> str:
        return ("{%- if prev not in ('assistant', 'tool') %}{{- raise_exception('a tool result must follow "
                "an assistant tool call') }}{%- endif %}{{- " + lit(f"\n{OBSERVATION} ") + " + c }}"
                "{%- if not nxt %}{{- " + lit("\n" + THOUGHT) + " }}{%- set ns.open = true %}{%- endif %}" +
                w.footer("assistant", "nxt and nxt not in ('tool', 'assistant')"))

    # -- grammar: ends like the model would; the stop word cuts generation there ----------
    def call_tag(self, tool: ToolSpec) -> dict:
        return {"type": "tag", "begin": f"{ACTION} {tool.name}\n{INPUT} ",
                "content": schema_grammar(tool), "end": "\n" + OBSERVATION}


REACT = ReAct()
