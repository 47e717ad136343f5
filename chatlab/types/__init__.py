"""The chat domain: messages, tools, tool choice and response format, parsed once at the edge
(chatlab.types.parse) into frozen objects (chatlab.types.objects) that every layer below takes."""
from chatlab.types.checks import NAME_RE, check_text
from chatlab.types.objects import Message, ResponseFormat, ToolCall, ToolChoice, ToolSpec
from chatlab.types import wire
from chatlab.types.parse import (parse_messages, parse_response_format, parse_tool_choice,
                                 parse_tools)

__all__ = ["Message", "NAME_RE", "ResponseFormat", "ToolCall", "ToolChoice", "ToolSpec",
           "check_text", "parse_messages", "parse_response_format", "parse_tool_choice",
           "parse_tools", "wire"]
