"""Qwen-1 ReAct tool calls (make_context's function calling): `Thought: ...\\nAction: name\\nAction
Input: {json}`, stopped at `Observation:`; the result goes on in the same assistant turn. The parser
holds a leading Thought until a call (whose content it is), a final answer or plain text follows."""
from __future__ import annotations

from typing import Sequence

from chatlab.errors import ChatlabError
from chatlab.tools.format import (JINJA_ARGS, JINJA_CALLS, Bit, JinjaTurns, ToolFormat, Turn, data, dumps,
                                  jinja_format, lit, schema_grammar, text)
from chatlab.tools.stream import CallAtEndParser, JsonObjectScanner, find_marker, is_json_object, split_safe
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


class ReActParser(CallAtEndParser):
    # THOUGHT starts the reply, the other markers start a line
    THOUGHT, ACTION, INPUT, OBSERVATION, FINAL = (
        THOUGHT, "\n" + ACTION, "\n" + INPUT, "\n" + OBSERVATION, "\n" + FINAL)
    MARKERS, opener = (ACTION, FINAL), ACTION

    def __init__(self, tools: Sequence[ToolSpec] = ()) -> None:
        super().__init__(tools)
        self.thought_parts: list[str] = []   # thought state: the held thought
        self.thought_tail = ""     # its last characters, where a marker may have begun
        self.thought: str | None = None
        self.said = False          # plain state: content already emitted

    def _held(self) -> str:
        if self.state == "plain" and not self.said:
            return self.pending[1:]   # after the virtual newline, which was never fed
        parts = {"thought": self.thought_parts, "call": self.call_parts}.get(self.state, [])
        return "".join(parts) + self.pending

    def _in_start(self, final: bool) -> None:
        if self.THOUGHT.startswith(self.pending) and not final:
            return
        if self.pending.startswith(self.THOUGHT):
            self.state = "thought"
            return self._in_thought(final)
        # a virtual newline lets the line markers match at the very start
        self.pending, self.state = "\n" + self.pending, "plain"
        self._in_plain(final)

    def _in_thought(self, final: bool) -> None:
        # search only the new text plus a tail a marker may straddle, so a long thought stays linear
        self.thought_parts.append(self.pending)
        self.pending = ""
        tail = self.thought_tail + self.thought_parts[-1]
        hit = find_marker(tail, self.MARKERS)
        if hit is None:
            self.thought_tail = tail[-(len(self.FINAL) - 1):]
            if final:              # a thought and nothing else: give it back as it was
                self._content("".join(self.thought_parts))
            return
        held = "".join(self.thought_parts)
        pos, marker = len(held) - len(tail) + hit[0], hit[1]
        if marker == self.FINAL:
            self.state, self.pending = "answer", held[pos + len(self.FINAL):]
            return self._in_answer(final)
        self.thought = held[:pos]
        self._to_call(held[pos:])

    def _in_plain(self, final: bool) -> None:
        hit = find_marker(self.pending, self.MARKERS)
        if hit is None:
            safe, self.pending = (self.pending, "") if final else split_safe(self.pending, self.MARKERS)
            self._say(safe)
            return
        pos, marker = hit
        if marker == self.FINAL:
            self._say(self.pending[:pos] + ("\n" if self.said or pos > 1 else ""))
            self.state, self.pending = "answer", self.pending[pos + len(self.FINAL):]
            return self._in_answer(final)
        kept = self.pending[:pos].rstrip()
        self._say(kept)
        self.thought = None
        self._to_call(self.pending[len(kept):] if self.said else self.pending[max(len(kept), 1):])

    def _say(self, text: str) -> None:
        if not self.said and text.startswith("\n"):
            text = text[1:]        # the virtual newline is not content
        self.said = self.said or bool(text)
        self._content(text)

    def _in_answer(self, final: bool) -> None:
        text = self.pending.lstrip(" ")
        if text or final:          # leading spaces after the final-answer label are the label's
            self.state = "content"
            self._content(text)
        self.pending = ""

    def _parse_call(self) -> None:
        region = "".join(self.call_parts)
        original = (self.thought or "") + region
        body = "\n" + region.lstrip("\n")   # the region starts at the action marker, newline or not
        stop = body.find(self.OBSERVATION)   # a hallucinated observation is not the call's
        body = body if stop < 0 else body[:stop]
        name_at, input_at = body.rfind(self.ACTION), body.rfind(self.INPUT)
        if self.cut and self._kept_when_cut(body, name_at, input_at, original):
            return
        if input_at < name_at:
            why = f"the model wrote `{self.ACTION.strip()}` without `{self.INPUT.strip()}`"
            return self._reject(None, why, original)
        name = body[name_at + len(self.ACTION):input_at].strip()
        # the start of a stop word that the output ended in is markup too
        arguments = split_safe(body[input_at + len(self.INPUT):], (self.OBSERVATION,))[0].strip()
        if name not in self.names:
            return self._reject(None, self.unknown_tool(name), original)
        if not is_json_object(arguments):
            return self._reject(None, f"`{self.INPUT.strip()}` is not a JSON object: {arguments[:80]!r}", original)
        self._say_thought()
        self._call(name, arguments)

    def _say_thought(self) -> None:
        if self.thought is not None:
            self._content(self.thought[len(self.THOUGHT):].strip())

    def _kept_when_cut(self, body: str, name_at: int, input_at: int, original: str) -> bool:
        """The length limit ended the output inside the call: True when its name line names a
        tool and its input, if begun, still starts a JSON object (the call is cut short)."""
        after = name_at + len(self.ACTION)
        if input_at > name_at:
            name, arguments = body[after:input_at].strip(), body[input_at + len(self.INPUT):].lstrip()
        elif "\n" in body[after:]:
            name, arguments = body[after:body.index("\n", after)].strip(), ""
        else:
            return False           # the name may still have been growing
        scan = JsonObjectScanner()
        scan.feed(arguments)
        if name not in self.names or scan.done or scan.state == "invalid":
            return False
        self._say_thought()
        self._call(name, arguments, original)
        return True


def instruction(tools: Sequence[ToolSpec]) -> str:
    lines = [TOOL_LINE.format(name=t.name, human=t.name, description=t.description,
                              parameters=dumps({} if t.parameters is None else t.parameters)) for t in tools]
    return INSTRUCTION.format(tools_text="\n\n".join(lines), names=", ".join(t.name for t in tools))


class ReAct(ToolFormat):
    name = "react"
    trigger = ACTION + " "  # the forced call's first words; the parser sees it at a line start
    parallel_calls = False
    stop_words = (OBSERVATION,)
    parser_class = ReActParser

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
