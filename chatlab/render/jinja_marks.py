"""Client strings as sentinels, so a tokenizer's own chat_template cannot turn them into control ids.

Before the Jinja render, every string the client wrote is replaced by a sentinel
`OPEN n CLOSE` (private-use characters no input contains, digits between): message content,
reasoning, tool-call arguments, and every string inside the tool definitions (descriptions,
enum values, titles, defaults...). After the render, what lies between sentinels was written by
the template; the sentinels are the client's text, encoded as plain text.

Templates write tools through `tojson` (with or without indent, ensure_ascii, sort_keys) as well
as by concatenation (`tool.function.description`), so a sentinel must come back in the form the
text would have had: chatlab's `tojson` filter rewrites every sentinel it serializes into a JSON
sentinel (`JSON_U n CLOSE` or, under ensure_ascii, `JSON_A n CLOSE`), which turns back into the
JSON-escaped original; `sort_keys` sorts by the original keys. The rendered text is then
byte-identical to the render of the real strings (jinja_safe checks it).

Identifiers are the exception: names, ids, property names and `required` entries are structure
that templates read (`name in required`, Mistral's check that ids have 9 characters), so they are
marked only when they could form a special token (`Encoder.could_form_special`); a name like
`get_weather` stays as it is, and cannot become a control id wherever the template writes it.
Protocol words (OpenAI's tool keys, JSON Schema's keywords and type names: `tool.function.name`,
`param.type == 'string'`) are never marked. Tool strings share one sentinel per distinct string,
so equal strings stay equal (`name in required` holds when both are marked).
"""
from __future__ import annotations

import json
import re
from contextvars import ContextVar
from typing import Iterator

from chatlab._thirdparty import Jsonable
from chatlab.render.encoder import Encoder

# Values under these keys (in tool definitions) are identifiers, see the module docstring.
IDENT_KEYS = {"name", "type", "required"}
# Protocol vocabulary, the same words in every request (OpenAI's tool shape, JSON Schema's
# keywords and type names): templates read them by name, so they are never marked. They are
# not client text, and a request whose `type` is not one of these names fails the schema check.
KEYWORDS = {
    "type", "function", "name", "description", "parameters", "strict", "properties", "required",
    "items", "prefixItems", "enum", "const", "default", "title", "examples", "format", "pattern",
    "additionalProperties", "patternProperties", "propertyNames", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "minItems",
    "maxItems", "uniqueItems", "contains", "minContains", "maxContains", "minProperties",
    "maxProperties", "dependentRequired", "dependentSchemas", "anyOf", "oneOf", "allOf", "not",
    "if", "then", "else", "$ref", "$defs", "definitions", "$schema", "$id", "$anchor",
    "$comment", "nullable", "deprecated", "readOnly", "writeOnly", "unevaluatedItems",
    "unevaluatedProperties", "contentEncoding", "contentMediaType",
}
TYPE_NAMES = {"function", "object", "array", "string", "number", "integer", "boolean", "null"}

# The marks of the render in progress, read by the `tojson` filter (None: a plain render).
ACTIVE: ContextVar["Marks | None"] = ContextVar("chatlab_jinja_marks", default=None)


def _strings(value: Jsonable) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _free_base(*values: Jsonable) -> int:
    """The first of four consecutive private-use code points that no input string contains."""
    seen = "".join(s for v in values for s in _strings(v))
    base = 0xE000
    while any(chr(base + k) in seen for k in range(4)):
        base += 4
    return base


class Marks:
    def __init__(self, encoder: Encoder, messages: list[dict], tools: list[dict] | None,
                 source: str) -> None:
        self.encoder = encoder
        base = _free_base(messages, tools, source)
        self.open, self.close, self.json_u, self.json_a = (chr(base + k) for k in range(4))
        self.pattern = re.compile(f"([{self.open}{self.json_u}{self.json_a}])(\\d+){self.close}")
        escaped = [json.dumps(c)[1:-1].replace("\\", "\\\\") for c in (self.open, self.close)]
        self.in_json = re.compile(f"(?:{self.open}|{escaped[0]})(\\d+)(?:{self.close}|{escaped[1]})")
        self.originals: list[tuple[str, int, str]] = []  # (text, message index, slot)
        self.shared: dict[str, int] = {}  # tool strings: one sentinel per distinct string
        self.messages = [self._message(i, m) for i, m in enumerate(messages)]
        self.tools = [self._tool(t) for t in tools] if tools else None

    # -- marking ------------------------------------------------------------------------
    def _new(self, text: str, message: int, slot: str) -> str:
        self.originals.append((text, message, slot))
        return f"{self.open}{len(self.originals) - 1}{self.close}"

    def text(self, text: str, message: int, slot: str) -> str:
        """Free text: always marked (an empty string cannot inject, and templates test truthiness)."""
        return self._new(text, message, slot) if text else text

    def ident(self, text: str, message: int, slot: str) -> str:
        return self._new(text, message, slot) if self.encoder.could_form_special(text) else text

    def _message(self, i: int, msg: dict) -> dict:
        out = dict(msg)
        out["content"] = self.text(msg["content"], i, "content")
        if isinstance(msg.get("reasoning_content"), str):
            out["reasoning_content"] = self.text(msg["reasoning_content"], i, "reasoning")
        for key in ("name", "tool_call_id"):
            if isinstance(msg.get(key), str):
                out[key] = self.ident(msg[key], i, key)
        if msg.get("tool_calls"):
            out["tool_calls"] = [self._call(i, call) for call in msg["tool_calls"]]
        return out

    def _call(self, i: int, call: dict) -> dict:
        fn = dict(call["function"])
        fn["name"] = self.ident(fn["name"], i, "tool_call")
        if isinstance(fn.get("arguments"), str):
            fn["arguments"] = self.text(fn["arguments"], i, "tool_call")
        else:  # an object (a caller that skipped normalization): its strings are tool-like data
            fn["arguments"] = self._tool(fn.get("arguments"))
        return {**call, "id": self.ident(call["id"], i, "tool_call") if isinstance(call.get("id"), str)
                else call.get("id"), "function": fn}

    def _share(self, text: str, ident: bool) -> str:
        if not text or (ident and not self.encoder.could_form_special(text)):
            return text  # (protocol words never get here: _tool keeps them as they are)
        if text not in self.shared:
            self.shared[text] = len(self.originals)
            self.originals.append((text, -1, "tools"))
        return f"{self.open}{self.shared[text]}{self.close}"

    def _tool(self, value: Jsonable, key: str | None = None) -> Jsonable:
        if isinstance(value, dict):
            return {self._share(k, True) if isinstance(k, str) and k not in KEYWORDS else k:
                    self._tool(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self._tool(v, key) for v in value]
        if isinstance(value, str):
            if (key == "type" and value in TYPE_NAMES) or (key == "required" and value in KEYWORDS):
                return value  # as its key is kept (a property called "name")
            return self._share(value, key in IDENT_KEYS)
        return value

    # -- unmarking ----------------------------------------------------------------------
    def original(self, text: str) -> str:
        m = self.pattern.fullmatch(text)
        return self.originals[int(m.group(2))][0] if m else text

    def tojson(self, value: Jsonable, ensure_ascii: bool, indent: int | str | None,
               separators: tuple[str, str] | None, sort_keys: bool) -> str:
        """json.dumps whose sentinels come back as JSON sentinels (see the module docstring)."""
        if sort_keys:
            value = self._sorted(value)
        text = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators)
        mark = self.json_a if ensure_ascii else self.json_u
        return self.in_json.sub(lambda m: f"{mark}{m.group(1)}{self.close}", text)

    def _sorted(self, value: Jsonable) -> Jsonable:
        if isinstance(value, dict):
            return {k: self._sorted(value[k]) for k in sorted(value, key=lambda k: self.original(k)
                                                             if isinstance(k, str) else k)}
        if isinstance(value, list):
            return [self._sorted(v) for v in value]
        return value

    def form(self, kind: str, index: int) -> tuple[str, int, str]:
        """(text as the real render has it, message, slot) of a sentinel found in the render."""
        text, message, slot = self.originals[index]
        if kind != self.open:
            text = json.dumps(text, ensure_ascii=kind == self.json_a)[1:-1]
        return text, message, slot
