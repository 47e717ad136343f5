"""The tool-call formats, one object each, and the registry.

    fmt = get_format("hermes")          # or a Template's / Resolution's `tool_format`
    fmt.parser(tools)                   # a streaming parser for one response
    fmt.forced_structure(tools)         # xgrammar structural tag of one forced call
    fmt.trigger                         # what starts a call under tool_choice "auto"

Formats: hermes (Qwen2.5/Qwen3), json (llama3), react (Qwen-1), chatglm3. Everything a format
writes or reads lives in its own module; nothing else spells its tags.
"""
from __future__ import annotations

from chatlab.errors import UnknownNameError
from chatlab.tools.formats.base import Bit, JinjaTurns, ToolFormat, Turn
from chatlab.tools.formats.chatglm3 import CHATGLM3
from chatlab.tools.formats.hermes import HERMES
from chatlab.tools.formats.llama3_json import JSON
from chatlab.tools.formats.react import REACT

# In detection order: a chat_template is asked about each in turn (Hermes tags first).
FORMATS: dict[str, ToolFormat] = {f.name: f for f in (HERMES, CHATGLM3, JSON, REACT)}


def get_format(name: str | ToolFormat) -> ToolFormat:
    """The format called `name` (a ToolFormat is returned as it is)."""
    if isinstance(name, ToolFormat):
        return name
    try:
        return FORMATS[name]
    except (KeyError, TypeError):
        raise UnknownNameError("tool-call format", str(name), list(FORMATS)) from None


def format_of_chat_template(source: str) -> ToolFormat | None:
    """The format a Jinja chat_template writes calls in, or None if it shows none."""
    return next((f for f in FORMATS.values() if f.matches(source)), None)


__all__ = ["FORMATS", "Bit", "JinjaTurns", "ToolFormat", "Turn", "format_of_chat_template", "get_format",
           "CHATGLM3", "HERMES", "JSON", "REACT"]
