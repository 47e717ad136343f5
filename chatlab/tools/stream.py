"""What every format's parser shares: its events, their fold, the streaming base, a JSON scanner.

A parser holds back only a suffix that may still grow into a marker, so its cost is linear whatever
the chunking; a one-shot parse is the same events folded (`fold`)."""
from __future__ import annotations

import bisect
import json
import re
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Iterable, Sequence, Union

from chatlab.types import ToolCall, ToolSpec


@dataclass(frozen=True)
class ContentDelta:
    """Plain assistant text, safe to show now (it can no longer start a call)."""
    text: str


@dataclass(frozen=True)
class ToolCallStart:
    """A call has begun: its name is known and is one of the provided tools."""
    index: int
    id: str
    name: str


@dataclass(frozen=True)
class ToolCallArgs:
    """The next piece of the call's JSON arguments text (pieces concatenate)."""
    index: int
    fragment: str


@dataclass(frozen=True)
class ToolCallEnd:
    """The call's arguments are complete, valid JSON: the call is final."""
    index: int


@dataclass(frozen=True)
class ToolCallError:
    """Model output that tried to be a call but is malformed; its raw `text` becomes content
    again. `index`: the announced call it withdraws, or None."""
    index: int | None
    error: str
    text: str


ParserEvent = Union[ContentDelta, ToolCallStart, ToolCallArgs, ToolCallEnd, ToolCallError]


@dataclass
class ParseResult:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None


def fold(events: Iterable[ParserEvent]) -> ParseResult:
    """Add up a parser's events: content in order, finished calls in index order."""
    content: list[str] = []
    errors: list[str] = []
    open_calls: dict[int, tuple[str, str, list[str]]] = {}
    done: dict[int, ToolCall] = {}
    for ev in events:
        if isinstance(ev, ContentDelta):
            content.append(ev.text)
        elif isinstance(ev, ToolCallStart):
            open_calls[ev.index] = (ev.id, ev.name, [])
        elif isinstance(ev, ToolCallArgs):
            open_calls[ev.index][2].append(ev.fragment)
        elif isinstance(ev, ToolCallEnd):
            call_id, name, parts = open_calls.pop(ev.index)
            done[ev.index] = ToolCall(call_id, name, "".join(parts))
        elif isinstance(ev, ToolCallError):
            if ev.index is not None:
                open_calls.pop(ev.index, None)
            content.append(ev.text)
            errors.append(ev.error)
    text = "".join(content)
    return ParseResult(content=text or None, tool_calls=[done[i] for i in sorted(done)],
                       error="; ".join(errors) or None)


WHITESPACE = " \t\r\n"
CUT_OFF = "the output was cut off by the length limit inside the tool call"


def find_marker(text: str, markers: tuple[str, ...], start: int = 0) -> tuple[int, str] | None:
    """Earliest (position, marker) of any marker in text[start:], or None."""
    hits = [(pos, m) for m in markers if (pos := text.find(m, start)) >= 0]
    return min(hits, key=lambda hit: hit[0]) if hits else None


def is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def split_safe(text: str, markers: tuple[str, ...]) -> tuple[str, str]:
    """(safe, held): `held` is the longest suffix of `text` that is a proper prefix of a marker
    (it could still grow into one), with the whitespace before it."""
    longest = max((len(m) for m in markers), default=1)
    k = next((k for k in range(min(len(text), longest - 1), 0, -1)
              if any(m.startswith(text[-k:]) for m in markers)), 0)
    cut = len(text[:len(text) - k].rstrip(WHITESPACE))
    return text[:cut], text[cut:]


class StreamParser(ABC):
    """Base of the format parsers: event bookkeeping, feed/finish, one-shot parse."""

    opener: str | None = None  # the marker that starts a call mid-reply (None: calls open the reply)

    def __init__(self, tools: Sequence[ToolSpec] = ()) -> None:
        self.names = {t.name for t in tools}
        self._events: list[ParserEvent] = []
        self._history: list[ParserEvent] = []
        self._next_index = 0
        self._finished = False
        self.cut = False  # set by finish(): the length limit ended the output, not the model
        self.pending = ""  # text read but not yet given out, while a marker may still follow

    def feed(self, delta: str) -> list[ParserEvent]:
        if self._finished:
            raise RuntimeError("feed() after finish(); create a new parser per response")
        if delta:
            self._consume(delta, final=False)
        return self._drain()

    def finish(self, cut: bool = False) -> list[ParserEvent]:
        """The output has ended. `cut` (by the length limit): a call whose name was complete is
        announced with its arguments, then withdrawn, as OpenAI returns one cut by max_tokens."""
        if not self._finished:
            self._finished, self.cut = True, cut
            self._consume("", final=True)
        return self._drain()

    def result(self) -> ParseResult:
        """Everything emitted so far, added up (after finish(): the final answer)."""
        return fold(self._history)

    def held(self) -> str:
        """The text fed so far that no event has given out yet (empty after finish())."""
        return "" if self._finished else self._held()

    def parse(self, text: str) -> ParseResult:
        self.feed(text)
        self.finish()
        return self.result()

    @abstractmethod
    def _consume(self, text: str, final: bool) -> None:
        """Read `text` (`final`: nothing follows), emitting events with the helpers below."""

    def _held(self) -> str:
        return self.pending

    def _drain(self) -> list[ParserEvent]:
        out, self._events = self._events, []
        self._history.extend(out)
        return out

    def _content(self, text: str) -> None:
        if text:
            self._events.append(ContentDelta(text))

    def _start(self, name: str) -> int:
        index, self._next_index = self._next_index, self._next_index + 1
        call_id = "call_" + secrets.token_hex(12)  # OpenAI's shape: 24 random hex digits
        self._events.append(ToolCallStart(index, call_id, name))
        return index

    def _args(self, index: int, fragment: str) -> None:
        if fragment:
            self._events.append(ToolCallArgs(index, fragment))

    def _end(self, index: int) -> None:
        self._events.append(ToolCallEnd(index))

    def _call(self, name: str, arguments: str, cut_text: str | None = None) -> None:
        """A whole call known at once (formats whose arguments are not streamed); with `cut_text`,
        one the length limit ended after its name: announced, then withdrawn (see finish)."""
        index = self._start(name)
        self._args(index, arguments)
        if cut_text is None:
            self._end(index)
        else:
            self._reject(index, CUT_OFF, cut_text)

    def _reject(self, index: int | None, error: str, text: str) -> None:
        self._events.append(ToolCallError(index, error, text))

    def unknown_tool(self, name: str) -> str:
        known = ", ".join(sorted(self.names)) or "(no tools were given)"
        return f"the model called unknown tool {name!r}; known tools: {known}"


class CallAtEndParser(StreamParser):
    """Runs `_in_<state>` on the held text until the state is "call"; from then on all text is
    the call, which `_parse_call` reads whole once the output ends."""

    def __init__(self, tools: Sequence[ToolSpec] = ()) -> None:
        super().__init__(tools)
        self.state = "start"
        self.call_parts: list[str] = []

    def _consume(self, text: str, final: bool) -> None:
        if self.state == "call":
            self.call_parts.append(text)
        else:
            self.pending += text
            getattr(self, "_in_" + self.state)(final)
        if final and self.state == "call":
            self._parse_call()

    def _in_content(self, final: bool) -> None:
        self._content(self.pending)
        self.pending = ""

    def _to_call(self, text: str) -> None:
        self.state, self.pending, self.call_parts = "call", "", [text]

    @abstractmethod
    def _parse_call(self) -> None:
        """Read the whole call (`call_parts`), emitting it or rejecting it as content."""


# One JSON object scanned as it arrives: where it ends and where each top-level member's value
# starts and ends, so a parser learns a call's name and streams its arguments' raw text.
PLAIN_STRING = re.compile(r'[^"\\]+')
PLAIN_SCALAR = re.compile(r"[-+.0-9eEtrufalsn]+")  # numbers and true/false/null letters


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
        if c in WHITESPACE and st != "value":
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
        try:  # a bad escape (or control character) is left for the whole object's json.loads
            self._member = json.loads(raw) if "\\" in raw else raw[1:-1]
        except ValueError:
            self._member = raw[1:-1]
        if self._member in self.spans:
            self.duplicate = self._member
        self.state = "colon"

    def _end_value(self, end: int) -> None:
        span = self.spans[self._member]
        if end == span[0] and span[1] is None:  # (only a scalar can end where it starts)
            return self._fail("missing value")
        if span[1] is None:
            span[1] = end
        self.state = "after"

    def _value_char(self, s: str, i: int, pos: int) -> int:
        c = s[i]
        if not self._stack and (c in ",}]" or c in WHITESPACE):
            self._end_value(pos)    # a scalar just ended: let "after" see this character again
            return i
        if c == '"':
            self._in_string = True
        elif c in "{[":
            self._stack.append("}" if c == "{" else "]")
        elif c in "}]":
            if self._stack.pop() != c:
                self._fail(f"mismatched {c!r}")
            elif not self._stack:
                self._end_value(pos + 1)
        elif c == ":" and not self._stack:
            self._fail("unexpected ':'")
        elif c not in ":," and c not in WHITESPACE:
            m = PLAIN_SCALAR.match(s, i)
            if not m:
                self._fail(f"unexpected {c!r} outside a string")
                return i
            return m.end()
        return i + 1
