"""The ChatGLM3 parsing machine: `{name}\n` then a (fenced) python call `FUNC(k=v, ...)`.

The assistant's first line is its "metadata": empty for a normal reply (the reply then starts
with a newline), a tool name for a call. The official demo `eval`s the call, which runs
whatever the model wrote, and assumed every tool name starts with `get_`. Here the call is
parsed with `ast` and only literal values are accepted; the name must be one of the tools.
A first line that is a name-like word but no known tool is a call only if the next line
starts the call body (then it is reported as an unknown tool); otherwise it is content.
The fence and the call's function name are the format's (chatlab.tools.formats.chatglm3).
"""
from __future__ import annotations

import ast
import json
import re
from typing import Sequence

from chatlab.tools.stream import StreamParser
from chatlab.types import ToolSpec

NAME_SO_FAR = re.compile(r"[A-Za-z_][\w.\-]*[ \t]*")


class ChatGLM3Machine(StreamParser):
    FENCE = FUNC = ""  # set by the format: the code fence and the call's function name

    def __init__(self, tools: Sequence[ToolSpec] = ()) -> None:
        super().__init__(tools)
        self.body_starts = (self.FENCE, self.FUNC + "(")
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
        if any(body.startswith(b) for b in self.body_starts):
            return self._to_call()
        if final or not any(b.startswith(body) for b in self.body_starts):
            self._to_content(self.pending)

    def _to_content(self, text: str) -> None:
        self.state, self.pending = "content", ""
        self._content(text)

    def _to_call(self) -> None:
        self.state, self.call_parts, self.pending = "call", [self.pending], ""

    def _parse_call(self) -> None:
        original = "".join(self.call_parts)
        arguments, error = parse_call_body(original[original.find("\n") + 1:], self.FUNC, self.FENCE)
        if error is None and self.name not in self.names:
            error = self.unknown_tool(self.name)
        if error is not None or arguments is None:
            return self._reject(None, error or "the tool call has no arguments", original)
        self._call(self.name, arguments)


def parse_call_body(body: str, func: str, fence: str) -> tuple[str | None, str | None]:
    """(arguments JSON, None) for a safe `func(k=literal, ...)`, else (None, reason)."""
    src = body.strip()
    if src.startswith(fence):
        src = src[src.find("\n") + 1:] if "\n" in src else ""
        close = src.rfind(fence)
        src = src[:close] if close >= 0 else src   # a missing closing fence is tolerated
    src = src.strip()
    if not src:
        return None, f"the tool call has no body (expected {func}(...))"
    try:
        tree = ast.parse(src, mode="eval").body
    except SyntaxError as e:
        return None, f"the tool call is not a Python call expression ({e.msg})"
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == func):
        return None, f"the tool call body must be {func}(name=value, ...)"
    if tree.args or any(kw.arg is None for kw in tree.keywords):
        return None, f"{func}(...) takes keyword arguments only"
    values = {}
    for kw in tree.keywords:
        try:   # literal_eval: strings, numbers, tuples, lists, dicts, sets, True/False/None only
            values[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None, f"{func} argument {kw.arg!r} is not a plain literal (code is never run)"
    try:
        return json.dumps(values, ensure_ascii=False), None
    except (TypeError, ValueError):
        return None, f"{func}(...) arguments must be JSON-like literals (no sets, bytes, complex)"
