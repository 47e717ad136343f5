"""An incremental scanner for one JSON object, fed in pieces of any size.

It does not decode values (json.loads does that at the end); it finds where the object ends
and where each top-level member's value starts and ends, so a parser can learn a call's name
and stream the raw text of its arguments while they are still being generated. Each
character is looked at once, and runs of plain string characters are skipped with a regex.
"""
from __future__ import annotations

import bisect
import json
import re

PLAIN_STRING = re.compile(r'[^"\\]+')
PLAIN_SCALAR = re.compile(r"[-+.0-9eEtrufalsn]+")  # numbers and true/false/null letters
SPACE = " \t\r\n"


class JsonObjectScanner:
    """States: start -> member -> key -> colon -> value -> after -> (member | done);
    `invalid` ends the scan at the first character that cannot continue the object."""

    def __init__(self) -> None:
        self.state = "start"
        self.length = 0                      # characters consumed so far
        self.error: str | None = None
        self.spans: dict[str, list] = {}     # key -> [value start, value end or None]
        self.duplicate: str | None = None
        self._parts: list[str] = []
        self._offsets: list[int] = []
        self._key: list[str] = []
        self._member = ""  # the member whose value is being read (set at its key)
        self._stack: list[str] = []          # brackets open inside the current value
        self._in_string = False
        self._escape = False

    @property
    def done(self) -> bool:
        return self.state == "done"

    def value_text(self, key: str) -> str | None:
        span = self.spans.get(key)
        return None if span is None or span[1] is None else self.slice(span[0], span[1])

    def slice(self, start: int, end: int) -> str:
        """Raw text [start, end) of what was consumed; touches only the pieces it needs."""
        first = max(bisect.bisect_right(self._offsets, start) - 1, 0)
        last = bisect.bisect_left(self._offsets, end)
        joined = "".join(self._parts[first:last])
        base = self._offsets[first] if self._offsets else 0
        return joined[start - base:end - base]

    def text(self) -> str:
        return "".join(self._parts)

    def feed(self, chunk: str) -> int:
        """Consume as much of `chunk` as belongs to the object; returns how much."""
        i, n = 0, len(chunk)
        while i < n and self.state not in ("done", "invalid"):
            i = self._step(chunk, i)
        if i:
            self._offsets.append(self.length)
            self._parts.append(chunk[:i])
            self.length += i
        return i

    def _fail(self, why: str) -> None:
        self.state, self.error = "invalid", why

    def _step(self, s: str, i: int) -> int:
        """Advance over one character (or one plain run) of s at i; returns the new index."""
        c, st, pos = s[i], self.state, self.length + i
        if self._in_string:
            m = PLAIN_STRING.match(s, i)
            if m and not self._escape:
                if self.state == "key":
                    self._key.append(m.group())
                return m.end()
            if st == "key":
                self._key.append(c)
            if self._escape:
                self._escape = False
            elif c == "\\":
                self._escape = True
            elif c == '"':
                self._in_string = False
                if st == "key":
                    self._end_key()
                elif not self._stack:
                    self._end_value(pos + 1)
            return i + 1
        if c in SPACE and st != "value":
            return i + 1
        if st == "start":
            if c == "{":
                self.state = "member"
            else:
                self._fail("a tool call must be a JSON object")
        elif st == "member":
            if c == '"':
                self.state, self._in_string, self._key = "key", True, ['"']
            elif c == "}" and not self.spans:
                self.state = "done"
            else:
                self._fail(f"expected a member name, got {c!r}")
        elif st == "colon":
            if c == ":":
                self.state = "value_start"
            else:
                self._fail(f"expected ':', got {c!r}")
        elif st == "value_start":
            self.spans.setdefault(self._member, [pos, None])
            self.state = "value"
            return self._value_char(s, i, pos)
        elif st == "value":
            return self._value_char(s, i, pos)
        elif st == "after":
            if c == ",":
                self.state = "member"
            elif c == "}":
                self.state = "done"
            else:
                self._fail(f"expected ',' or '}}', got {c!r}")
        return i + 1

    def _end_key(self) -> None:
        raw = "".join(self._key)
        self._member = json.loads(raw) if "\\" in raw else raw[1:-1]
        if self._member in self.spans:
            self.duplicate = self._member
        self.state = "colon"

    def _end_value(self, end: int) -> None:
        span = self.spans[self._member]
        if span[1] is None:
            span[1] = end
        self.state = "after"

    def _value_char(self, s: str, i: int, pos: int) -> int:
        c = s[i]
        if c == '"':
            self._in_string = True
        elif c in "{[":
            self._stack.append("}" if c == "{" else "]")
        elif c in "}]":
            if not self._stack:      # a scalar just ended at the object's close
                self._end_scalar(pos)
                return i             # let "after" see the '}' again
            if self._stack.pop() != c:
                self._fail(f"mismatched {c!r}")
            elif not self._stack:
                self._end_value(pos + 1)
        elif c == "," or c in SPACE:
            if not self._stack:
                self._end_scalar(pos)
                return i
        elif c == ":":
            if not self._stack:
                self._fail("unexpected ':'")
        else:
            m = PLAIN_SCALAR.match(s, i)
            if not m:
                self._fail(f"unexpected {c!r} outside a string")
                return i
            return m.end()
        return i + 1

    def _end_scalar(self, pos: int) -> None:
        span = self.spans[self._member]
        if pos == span[0] and span[1] is None:
            self._fail("missing value")
            return
        self._end_value(pos)
