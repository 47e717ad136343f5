"""Hermes / Qwen2.5 / Qwen3 tool calls.

A call is `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`; several blocks are
parallel calls; text around them is content. Small models often drop the tags and write the
bare JSON object, so an output that *starts* with such an object is a call as well. The close
tag may be missing once the object itself is complete (some models go straight to eos).
"""
from __future__ import annotations

from chatlab.tools.jsonstyle import JsonCallParser


class HermesParser(JsonCallParser):
    fmt = "hermes"
    open_tag = "<tool_call>"
    close_tag = "</tool_call>"
