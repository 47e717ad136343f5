"""Calls written as JSON objects: Hermes' tagged `<tool_call>` blocks and llama3's bare replies.

A call is announced once its name is known and its arguments object has begun, then its arguments'
raw text streams; one that proves malformed is withdrawn (ToolCallError) and its text is content.
Parser states: start (a `{` may be a bare call), content, call, close, bad (a tagged non-JSON call)."""
from __future__ import annotations

import json
from typing import Sequence

from chatlab.tools.format import JINJA_ARGS, JINJA_CALLS, Bit, JinjaTurns, ToolFormat, Turn, data, dumps, lit, schema_grammar, text
from chatlab.tools.stream import (CUT_OFF, WHITESPACE, JsonObjectScanner, StreamParser, find_marker,
                                  is_json_object, split_safe)
from chatlab.types import ToolCall, ToolSpec

ARGUMENT_KEYS = ("arguments", "parameters")  # Hermes/Qwen use the first, llama3 the second


class JsonCall:
    def __init__(self, parser: StreamParser, prefix: str, tagged: bool) -> None:
        self.parser = parser
        self.prefix = prefix          # text before the object (tag, whitespace): content if rejected
        self.tagged = tagged          # inside open/close tags: a call whatever it turns out to be
        self.committed = tagged       # bare JSON is a call only once it has name and arguments keys
        self.scan = JsonObjectScanner()
        self.index: int | None = None
        self.name: str | None = None
        self.sent = 0                 # offset in the object text up to which arguments were streamed

    @property
    def args_key(self) -> str | None:
        found = [k for k in ARGUMENT_KEYS if k in self.scan.spans]
        return min(found, key=lambda k: self.scan.spans[k][0]) if found else None

    def feed(self, chunk: str) -> int:
        used = self.scan.feed(chunk)
        self.committed = self.committed or ("name" in self.scan.spans and self.args_key is not None)
        if self.committed:
            self._stream()
        return used

    def held(self) -> str:
        """The object text not yet given out (with the prefix until the call is announced)."""
        text = self.scan.text()
        return self.prefix + text if self.index is None else text[self.sent:]

    def known_name(self) -> str | None:
        """The call's name once its string is complete and names one of the tools, else None."""
        raw = self.scan.value_text("name")
        if self.name is None and raw is not None:
            try:
                name = json.loads(raw)
            except ValueError:
                name = None
            self.name = name if isinstance(name, str) else ""
        return self.name if self.name and self.name in self.parser.names else None

    def _stream(self) -> None:
        scan, key = self.scan, self.args_key
        if self.index is None:
            name = self.known_name()
            if name is None or key is None:
                return
            start = scan.spans[key][0]
            if scan.length <= start or scan.slice(start, start + 1) != "{":
                return   # a stringified arguments value is decoded at the end instead
            self.index, self.sent = self.parser._start(name), start
        assert key is not None  # a call streams (has an index) only once its arguments began
        end = scan.spans[key][1] or scan.length
        if end > self.sent:
            self.parser._args(self.index, scan.slice(self.sent, end))
            self.sent = end

    def check(self) -> tuple[str | None, str | None]:
        """After the object closed: (arguments JSON text, None) or (None, why it is no call)."""
        text = self.scan.text()
        try:
            obj = json.loads(text)
        except ValueError as e:
            return None, f"the tool call is not valid JSON ({e})"
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None, 'the tool call JSON has no string "name"'
        if self.scan.duplicate in ("name", *ARGUMENT_KEYS):
            return None, f"the tool call JSON repeats the key {self.scan.duplicate!r}"
        if obj["name"] not in self.parser.names:
            return None, self.parser.unknown_tool(obj["name"])
        key = self.args_key
        if key is None:
            return "{}", None             # a tool without parameters, called without them
        value = obj[key]
        if isinstance(value, dict):
            return self.scan.value_text(key), None
        if isinstance(value, str) and is_json_object(value):  # some models send a JSON string
            return value, None
        return None, f'the tool call "{key}" must be a JSON object, got {json.dumps(value)[:60]}'

    def close(self) -> bool:
        """The object is complete: emit the call (True) or withdraw it as content (False)."""
        arguments, error = self.check()
        if error is not None or arguments is None:
            self.reject(error or "the tool call has no arguments")
            return False
        if self.index is None:
            self.index = self.parser._start(json.loads(self.scan.text())["name"])
            self.parser._args(self.index, arguments)
        self.parser._end(self.index)
        return True

    def reject(self, error: str, suffix: str = "") -> None:
        self.parser._reject(self.index, error, self.prefix + self.scan.text() + suffix)

    def cut_short(self, suffix: str) -> bool:
        """After the last text: True when the length limit ended the output inside this object
        after its known name (the call is announced, then withdrawn)."""
        name = self.known_name()
        if not self.parser.cut or self.scan.done or self.scan.state == "invalid" or name is None:
            return False
        if self.index is None:
            self.parser._call(name, "", self.prefix + self.scan.text() + suffix)
        else:
            self.reject(CUT_OFF, suffix)
        return True


class JsonCallParser(StreamParser):
    open_tag: str | None = None
    close_tag = ""                     # set with open_tag: the close and bad states follow it
    lead_tags: tuple[str, ...] = ()
    separators = ""                    # between bare calls, e.g. llama3's ';'

    def __init__(self, tools: Sequence[ToolSpec] = ()) -> None:
        super().__init__(tools)
        self.state = "start"
        self.after_call = False
        self.call: JsonCall | None = None
        self.searched = 0              # how much of pending the bad state already searched
        self.closed = False            # close state: the call was valid and has ended

    def _held(self) -> str:
        if self.state == "call" and self.call is not None:
            return self.call.held() + self.pending
        return self.pending

    def _consume(self, text: str, final: bool) -> None:
        self.pending += text
        while True:
            before = (self.state, len(self.pending))
            getattr(self, "_in_" + self.state)(final)
            if (self.state, len(self.pending)) == before:
                break
        if final and self.pending:    # only held text can remain; it is content
            self._content(self.pending if not self.after_call else self.pending.lstrip(WHITESPACE))
            self.pending = ""

    def _in_start(self, final: bool) -> None:
        s, strip = self.pending, WHITESPACE + (self.separators if self.after_call else "")
        rest = s.lstrip(strip)
        for tag in self.lead_tags:
            if rest.startswith(tag):
                rest = rest[len(tag):].lstrip(WHITESPACE)
            elif tag.startswith(rest) and rest and not final:
                return                 # could still be the lead tag
        if not rest and not final:
            return                     # only whitespace so far
        if rest.startswith("{"):
            cut = len(s) - len(rest)
            self.call = JsonCall(self, s[:cut], tagged=False)
            self.pending, self.state = s[cut:], "call"
            return
        if self.after_call:            # whitespace (and separators) after a call are not content
            s = s.lstrip(WHITESPACE)
        self.pending, self.state, self.after_call = s, "content", False

    def _in_content(self, final: bool) -> None:
        if self.open_tag is None:
            self._content(self.pending)
            self.pending = ""
            return
        hit = find_marker(self.pending, (self.open_tag,))
        if hit is None:
            safe, self.pending = split_safe(self.pending, (self.open_tag,))
            self._content(safe)
            return
        pos = hit[0]
        before = self.pending[:pos]
        kept = before.rstrip(WHITESPACE)
        self._content(kept)
        self.call = JsonCall(self, before[len(kept):] + self.open_tag, tagged=True)
        self.pending, self.state = self.pending[pos + len(self.open_tag):], "call"

    def _open_call(self) -> JsonCall:
        """The call being parsed: the call, close and bad states exist only while one is open."""
        assert self.call is not None, f"state {self.state!r} without an open call"
        return self.call

    def _in_call(self, final: bool) -> None:
        call = self._open_call()
        used = call.feed(self.pending)
        self.pending = self.pending[used:]
        scan = call.scan
        if not (scan.done or scan.state == "invalid" or final):
            return
        if final and call.cut_short(self.pending):
            self.pending, self.state = "", "content"
        elif not call.committed:       # a JSON object (or its start) that is not a call: content
            self._content(call.prefix + scan.text())
            self.state, self.after_call = "content", False
        elif scan.done and call.tagged:  # a valid call is final now; the close tag is then eaten
            self.state, self.closed = "close", call.check()[1] is None and call.close()
        elif scan.done and call.close():
            self.state, self.after_call = "start", True
        elif scan.done:                # the call was withdrawn: its text is content
            self.state = "content"
        elif scan.state == "invalid" and call.tagged:
            self.state = "bad"
        elif scan.state == "invalid":
            call.reject(scan.error or "invalid JSON")
            self.state = "content"
        else:
            call.reject("the output ended inside the tool call (unterminated JSON)", self.pending)
            self.pending, self.state = "", "content"

    def _in_close(self, final: bool) -> None:
        s, call, close_tag = self.pending, self._open_call(), self.close_tag
        rest = s.lstrip(WHITESPACE)
        if rest.startswith(close_tag):
            end = len(s) - len(rest) + len(close_tag)
        elif close_tag.startswith(rest) and not final:
            return                     # the close tag may still be arriving
        elif close_tag.startswith(rest) and rest:
            end = len(s)               # the output ended inside the close tag: markup, not content
        else:                          # a missing close tag is tolerated after a whole object
            end = 0
        if not self.closed:            # malformed: the tag goes back to content with the call
            call.reject(call.check()[1] or "malformed tool call", s[:end])
        self.pending = s[end:]
        self.state, self.after_call = ("start", True) if self.closed else ("content", False)

    def _in_bad(self, final: bool) -> None:
        # search only new text (minus a partial tag) so a long bad call stays linear
        call, close_tag = self._open_call(), self.close_tag
        hit = find_marker(self.pending, (close_tag,), max(0, self.searched - len(close_tag)))
        self.searched = len(self.pending)
        if hit is None and not final:
            return
        end = len(self.pending) if hit is None else hit[0] + len(close_tag)
        call.reject(call.scan.error or "invalid JSON", self.pending[:end])
        self.pending, self.state, self.searched = self.pending[end:], "content", 0


class JsonCallFormat(ToolFormat):
    """Calls as JSON objects (`call_head` name `call_args` arguments `call_end`), tools as JSON in
    the system turn (`tools_head`, each after `tools_sep`, `tools_tail`)."""

    tools_head = tools_tail = tools_sep = ""
    tools_indent: int | None = None
    call_head = call_args = call_end = ""
    call_sep = ""  # before each call but the first (the first follows content after a "\n")
    jinja_lead = "''"  # the Jinja expression for what comes before call `f`

    def system_tools(self, tools: Sequence[ToolSpec], after_text: bool) -> list[Bit]:
        bits = ([text("\n\n")] if after_text else []) + [text(self.tools_head, "tools")]
        for tool in tools:
            bits += [text(self.tools_sep, "tools"), data(dumps(tool.to_openai(), self.tools_indent), "tools")]
        if self.tools_tail:
            bits.append(text(self.tools_tail, "tools"))
        return bits

    def call_bits(self, calls: Sequence[ToolCall], has_content: bool) -> list[Bit]:
        bits: list[Bit] = []
        for j, call in enumerate(calls):
            lead = self.call_sep if j else ("\n" if has_content else "")
            bits += [text(lead + self.call_head, "tool_call"), data(call.name, "tool_call"),
                     text(self.call_args, "tool_call"), data(call.arguments, "tool_call"),
                     text(self.call_end, "tool_call")]
        return bits

    def jinja_system(self) -> str:
        indent = self.tools_indent
        dump = "tool | tojson" + ("" if indent is None else f"(indent={indent})")
        return ("{%- if tools %}{%- set ns.body = (sys + '\\n\\n' if sys is not none else '') + "
                + lit(self.tools_head) + " %}{%- for tool in tools %}{%- set ns.body = ns.body + "
                + lit(self.tools_sep) + " + " + dump + " %}{%- endfor %}"
                "{%- set ns.body = ns.body + " + lit(self.tools_tail) + " %}{%- endif %}")

    def jinja_assistant(self, w: JinjaTurns) -> str:
        call = (self.jinja_lead + " + " + lit(self.call_head) + " + f.name + "
                + lit(self.call_args) + " + " + JINJA_ARGS + " + " + lit(self.call_end))
        return (JINJA_CALLS + "{%- set ns.body = ns.body + " + call + " %}{%- endfor %}"
                + w.turn("assistant", "ns.body"))

    def call_tag(self, tool: ToolSpec) -> dict:
        # call_head ends and call_args starts with the quotes of the name, written as JSON here
        begin = self.call_head[:-1] + json.dumps(tool.name) + self.call_args[1:]
        return {"type": "tag", "begin": begin, "content": schema_grammar(tool),
                "end": self.call_end}


# Hermes (Qwen2.5, Qwen3, ChatML models): results in a user turn inside `<tool_response>`.
OPEN, CLOSE = "<tool_call>", "</tool_call>"
RESULT_OPEN, RESULT_CLOSE = "<tool_response>", "</tool_response>"
TOOLS_HEAD = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOLS_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name and "
        f"arguments within {OPEN}{CLOSE} XML tags:\n{OPEN}\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n' + CLOSE)
CALL_HEAD, CALL_ARGS, CALL_END = OPEN + '\n{"name": "', '", "arguments": ', "}\n" + CLOSE


class HermesParser(JsonCallParser):
    open_tag = opener = OPEN
    close_tag = CLOSE


class Hermes(JsonCallFormat):
    name = "hermes"
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


# llama3 (format "json"): a call is the whole reply, maybe after `<|python_tag|>`, several joined
# by "; ". No trigger: "auto" is not constrained.
PYTHON_TAG = "<|python_tag|>"


class Llama3JsonParser(JsonCallParser):
    lead_tags = (PYTHON_TAG,)
    separators = ";"


class Llama3Json(JsonCallFormat):
    name = "json"
    content_with_calls = False
    parser_class = Llama3JsonParser
    template_marks = ("ipython", PYTHON_TAG)  # llama3.1's tool role and its code-call tag
    tools_head = ("You can call the functions below. To call one, answer with nothing but a JSON object "
                  '{"name": function name, "parameters": object of argument names and values}.')
    tools_sep, tools_indent = "\n\n", 4
    call_head, call_args, call_end, call_sep = '{"name": "', '", "parameters": ', "}", "; "
    jinja_lead = "(" + lit("; ") + " if not loop.first else ('\\n' if ns.c else ''))"


HERMES, JSON = Hermes(), Llama3Json()
