"""ChatGLM3 tool calls: `{name}\n` then a fenced python block `tool_call(k=v, ...)`.

The assistant's first line is its "metadata": empty for a normal reply (the reply then starts
with a newline), a tool name for a call. The official demo `eval`s the call, which runs
whatever the model wrote, and assumed every tool name starts with `get_`. Here the call is
parsed with `ast` and only literal values are accepted; the name must be one of the tools.
A first line that is a name-like word but no known tool is a call only if the next line
starts the call body (then it is reported as an unknown tool); otherwise it is content.
"""
from __future__ import annotations

import ast
import json
import re

from chatlab.tools.stream import StreamParser

NAME_SO_FAR = re.compile(r"[A-Za-z_][\w.\-]*[ \t]*")
BODY_STARTS = ("```", "tool_call(")


class ChatGLM3Parser(StreamParser):
    fmt = "chatglm3"

    def __init__(self, tools: object = None) -> None:
        super().__init__(tools)
        self.state = "start"
        self.pending = ""
        self.name = ""
        self.call_parts: list[str] = []

    def _consume(self, text: str, final: bool) -> None:
        if self.state == "call":
            self.call_parts.append(text)
        elif self.state == "content":
            self._content(text)
        else:
            self.pending += text
            getattr(self, "_in_" + self.state)(final)
        if final and self.state == "call":
            self._parse_call()

    def _in_start(self, final: bool) -> None:
        s = self.pending
        if s.startswith("\n"):                 # empty metadata: a normal reply follows
            return self._to_content(s[1:])
        newline = s.find("\n")
        if newline < 0:
            if not final and (s == "" or NAME_SO_FAR.fullmatch(s)):
                return                         # could still be a tool name
            return self._to_content(s)
        self.name = s[:newline].strip()
        if self.name in self.names:
            return self._to_call()
        if not NAME_SO_FAR.fullmatch(s[:newline]):
            return self._to_content(s)
        self.state = "maybe"
        self._in_maybe(final)

    def _in_maybe(self, final: bool) -> None:
        body = self.pending[self.pending.find("\n") + 1:].lstrip()
        if any(body.startswith(b) for b in BODY_STARTS):
            return self._to_call()
        if final or not any(b.startswith(body) for b in BODY_STARTS):
            self._to_content(self.pending)

    def _to_content(self, text: str) -> None:
        self.state, self.pending = "content", ""
        self._content(text)

    def _to_call(self) -> None:
        self.state, self.call_parts, self.pending = "call", [self.pending], ""

    def _parse_call(self) -> None:
        original = "".join(self.call_parts)
        arguments, error = parse_call_body(original[original.find("\n") + 1:])
        if error is None and self.name not in self.names:
            error = self.unknown_tool(self.name)
        if error is not None:
            return self._reject(None, error, original)
        self._call(self.name, arguments)


def parse_call_body(body: str) -> tuple[str | None, str | None]:
    """(arguments JSON, None) for a safe `tool_call(k=literal, ...)`, else (None, reason)."""
    src = body.strip()
    if src.startswith("```"):
        src = src[src.find("\n") + 1:] if "\n" in src else ""
        close = src.rfind("```")
        src = src[:close] if close >= 0 else src   # a missing closing fence is tolerated
    src = src.strip()
    if not src:
        return None, "the tool call has no body (expected tool_call(...))"
    try:
        tree = ast.parse(src, mode="eval").body
    except SyntaxError as e:
        return None, f"the tool call is not a Python call expression ({e.msg})"
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "tool_call"):
        return None, "the tool call body must be tool_call(name=value, ...)"
    if tree.args or any(kw.arg is None for kw in tree.keywords):
        return None, "tool_call(...) takes keyword arguments only"
    values = {}
    for kw in tree.keywords:
        try:   # literal_eval: strings, numbers, tuples, lists, dicts, sets, True/False/None only
            values[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None, f"tool_call argument {kw.arg!r} is not a plain literal (code is never run)"
    try:
        return json.dumps(values, ensure_ascii=False), None
    except (TypeError, ValueError):
        return None, "tool_call(...) arguments must be JSON-like literals (no sets, bytes, complex)"
