"""The values Ollama hands its Go template, and Go's ways of printing and comparing them.

Ollama's template.go passes api.Message / api.Tool structs; a struct's fields print through
Ollama's `json` func (Go's json.Marshal: struct fields in declaration order under their json
names, map keys sorted, compact, with <, > and & escaped as \\u003c \\u003e \\u0026). `GoStruct`
keeps the Go field names for the template and the json names and order for `json`; a plain dict
is a Go map (range and json go in key order). Strings from the client stay `Val`s, so whatever
prints them (directly, through printf or json) is encoded as content, never as control ids.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

from chatlab.render.io.gotemplate import Val
from chatlab.types import Message, ToolSpec


class GoStruct(dict):
    """Go field name -> value, with the json (name, omitempty) of each field in order."""

    def __init__(self, fields: list[tuple[str, str, bool, Any]]) -> None:
        super().__init__((go, value) for go, _, _, value in fields)
        self.json_fields = [(go, name, omit) for go, name, omit, _ in fields]


def truth(v: Any) -> bool:
    """Go's truth: false, 0, nil and empty strings / lists / maps are false; structs are true."""
    if isinstance(v, GoStruct):
        return True
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return bool(v)
    return v != 0


def owner(v: Any) -> tuple[int, str] | None:
    """The (message, slot) of the first client string inside `v`, if any."""
    if isinstance(v, Val):
        return v.msg, v.slot
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, (list, tuple)):
        for x in v:
            found = owner(x)
            if found:
                return found
    return None


def _plain(v: Any) -> Any:
    if isinstance(v, GoStruct):
        return {name: _plain(v[go]) for go, name, omit in v.json_fields if not (omit and not truth(v[go]))}
    if isinstance(v, dict):
        return {str(k): _plain(v[k]) for k in sorted(v, key=str)}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return str(v) if isinstance(v, Val) else v


def go_json(v: Any) -> str:
    """Go's json.Marshal of `v` (HTML-safe escaping, as Go does by default)."""
    text = json.dumps(_plain(v), ensure_ascii=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def go_print(v: Any) -> str:
    """fmt's %v of a value (what {{ . }} and printf %v write)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "<nil>"
    if isinstance(v, GoStruct):
        return "{" + " ".join(go_print(v[go]) for go, _, _ in v.json_fields) + "}"
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{go_print(v[k])}" for k in sorted(v, key=str)) + "]"
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(go_print(x) for x in v) + "]"
    return str(v)


def printf(fmt: str, args: list[Any]) -> str:
    """fmt.Sprintf for the verbs templates use: %s %v %d %q %t %%."""
    out, k, i = [], 0, 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%" or i + 1 == len(fmt):
            out.append(c)
            i += 1
            continue
        verb = fmt[i + 1]
        i += 2
        if verb == "%":
            out.append("%")
            continue
        if k >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        a = args[k]
        k += 1
        if verb == "q":
            out.append(json.dumps(str(a), ensure_ascii=False))
        elif verb == "d" and isinstance(a, int) and not isinstance(a, bool):
            out.append(str(a))
        elif verb in "svdt":
            out.append(go_print(a))
        else:
            out.append(f"%!{verb}({go_print(a)})")
    return "".join(out)


def _args(text: str) -> Any:
    """A call's arguments as Ollama holds them: a map (the JSON text parsed)."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _strings(v: Any, msg: int, slot: str) -> Any:
    """Every string inside `v` as a Val of that message (client text)."""
    if isinstance(v, str):
        return Val(v, msg, slot)
    if isinstance(v, dict):
        return {k: _strings(x, msg, slot) for k, x in v.items()}
    if isinstance(v, list):
        return [_strings(x, msg, slot) for x in v]
    return v


def tool_calls(m: Message, msg: int) -> list[GoStruct]:
    return [GoStruct([("ID", "id", True, Val(c.id, msg, "tool_call")),
                      ("Function", "function", False, GoStruct([
                          ("Index", "index", True, k),
                          ("Name", "name", False, Val(c.name, msg, "tool_call")),
                          ("Arguments", "arguments", False, _strings(_args(c.arguments), msg, "tool_call"))]))])
            for k, c in enumerate(m.tool_calls)]


def message(m: Message, msg: int, content: Val) -> dict[str, Any]:
    return {"Role": m.role, "Content": content, "Thinking": Val(m.reasoning or "", msg, "reasoning"),
            "ToolCalls": tool_calls(m, msg), "ToolName": Val(m.name or "", msg, "name"),
            "ToolCallID": Val(m.tool_call_id or "", msg, "tool_call_id"), "_index": msg}


def tools(specs: Sequence[ToolSpec]) -> list[GoStruct]:
    out = []
    for t in specs:
        schema = t.schema
        props = {k: GoStruct([("Type", "type", False, v.get("type", "")),
                              ("Items", "items", True, v.get("items")),
                              ("Description", "description", False, v.get("description", "")),
                              ("Enum", "enum", True, v.get("enum"))])
                 for k, v in (schema.get("properties") or {}).items() if isinstance(v, dict)}
        params = GoStruct([("Type", "type", False, schema.get("type", "object")),
                           ("Required", "required", False, list(schema.get("required") or [])),
                           ("Properties", "properties", False, props)])
        fn = GoStruct([("Name", "name", False, t.name), ("Description", "description", False, t.description),
                       ("Parameters", "parameters", False, params)])
        out.append(GoStruct([("Type", "type", False, "function"), ("Function", "function", False, fn)]))
    return [_strings_struct(x) for x in out]


def _strings_struct(v: Any) -> Any:
    """Tool definitions are client text too: their strings become Vals of the tools slot."""
    if isinstance(v, GoStruct):
        s = GoStruct([(go, name, omit, _strings_struct(v[go])) for go, name, omit in v.json_fields])
        return s
    if isinstance(v, dict):
        return {k: _strings_struct(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_strings_struct(x) for x in v]
    return Val(v, -1, "tools") if isinstance(v, str) and not isinstance(v, Val) else v
