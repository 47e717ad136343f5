"""The values Ollama hands its Go template (template.go, api/types.go at fb30760), and Go's ways
of printing and comparing them. Client strings stay `Val`s, encoded as content."""
from __future__ import annotations

import json
from typing import Sequence

from chatlab._thirdparty import GoValue
from chatlab.types import Message, ToolSpec


class Val(str):
    """A string that came from message `msg` (slot `slot`): rendered as content, never as markup."""

    msg: int
    slot: str

    def __new__(cls, text: str, msg: int, slot: str = "content") -> "Val":
        v = super().__new__(cls, text)
        v.msg, v.slot = msg, slot
        return v


class GoStruct(dict):
    """Go field name -> value, with the json (name, omitempty) of each field in order;
    `stringer`: the Go type's String() returns its JSON."""

    def __init__(self, fields: list[tuple[str, str, bool, GoValue]], type_name: str = "struct",
                 stringer: bool = False) -> None:
        super().__init__((go, value) for go, _, _, value in fields)
        self.json_fields = [(go, name, omit) for go, name, omit, _ in fields]
        self.type_name, self.stringer = type_name, stringer


class GoMap(dict):
    """A named Go map type whose String() returns its JSON; `ordered`: Ollama's orderedmap."""

    def __init__(self, items: GoValue, type_name: str, ordered: bool = False) -> None:
        super().__init__(items)
        self.type_name, self.ordered, self.stringer = type_name, ordered, not ordered


class GoList(list):
    """templateTools: a slice whose String() returns its JSON."""

    stringer = True
    type_name = "template.templateTools"


class PropertyType(list):
    """api.PropertyType: type names that print and marshal as the one name when there is one."""

    type_name = "api.PropertyType"


def keys(v: dict) -> list[GoValue]:
    """The order Go ranges and marshals a map in: sorted, except Ollama's ordered maps."""
    return list(v) if isinstance(v, GoMap) and v.ordered else sorted(v, key=str)


def truth(v: GoValue) -> bool:
    """Go's truth: false, 0, nil and empty strings / lists / maps are false; structs are true."""
    if isinstance(v, GoStruct):
        return True
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return bool(v)
    return v != 0


def value_owner(v: GoValue) -> tuple[int, str] | None:
    """The (message, slot) of the first client string inside `v`, if any."""
    if isinstance(v, Val):
        return v.msg, v.slot
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, (list, tuple)):
        for x in v:
            found = value_owner(x)
            if found:
                return found
    return None


def _plain(v: GoValue) -> GoValue:
    if isinstance(v, GoStruct):
        return {name: _plain(v[go]) for go, name, omit in v.json_fields if not (omit and not truth(v[go]))}
    if isinstance(v, PropertyType) and len(v) == 1:
        return _plain(v[0])
    if isinstance(v, dict):
        return {str(k): _plain(v[k]) for k in keys(v)}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return str(v) if isinstance(v, Val) else v


def go_json(v: GoValue) -> str:
    """Go's json.Marshal of `v` (HTML-safe escaping, as Go does by default)."""
    text = json.dumps(_plain(v), ensure_ascii=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def go_print(v: GoValue) -> str:
    """fmt's %v of a value (what {{ . }} and printf %v write)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "<nil>"
    if isinstance(v, (GoStruct, GoMap, GoList)) and v.stringer:
        return go_json(v)
    if isinstance(v, PropertyType):
        return str(v[0]) if len(v) == 1 else "" if not v else "[" + " ".join(map(str, v)) + "]"
    if isinstance(v, GoStruct):
        return "{" + " ".join(go_print(v[go]) for go, _, _ in v.json_fields) + "}"
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{go_print(v[k])}" for k in keys(v)) + "]"
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(go_print(x) for x in v) + "]"
    return str(v)


def printf(fmt: str, args: list[GoValue]) -> str:
    """fmt.Sprintf for the verbs templates use: %s %v %d %q %t %T %%."""
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
            out.append(go_quote(str(a)))
        elif verb == "T":
            out.append(go_type(a))
        elif verb == "d" and isinstance(a, int) and not isinstance(a, bool):
            out.append(str(a))
        elif verb in "svdt":
            out.append(go_print(a))
        else:
            out.append(f"%!{verb}({go_print(a)})")
    return "".join(out)


def go_quote(s: str) -> str:
    """strconv.Quote (printf %q): printable runes as they are, the rest escaped."""
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _SHORT:
            out.append(_SHORT[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out) + '"'


_SHORT = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_type(v: GoValue) -> str:
    """printf %T: the Go type of a value as Ollama's template sees it (JSON numbers are float64)."""
    if isinstance(v, (GoStruct, GoMap, GoList, PropertyType)):
        return v.type_name
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (int, float)):
        return "float64"
    if v is None:
        return "<nil>"
    return "map[string]interface {}" if isinstance(v, dict) else "[]interface {}"


def _args(text: str) -> GoValue:
    """A call's arguments as Ollama holds them: a map whose numbers are float64 (3.0 prints 3)."""
    try:
        value = json.loads(text, parse_float=lambda x: int(float(x)) if float(x).is_integer() and abs(float(x)) < 1e21
                           else float(x))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _strings(v: GoValue, msg: int, slot: str) -> GoValue:
    """Every string value inside `v` as a Val of that message (client text); Go types kept."""
    if isinstance(v, str):
        return Val(v, msg, slot)
    if isinstance(v, GoStruct):
        fields = [(go, name, omit, _strings(v[go], msg, slot)) for go, name, omit in v.json_fields]
        return GoStruct(fields, v.type_name, v.stringer)
    if isinstance(v, GoMap):
        return GoMap({k: _strings(x, msg, slot) for k, x in v.items()}, v.type_name, v.ordered)
    if isinstance(v, dict):
        return {k: _strings(x, msg, slot) for k, x in v.items()}
    if isinstance(v, list):
        return type(v)(_strings(x, msg, slot) for x in v)
    return v


def tool_calls(m: Message, msg: int) -> list[GoStruct]:
    """templateToolCall{ID, Function{Index, Name, Arguments}}: no json tags (`json` writes Go names)."""
    return [GoStruct([("ID", "ID", False, Val(c.id, msg, "tool_call")),
                      ("Function", "Function", False, GoStruct([
                          ("Index", "Index", False, k),
                          ("Name", "Name", False, Val(c.name, msg, "tool_call")),
                          ("Arguments", "Arguments", False,
                           GoMap(_strings(_args(c.arguments), msg, "tool_call"), "template.templateArgs"))],
                          "template.templateToolCallFunction"))], "template.templateToolCall")
            for k, c in enumerate(m.tool_calls)]


def message(m: Message, msg: int, content: Val) -> dict[str, GoValue]:
    return {"Role": m.role, "Content": content, "Thinking": Val(m.reasoning or "", msg, "reasoning"),
            "ToolCalls": tool_calls(m, msg), "ToolName": Val(m.name or "", msg, "name"),
            "ToolCallID": Val(m.tool_call_id or "", msg, "tool_call_id"), "_index": msg}


def _property(v: dict) -> GoStruct:
    """api.ToolProperty: the schema keys Ollama keeps (it drops the others)."""
    kind = v.get("type")
    kind = [kind] if isinstance(kind, str) else list(kind or [])
    nested = v.get("properties")
    return GoStruct([
        ("AnyOf", "anyOf", True, [_property(x) for x in v.get("anyOf") or [] if isinstance(x, dict)]),
        ("Type", "type", True, PropertyType(kind)),
        ("Items", "items", True, v.get("items")),
        ("Description", "description", True, v.get("description", "")),
        ("Enum", "enum", True, v.get("enum")),
        ("Properties", "properties", True, GoMap({k: _property(x) for k, x in nested.items() if isinstance(x, dict)},
                                                 "*api.ToolPropertiesMap", ordered=True) if isinstance(nested, dict) else None),
        ("Required", "required", True, list(v.get("required") or []))], "api.ToolProperty")


def tools(specs: Sequence[ToolSpec]) -> GoList | None:
    """templateTools (nil without tools)."""
    if not specs:
        return None
    out = GoList()
    for t in specs:
        schema = t.schema or {}
        props = schema.get("properties")
        params = GoStruct([("Type", "type", False, schema.get("type", "")),
                           ("Defs", "$defs", True, schema.get("$defs")),
                           ("Items", "items", True, schema.get("items")),
                           ("Required", "required", True, list(schema.get("required") or [])),
                           ("Properties", "properties", False,
                            GoMap({k: _property(v) for k, v in props.items() if isinstance(v, dict)},
                                  "template.templateProperties") if isinstance(props, dict) else None)],
                          "template.templateToolFunctionParameters")
        fn = GoStruct([("Name", "name", False, t.name), ("Description", "description", False, t.description or ""),
                       ("Parameters", "parameters", False, params)], "template.templateToolFunction")
        tool = GoStruct([("Type", "type", False, "function"), ("Items", "items", True, None),
                         ("Function", "function", False, fn)], "template.templateTool", stringer=True)
        out.append(_strings(tool, -1, "tools"))  # tool definitions are client text too
    return out
