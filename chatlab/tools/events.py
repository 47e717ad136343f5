"""What a tool-call parser says, and how its words add up to a result.

A streaming parser emits small events as soon as each is certain; the one-shot answer is the
same events folded together. Keeping the fold in one place is what makes "streaming equals
one-shot" checkable: both sides go through `fold`.
"""
from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Iterable, Union

from chatlab.types import ToolCall


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
    """Model output that tried to be a call but is malformed (unterminated, invalid JSON,
    unknown tool). Its raw `text` becomes content again. `index` names a call already
    announced by ToolCallStart that is hereby withdrawn, or is None if none was announced."""

    index: int | None
    error: str
    text: str


Event = Union[ContentDelta, ToolCallStart, ToolCallArgs, ToolCallEnd, ToolCallError]


@dataclass
class ParseResult:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None


def new_call_id() -> str:
    """OpenAI-shaped call id: `call_` + 24 random hex digits."""
    return "call_" + secrets.token_hex(12)


def fold(events: Iterable[Event]) -> ParseResult:
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
