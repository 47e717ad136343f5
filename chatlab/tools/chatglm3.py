"""ChatGLM3 tool calls (build_chat_input's tools): an assistant turn whose metadata line is the tool
name and whose body is a fenced python `tool_call(k=v, ...)`; results are `<|observation|>` turns.
The official demo `eval`s the call; here `ast` reads literal values only."""
from __future__ import annotations

import ast
import json
import re
from typing import Sequence

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.tools.format import JINJA_CALLS, Bit, JinjaTurns, ToolFormat, Turn, data, dumps, lit, text
from chatlab.tools.stream import CallAtEndParser
from chatlab.types import ToolCall, ToolSpec

OBSERVATION = "<|observation|>"
FENCE, FUNC = "```", "tool_call"
CALL_OPEN, CALL_CLOSE = f"{FENCE}python\n{FUNC}(", f")\n{FENCE}"
SYSTEM = "Answer the following questions as best as you can. You have access to the following tools:"
NAME_SO_FAR = re.compile(r"[A-Za-z_][\w.\-]*[ \t]*")


class ChatGLM3Parser(CallAtEndParser):
    body_starts = (FENCE, FUNC + "(")
    name = ""  # the metadata line's tool name, once read

    def _held(self) -> str:
        return "".join(self.call_parts) if self.state == "call" else self.pending

    def _in_start(self, final: bool) -> None:
        s = self.pending
        if s.startswith("\n"):                 # empty metadata: a normal reply follows
            return self._to_content(s[1:])
        newline = s.find("\n")
        if newline < 0:
            if not final and (s == "" or NAME_SO_FAR.fullmatch(s)):
                return                         # could still be a tool name
            return self._to_content(s)
        self.name = s[:newline].strip()
        if self.name in self.names:
            return self._to_call(self.pending)
        if not NAME_SO_FAR.fullmatch(s[:newline]):
            return self._to_content(s)
        self.state = "maybe"
        self._in_maybe(final)

    def _in_maybe(self, final: bool) -> None:
        body = self.pending[self.pending.find("\n") + 1:].lstrip()
        if any(body.startswith(b) for b in self.body_starts):
            return self._to_call(self.pending)
        if final or not any(b.startswith(body) for b in self.body_starts):
            self._to_content(self.pending)

    def _to_content(self, text: str) -> None:
        self.state, self.pending = "content", ""
        self._content(text)

    def _parse_call(self) -> None:
        original = "".join(self.call_parts)
        arguments, error = parse_call_body(original[original.find("\n") + 1:])
        if error is None and self.name not in self.names:
            error = self.unknown_tool(self.name)
        if error is not None and self.cut and self.name in self.names:
            # the length limit ended the body; its Python is converted only whole: no arguments
            return self._call(self.name, "", original)
        if error is not None or arguments is None:
            return self._reject(None, error or "the tool call has no arguments", original)
        self._call(self.name, arguments)


def parse_call_body(body: str) -> tuple[str | None, str | None]:
    """(arguments JSON, None) for a safe `tool_call(k=literal, ...)`, else (None, reason)."""
    src = body.strip()
    if src.startswith(FENCE):
        src = src[src.find("\n") + 1:] if "\n" in src else ""
        close = src.rfind(FENCE)
        src = src[:close] if close >= 0 else src   # a missing closing fence is tolerated
    src = src.strip()
    if not src:
        return None, f"the tool call has no body (expected {FUNC}(...))"
    try:
        tree = ast.parse(src, mode="eval").body
    except SyntaxError as e:
        return None, f"the tool call is not a Python call expression ({e.msg})"
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == FUNC):
        return None, f"the tool call body must be {FUNC}(name=value, ...)"
    if tree.args or any(kw.arg is None for kw in tree.keywords):
        return None, f"{FUNC}(...) takes keyword arguments only"
    values = {}
    for kw in tree.keywords:
        try:   # literal_eval: strings, numbers, tuples, lists, dicts, sets, True/False/None only
            values[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None, f"{FUNC} argument {kw.arg!r} is not a plain literal (code is never run)"
    try:
        return json.dumps(values, ensure_ascii=False), None
    except (TypeError, ValueError):
        return None, f"{FUNC}(...) arguments must be JSON-like literals (no sets, bytes, complex)"


def py_literal(value: Jsonable) -> str:
    """A JSON value as ChatGLM3's `tool_call(k=v)` writes it (True/False/None at top level)."""
    return repr(value) if value is None or isinstance(value, bool) else dumps(value)


def call_body(args: str) -> str:
    """A call's arguments JSON text as ChatGLM3's fenced `tool_call(k=v, ...)`."""
    try:
        value = json.loads(args) if args.strip() else {}
    except ValueError:
        raise ChatlabError(f"tool call arguments are not valid JSON: {args[:80]!r}; "
                           "send arguments as a JSON object string") from None
    if not isinstance(value, dict):
        raise ChatlabError("tool call arguments must be a JSON object")
    return CALL_OPEN + ", ".join(f"{k}={py_literal(v)}" for k, v in value.items()) + CALL_CLOSE


# Python literal values for tool_call(k=v) (strings without escapes keep the grammar simple).
LITERALS = r'''
str ::= "\"" [^"\\\r\n]* "\""
int ::= "-"? ([0-9] | [1-9] [0-9]*)
num ::= int ("." [0-9]+)?
bool ::= "True" | "False"
none ::= "None"
any ::= str | num | bool | none | list | dict
list ::= "[" (any (", " any)*)? "]"
dict ::= "{" (str ": " any (", " str ": " any)*)? "}"
'''
TYPE_RULES = {"string": "str", "integer": "int", "number": "num", "boolean": "bool", "null": "none",
              "array": "list", "object": "dict"}


def _value_rule(schema: Jsonable) -> str:
    if isinstance(schema, dict) and isinstance(schema.get("enum"), list):
        if not schema["enum"]:
            raise ChatlabError("a parameter schema has an empty enum, which no value can match; "
                               "list at least one value or drop the enum")
        return " | ".join(json.dumps(py_literal(v)) for v in schema["enum"])  # as call_body writes them
    kind = schema.get("type") if isinstance(schema, dict) else None
    return TYPE_RULES.get(kind, "any") if isinstance(kind, str) else "any"


def kwargs_grammar(schema: dict) -> str:
    """EBNF for `k=v, ...`: required properties in schema order, then optional ones."""
    props = schema.get("properties") or {}
    required = [k for k in props if k in (schema.get("required") or [])]
    optional = [k for k in props if k not in required]
    rules = [f'p{i} ::= "{k}=" ({_value_rule(props[k])})' for i, k in enumerate(props)]
    index = {k: i for i, k in enumerate(props)}
    if required:
        root = ' ", " '.join(f"p{index[k]}" for k in required)
        root += "".join(f' (", " p{index[k]})?' for k in optional)
    elif optional:  # any subset, in order
        root = "(" + " | ".join(
            f"p{index[k]}" + "".join(f' (", " p{index[o]})?' for o in optional[j + 1:])
            for j, k in enumerate(optional)) + ")?"
    else:
        root = '""'
    return "root ::= " + root + "\n" + "\n".join(rules) + LITERALS


class ChatGLM3(ToolFormat):
    name = "chatglm3"
    parallel_calls = False
    content_with_calls = False
    end_tokens = (OBSERVATION,)
    default_system = SYSTEM
    parser_class = ChatGLM3Parser
    template_marks = (OBSERVATION,)

    def system_tools(self, tools: Sequence[ToolSpec], after_text: bool) -> list[Bit]:
        functions = [t.to_openai()["function"] for t in tools]
        return [text("\n", "tools"), data(dumps(functions, 4), "tools")]

    def call_bits(self, calls: Sequence[ToolCall], has_content: bool) -> list[Bit]:
        return [data(call_body(c.arguments), "tool_call") for c in calls]

    def assistant_turns(self, i: int, content: str, body: list[Bit], calls: Sequence[ToolCall],
                        prev: str | None, nxt: str | None) -> list[Turn]:
        turns = [Turn("assistant", body)] if content or not calls else []
        return turns + [Turn("assistant", self.call_bits([c], False), meta=c.name) for c in calls]

    def reply_text(self, content: str, calls: Sequence[ToolCall]) -> str:
        # the metadata line is the tool name, or empty: a plain reply starts with "\n"
        if not calls:
            return "\n" + content
        return "".join(f"{c.name}\n" + call_body(c.arguments) for c in calls)

    def jinja_system(self) -> str:
        return ("{%- if tools %}{%- set ns.body = (sys if sys is not none else " + lit(SYSTEM) +
                ") + '\\n' + tools | map(attribute='function') | list | tojson(indent=4) %}{%- endif %}")

    def jinja_assistant(self, w: JinjaTurns) -> str:
        value = "(('True' if v else 'False') if v is boolean else ('None' if v is none else v | tojson))"
        return ("{%- if m.tool_calls %}{%- if ns.c %}" + w.turn("assistant", "ns.body") + "{%- endif %}" +
                JINJA_CALLS + "{%- if f.arguments is string %}{{- raise_exception("
                "'this template needs tool-call arguments as JSON objects, not strings') }}{%- endif %}"
                "{%- set ns.kw = '' %}{%- for k, v in f.arguments.items() %}{%- set ns.kw = ns.kw + "
                "(', ' if not loop.first else '') + k + '=' + " + value + " %}{%- endfor %}" +
                w.turn("assistant", lit(CALL_OPEN) + " + ns.kw + " + lit(CALL_CLOSE), meta="f.name") +
                "{%- endfor %}{%- else %}" + w.turn("assistant", "ns.body") + "{%- endif %}")

    def call_tag(self, tool: ToolSpec) -> dict:
        try:
            grammar = kwargs_grammar(tool.schema)
        except ChatlabError as err:
            raise ChatlabError(f"tool {tool.name!r}: {err}") from None
        return {"type": "tag", "begin": f"{tool.name}\n{CALL_OPEN}",
                "content": {"type": "grammar", "grammar": grammar}, "end": CALL_CLOSE}


CHATGLM3 = ChatGLM3()
