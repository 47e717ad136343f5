"""One tool call written as a JSON object: {"name": ..., "arguments" | "parameters": {...}}.

Shared by the Hermes (tagged) and llama3 (bare) JSON formats. The call is announced
(ToolCallStart) as soon as its name is complete and known and its arguments object has begun;
the arguments' raw text is then streamed as it arrives. If the object later proves malformed
(cut off, invalid JSON), the parser withdraws the call with ToolCallError and its text becomes
content again, so the folded result always equals the one-shot parse.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

from chatlab.tools.jsonscan import JsonObjectScanner

if TYPE_CHECKING:
    from chatlab.tools.stream import StreamParser

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
        if not self.committed and "name" in self.scan.spans and self.args_key:
            self.committed = True
        if self.committed:
            self._stream()
        return used

    def _stream(self) -> None:
        scan, key = self.scan, self.args_key
        if self.index is None:
            raw = scan.value_text("name")
            if self.name is None and raw is not None:
                try:
                    name = json.loads(raw)
                except ValueError:
                    name = None
                self.name = name if isinstance(name, str) else ""
            if not self.name or self.name not in self.parser.names or key is None:
                return
            start = scan.spans[key][0]
            if scan.length <= start or scan.slice(start, start + 1) != "{":
                return   # a stringified arguments value is decoded at the end instead
            self.index, self.sent = self.parser._start(self.name), start
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
        if isinstance(value, str):        # some models send arguments as a JSON string
            try:
                if isinstance(json.loads(value), dict):
                    return value, None
            except ValueError:
                pass
        return None, f'the tool call "{key}" must be a JSON object, got {json.dumps(value)[:60]}'

    def close(self, suffix: str = "") -> bool:
        """The object is complete: emit the call (True) or withdraw it as content (False)."""
        arguments, error = self.check()
        if error is not None or arguments is None:
            self.reject(error or "the tool call has no arguments", suffix)
            return False
        if self.index is None:
            self.index = self.parser._start(json.loads(self.scan.text())["name"])
            self.parser._args(self.index, arguments)
        self.parser._end(self.index)
        return True

    def reject(self, error: str, suffix: str = "") -> None:
        self.parser._reject(self.index, error, self.prefix + self.scan.text() + suffix)
