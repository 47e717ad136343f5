"""The chat domain: messages, tools, tool choice and response format, parsed once.

Everything a client sends is turned into these frozen objects at the edge (the server's request
models, the CLI, a notebook passing plain dicts) by the `parse_*` functions below, which are the
only place these rules live. Renderers, constrainers and parsers take the objects and never
re-check them. Kinds are `Literal`s, so a misspelt mode is a type error, not a silent branch.

Limits are part of parsing: a request that would make the server do unbounded work (a 100k
character tool name, a schema nested 120 levels) is refused here with the limit in the message.
"""
from chatlab.types.checks import (MAX_SCHEMA_CHARS, MAX_SCHEMA_DEPTH, NAME_RE, check_json,
                                  check_name, check_schema, check_text)
from chatlab.types.objects import (ChoiceMode, FormatKind, Message, ResponseFormat, Role, ToolCall,
                                   ToolChoice, ToolSpec)
from chatlab.types import wire
from chatlab.types.parse import (MAX_DESCRIPTION_CHARS, MAX_TOOLS, ROLES, parse_message,
                                 parse_messages, parse_response_format, parse_tool_choice,
                                 parse_tools)

__all__ = ["ChoiceMode", "FormatKind", "MAX_DESCRIPTION_CHARS", "MAX_SCHEMA_CHARS",
           "MAX_SCHEMA_DEPTH", "MAX_TOOLS", "Message", "NAME_RE", "ROLES", "ResponseFormat", "Role",
           "ToolCall", "ToolChoice", "ToolSpec", "check_json", "check_name", "check_schema",
           "check_text", "parse_message", "parse_messages", "parse_response_format",
           "parse_tool_choice", "parse_tools", "wire"]
