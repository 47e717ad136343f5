"""Tool calls: parse them out of model text (streaming or at once) and constrain them.

    parser = get_parser("hermes", tools)      # "react" | "hermes" | "chatglm3" | "json"
    for delta in deltas: events = parser.feed(delta)
    events = parser.finish()
    parse_tool_calls("hermes", text, tools)   # -> ParseResult(content, tool_calls, error)

Streaming and one-shot give the same result for every chunking. Malformed model output never
raises: it comes back as content, with `error` saying why. Constrained decoding lives in
chatlab.tools.constrain (it imports xgrammar and torch, so it is not imported here).
"""
from __future__ import annotations

from chatlab.errors import UnknownNameError
from chatlab.tools.chatglm3 import ChatGLM3Parser
from chatlab.tools.events import (ContentDelta, Event, ParseResult, ToolCall, ToolCallArgs,
                                  ToolCallEnd, ToolCallError, ToolCallStart, fold)
from chatlab.tools.hermes import HermesParser
from chatlab.tools.jsonstyle import JsonStyleParser
from chatlab.tools.react import ReActParser
from chatlab.tools.schema import (ToolChoice, validate_arguments, validate_tool_choice,
                                  validate_tools)
from chatlab.tools.stream import StreamParser

PARSERS: dict[str, type[StreamParser]] = {
    "react": ReActParser, "hermes": HermesParser, "chatglm3": ChatGLM3Parser, "json": JsonStyleParser,
}


def get_parser(fmt: str, tools: object = None) -> StreamParser:
    """A fresh streaming parser for one response in tool-call format `fmt`."""
    if fmt not in PARSERS:
        raise UnknownNameError("tool-call format", fmt, list(PARSERS))
    return PARSERS[fmt](tools)


def parse_tool_calls(fmt: str, text: str, tools: object = None) -> ParseResult:
    """One-shot parse of a whole response (the streaming parser fed everything at once)."""
    return get_parser(fmt, tools).parse(text)


__all__ = [
    "get_parser", "parse_tool_calls", "PARSERS", "StreamParser", "ContentDelta", "ToolCallStart",
    "ToolCallArgs", "ToolCallEnd", "ToolCallError", "ToolCall", "ParseResult", "Event", "fold",
    "ToolChoice", "validate_tool_choice", "validate_tools", "validate_arguments",
]
