"""The streaming machinery every format shares.

A parser is fed text deltas of any size. It emits content as soon as that text can no longer
be the beginning of a call, and holds back the rest: a suffix that is a proper prefix of a
marker such as a format's open tag, plus the whitespace just before it (whitespace next to a call is
not content). Every piece of text is looked at a bounded number of times, so the cost is
linear in the output length, whatever the chunking.

The one-shot parse is the same machine fed the whole text at once, folded with
`events.fold`; a property test checks that every chunking gives the same result.
"""
from __future__ import annotations

from typing import Sequence

from chatlab.tools.events import (ContentDelta, Event, ParseResult, ToolCallArgs, ToolCallEnd,
                                  ToolCallError, ToolCallStart, fold, new_call_id)
from chatlab.types import ToolSpec

WHITESPACE = " \t\r\n"


def find_marker(text: str, markers: tuple[str, ...], start: int = 0) -> tuple[int, str] | None:
    """Earliest (position, marker) of any marker in text[start:], or None."""
    best = None
    for m in markers:
        pos = text.find(m, start)
        if pos >= 0 and (best is None or pos < best[0]):
            best = (pos, m)
    return best


def partial_marker_len(text: str, markers: tuple[str, ...]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of some marker."""
    longest = max((len(m) for m in markers), default=1)
    for k in range(min(len(text), longest - 1), 0, -1):
        tail = text[-k:]
        if any(m.startswith(tail) for m in markers):
            return k
    return 0


def split_safe(text: str, markers: tuple[str, ...], hold_space: bool = True) -> tuple[str, str]:
    """(safe, held): `held` could still grow into a marker (with the whitespace before it)."""
    cut = len(text) - partial_marker_len(text, markers)
    if hold_space:
        cut = len(text[:cut].rstrip(WHITESPACE))
    return text[:cut], text[cut:]


class StreamParser:
    """Base of the format parsers: event bookkeeping, feed/finish, one-shot parse."""

    fmt = "base"  # the format's name, for display
    opener: str | None = None  # the marker that starts a call mid-reply (None: calls open the reply)

    def __init__(self, tools: Sequence[ToolSpec] = ()) -> None:
        self.names = {t.name for t in tools}
        self._events: list[Event] = []
        self._history: list[Event] = []
        self._next_index = 0
        self._finished = False

    # -- the public surface -------------------------------------------------------------
    def feed(self, delta: str) -> list[Event]:
        if self._finished:
            raise RuntimeError("feed() after finish(); create a new parser per response")
        if delta:
            self._consume(delta, final=False)
        return self._drain()

    def finish(self) -> list[Event]:
        if not self._finished:
            self._finished = True
            self._consume("", final=True)
        return self._drain()

    def result(self) -> ParseResult:
        """Everything emitted so far, added up (after finish(): the final answer)."""
        return fold(self._history)

    def parse(self, text: str) -> ParseResult:
        self.feed(text)
        self.finish()
        return self.result()

    # -- what subclasses implement ------------------------------------------------------
    def _consume(self, text: str, final: bool) -> None:
        raise NotImplementedError

    # -- helpers for subclasses ---------------------------------------------------------
    def _drain(self) -> list[Event]:
        out, self._events = self._events, []
        self._history.extend(out)
        return out

    def _content(self, text: str) -> None:
        if text:
            self._events.append(ContentDelta(text))

    def _start(self, name: str) -> int:
        index, self._next_index = self._next_index, self._next_index + 1
        self._events.append(ToolCallStart(index, new_call_id(), name))
        return index

    def _args(self, index: int, fragment: str) -> None:
        if fragment:
            self._events.append(ToolCallArgs(index, fragment))

    def _end(self, index: int) -> None:
        self._events.append(ToolCallEnd(index))

    def _call(self, name: str, arguments: str) -> None:
        """A whole call known at once (formats whose arguments are not streamed)."""
        index = self._start(name)
        self._args(index, arguments)
        self._end(index)

    def _reject(self, index: int | None, error: str, text: str) -> None:
        self._events.append(ToolCallError(index, error, text))

    def unknown_tool(self, name: str) -> str:
        known = ", ".join(sorted(self.names)) or "(no tools were given)"
        return f"the model called unknown tool {name!r}; known tools: {known}"
