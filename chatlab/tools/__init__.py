"""Tool calls: the formats, parsing them out of model text (streaming or at once), checking them.

    fmt = get_format("hermes")                # "hermes" | "json" | "react" | "chatglm3"
    parser = get_parser(fmt, tools)           # tools: Sequence[ToolSpec] (chatlab.types)
    for delta in deltas: events = parser.feed(delta)
    events = parser.finish()
    parse_tool_calls(fmt, text, tools)        # -> ParseResult(content, tool_calls, error)

Streaming and one-shot give the same result for every chunking. Malformed model output never
raises: it comes back as content, with `error` saying why. Constrained decoding lives in
chatlab.tools.constrain (it imports xgrammar and torch, so it is not imported here).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from chatlab._thirdparty import Jsonable
from chatlab.tools.events import (ContentDelta, Event, ParseResult, ToolCall, ToolCallArgs,
                                  ToolCallEnd, ToolCallError, ToolCallStart, fold)
from chatlab.tools.formats import FORMATS, ToolFormat, format_of_chat_template, get_format
from chatlab.tools.schema import validate_arguments, validate_instance
from chatlab.tools.stream import StreamParser
from chatlab.types import ToolSpec, parse_tools


def as_tools(tools: Jsonable) -> list[ToolSpec]:
    """ToolSpecs as they are; anything else (OpenAI dicts, from a notebook) parsed once."""
    if tools is None:
        return []
    if isinstance(tools, (list, tuple)) and all(isinstance(t, ToolSpec) for t in tools):
        return list(tools)
    return parse_tools(tools)


def get_parser(fmt: str | ToolFormat, tools: Sequence[ToolSpec] | Sequence[Mapping[str, Jsonable]] = ()) -> StreamParser:
    """A fresh streaming parser for one response in tool-call format `fmt`."""
    return get_format(fmt).parser(as_tools(tools))


def parse_tool_calls(fmt: str | ToolFormat, text: str,
                     tools: Sequence[ToolSpec] | Sequence[Mapping[str, Jsonable]] = ()) -> ParseResult:
    """One-shot parse of a whole response (the streaming parser fed everything at once)."""
    return get_parser(fmt, tools).parse(text)


__all__ = [
    "FORMATS", "ToolFormat", "get_format", "format_of_chat_template", "as_tools",
    "get_parser", "parse_tool_calls", "StreamParser", "ContentDelta", "ToolCallStart",
    "ToolCallArgs", "ToolCallEnd", "ToolCallError", "ToolCall", "ParseResult", "Event", "fold",
    "validate_arguments", "validate_instance",
]
