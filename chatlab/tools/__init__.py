"""Tool calls: the formats, parsing them out of model text (streaming or at once), checking them.

Malformed model output never raises: it comes back as content, with `error` saying why.
Constrained decoding is chatlab.tools.constrain (it needs xgrammar, so it is not imported here)."""
from __future__ import annotations

import json
from typing import Mapping, Sequence

from chatlab._thirdparty import Jsonable
from chatlab.errors import UnknownNameError
from chatlab.tools.chatglm3 import CHATGLM3
from chatlab.tools.format import ToolFormat
from chatlab.tools.jsonstyle import HERMES, JSON
from chatlab.tools.react import REACT
from chatlab.tools.stream import (ContentDelta, ParserEvent, ParseResult, StreamParser, ToolCallArgs, ToolCallEnd,
                                  ToolCallError, ToolCallStart, fold)
from chatlab.types import ToolCall, ToolSpec, parse_tools

# In detection order: a chat_template is asked about each in turn (Hermes tags first).
TOOL_FORMATS: dict[str, ToolFormat] = {f.name: f for f in (HERMES, CHATGLM3, JSON, REACT)}


def get_tool_format(name: str | ToolFormat) -> ToolFormat:
    """The format called `name` (a ToolFormat is returned as it is)."""
    if isinstance(name, ToolFormat):
        return name
    try:
        return TOOL_FORMATS[name]
    except (KeyError, TypeError):
        raise UnknownNameError("tool-call format", str(name), list(TOOL_FORMATS)) from None


def format_of_chat_template(source: str) -> ToolFormat | None:
    """The format a Jinja chat_template writes calls in, or None if it shows none."""
    return next((f for f in TOOL_FORMATS.values() if f.matches(source)), None)


def as_tools(tools: Jsonable) -> list[ToolSpec]:
    """ToolSpecs as they are; anything else (OpenAI dicts, from a notebook) parsed once."""
    if tools is None:
        return []
    if isinstance(tools, (list, tuple)) and all(isinstance(t, ToolSpec) for t in tools):
        return list(tools)
    return parse_tools(tools)


def get_parser(fmt: str | ToolFormat, tools: Sequence[ToolSpec] | Sequence[Mapping[str, Jsonable]] = ()) -> StreamParser:
    """A fresh streaming parser for one response in tool-call format `fmt`."""
    return get_tool_format(fmt).parser(as_tools(tools))


def parse_tool_calls(fmt: str | ToolFormat, text: str,
                     tools: Sequence[ToolSpec] | Sequence[Mapping[str, Jsonable]] = ()) -> ParseResult:
    """One-shot parse of a whole response (the streaming parser fed everything at once)."""
    return get_parser(fmt, tools).parse(text)


def validate_instance(instance: Jsonable, schema: Jsonable) -> list[str]:
    """Problems with `instance` against `schema` (empty list: valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(instance)]


def validate_arguments(arguments: str, tools: Sequence[ToolSpec], name: str) -> list[str]:
    """Problems with a call's JSON arguments text against the named tool's parameters."""
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        return [f"unknown tool {name!r}"]
    try:
        value = json.loads(arguments)
    except ValueError as e:
        return [f"arguments are not valid JSON: {e}"]
    return validate_instance(value, tool.schema)


__all__ = [
    "TOOL_FORMATS", "ToolFormat", "get_tool_format", "format_of_chat_template", "as_tools",
    "get_parser", "parse_tool_calls", "StreamParser", "ContentDelta", "ToolCallStart",
    "ToolCallArgs", "ToolCallEnd", "ToolCallError", "ToolCall", "ParseResult", "ParserEvent", "fold",
    "validate_arguments", "validate_instance", "CHATGLM3", "HERMES", "JSON", "REACT",
]
