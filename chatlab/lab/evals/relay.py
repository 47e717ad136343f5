"""Streamed calls: a naive relay leaks a call tag split over tokens; the buffered parser holds it back."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Sequence

from chatlab.engine import ChatEngine, parse_request
from chatlab.generate import TextDelta
from chatlab.lab.evals.sets import WeatherRequest
from chatlab.tools import fold, get_parser, parse_tool_calls


TOOLS = [{"type": "function", "function": {
    "name": "get_current_weather",
    "description": "Get the current weather in a given location",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The city, e.g. Boston"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["location", "unit"]}}}]
OPEN = "<tool_call>"
CALL_MARKUP = ("<tool_call", "tool_call>", '{"name"', "</tool")  # what must never reach `content`


@dataclass(frozen=True)
class Stream:
    """What a client received from one relay: content text and the calls (name, arguments)."""

    content: str
    calls: list[tuple[str, str]]

    def leaked(self) -> bool:
        return any(m in self.content for m in CALL_MARKUP)

    def location(self) -> str | None:
        try:
            return str(json.loads(self.calls[0][1]).get("location"))
        except (IndexError, ValueError, AttributeError):  # no call, arguments not JSON or not an object
            return None


def live_deltas(engine: ChatEngine, request: str, max_tokens: int = 60) -> list[str]:
    """The text deltas the generation loop yields for a forced call, before any parser."""
    plan = engine.check(parse_request({
        "messages": [{"role": "user", "content": request}], "tools": TOOLS, "temperature": 0,
        "max_tokens": max_tokens, "tool_choice": {"type": "function", "function": {"name": "get_current_weather"}}}))
    processor = engine._constraint(plan) if plan.constrained else None
    return [e.text for e in engine._generate(plan.prompt_ids, plan.params[0], processor, None)
            if isinstance(e, TextDelta) and e.text]


def naive_relay(deltas: Sequence[str]) -> Stream:
    """Forward text as it arrives; only a delta that itself starts with the tag opens a call."""
    content, call, collecting = "", "", False
    for d in deltas:
        if collecting:
            call += d
        elif d.lstrip().startswith(OPEN):
            collecting, call = True, d
        else:
            content += d
    calls = []
    if collecting:
        parsed = parse_tool_calls("hermes", call, TOOLS)
        calls = [(c.name, c.arguments) for c in parsed.tool_calls]
        content += parsed.content or ""
    return Stream(content, calls)


def buffered_relay(deltas: Sequence[str]) -> Stream:
    """chatlab's streaming parser fed the same deltas (what `engine.chat_stream` sends)."""
    parser = get_parser("hermes", TOOLS)
    result = fold([e for d in deltas for e in parser.feed(d)] + parser.finish())
    return Stream(result.content or "", [(c.name, c.arguments) for c in result.tool_calls])


@dataclass
class RelayColumn:
    label: str
    streams: list[tuple[WeatherRequest, Stream]]
    seconds: float

    def count(self, what: str) -> int:
        if what == "leaked":
            return sum(s.leaked() for _, s in self.streams)
        if what == "lost":
            return sum(not s.calls for _, s in self.streams)
        if what == "called":
            return sum(bool(s.calls) for _, s in self.streams)
        if what == "location":
            return sum((s.location() or "").lower() == r.location.lower() for r, s in self.streams)
        raise ValueError(f"unknown measure {what!r}; use leaked, lost, called or location")


def relay_bite(engine: ChatEngine, requests: Sequence[WeatherRequest], label: str,
               max_tokens: int = 60) -> tuple[RelayColumn, RelayColumn]:
    """(naive relay, buffered parser) over the same live deltas of `engine`."""
    t0 = time.perf_counter()
    deltas = [(r, live_deltas(engine, r.request, max_tokens)) for r in requests]
    seconds = time.perf_counter() - t0
    return (RelayColumn(f"{label}: naive relay", [(r, naive_relay(d)) for r, d in deltas], seconds),
            RelayColumn(f"{label}: buffered parser", [(r, buffered_relay(d)) for r, d in deltas], seconds))


def gold_reply(request: WeatherRequest) -> str:
    """The call a perfect model would write, in the Hermes layout the grammar allows."""
    args = json.dumps({"location": request.location, "unit": "celsius"})
    return f'{OPEN}\n{{"name": "get_current_weather", "arguments": {args}}}\n</tool_call>'


def relay_table(columns: Sequence[RelayColumn]) -> str:
    """Counts per column, each out of its own number of streams."""
    rows = [("streams that called the tool", "called"), ("call lost", "lost"),
            ("call markup leaked into content", "leaked"), ("location names the city", "location")]
    first = max(len(label) for label, _ in rows) + 2
    widths = [max(len(c.label), 8) + 2 for c in columns]
    lines = [" " * first + "".join(c.label.ljust(w) for c, w in zip(columns, widths))]
    for label, what in rows:
        lines.append(label.ljust(first) + "".join(f"{c.count(what)}/{len(c.streams)}".ljust(w) for c, w in zip(columns, widths)))
    return "\n".join(line.rstrip() for line in lines)
