"""The subset of Go's text/template that Ollama chat templates use: parser (evaluator: goeval.py).

Read: text; fields and chains of them (`.System`, `.Function.Name`, `$.Tools`, `$m.ToolCalls`);
`if` / `else if` / `else` / `end`; `range` over a list or a map (`range $i, $m := ...`, `else`,
`break`, `continue`); `$x := expr` / `$x = expr`; the functions in FUNCS; string, integer and
boolean literals; parentheses; comments; and the trim markers `{{-` / `-}}`. The fields are
those Ollama passes (template.go: DOT_FIELDS). Anything else (pipes, `with`, `template`,
`block`, method calls, other fields) is refused at parse time with the line and the construct,
so an imported template never renders differently from Ollama in silence. Values that came from
a message keep their message index (`Val`), so the output is encoded at id level.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from chatlab._thirdparty import GoValue
from chatlab.errors import ChatlabError

DOT_FIELDS = {"System", "Prompt", "Suffix", "Response", "Messages", "Role", "Content", "Thinking", "Tools",
          "ToolCalls", "ToolName", "ToolCallID", "Type", "Function", "Name", "Description", "Parameters",
          "Required", "Properties", "Enum", "Items", "Index", "Arguments", "ID", "Think", "ThinkLevel",
          "IsThinkSet"}
FUNCS = {"eq", "ne", "lt", "le", "gt", "ge", "not", "and", "or", "len", "slice", "index", "print",
         "printf", "json"}
SUBSET = ("if/else/end, range/break/continue, $variables, eq/ne/lt/le/gt/ge/not/and/or/len/slice/index/"
          "print/printf/json and the fields Ollama passes (.System .Messages .Role .Content .Tools "
          ".ToolCalls .Function.Name ...)")
WS = " \t\r\n"
MAX_DEPTH = 100  # nesting of if/range (and parentheses): a few levels in real templates
ACTION = re.compile(r"\{\{(-[ \t\r\n])?(.*?)([ \t\r\n]-)?\}\}", re.S)
TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<raw>`[^`]*`)|(?P<op>:=|=|,|\(|\))|'
                   r"(?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z_]\w*)*)|(?P<field>(?:\.[A-Za-z_]\w*)+|\.)|"
                   r"(?P<num>-?\d+)|(?P<name>[A-Za-z_]\w*)|(?P<bad>\S+))")


class Val(str):
    """A string that came from message `msg` (slot `slot`): rendered as content, never as markup."""

    msg: int
    slot: str

    def __new__(cls, text: str, msg: int, slot: str = "content") -> "Val":
        v = super().__new__(cls, text)
        v.msg, v.slot = msg, slot
        return v


@dataclass
class GoNode:
    kind: str  # "text" | "out" | "if" | "range" | "set"
    line: int
    value: GoValue = None  # text, or the expression (a parsed tuple)
    branches: list = field(default_factory=list)  # if: [(cond, body)]; range: [(expr, body)]
    orelse: list = field(default_factory=list)
    names: tuple = ()  # range / set variables


def _err(line: int, what: str, fix: str = "") -> ChatlabError:
    return ChatlabError(f"Ollama TEMPLATE line {line}: {what}; chatlab reads only {SUBSET}. "
                        + (fix or "Rewrite it with those, or import the model's Jinja chat_template instead"))


class Parser:
    def __init__(self, source: str, first_line: int = 1) -> None:
        self.items: list[tuple[str, str, int]] = []  # ("text", s, line) | ("act", body, line)
        pos, line = 0, first_line
        for m in ACTION.finditer(source):
            text = source[pos:m.start()]
            if m.group(1):
                text = text.rstrip(WS)
            if self.items and self.items[-1][0] == "trim":
                self.items.pop()
                text = text.lstrip(WS)
            self.items.append(("text", text, line))
            line += source.count("\n", pos, m.start())
            self.items.append(("act", m.group(2).strip(), line))
            if m.group(3):
                self.items.append(("trim", "", line))
            line += source.count("\n", m.start(), m.end())
            pos = m.end()
        tail = source[pos:]
        if self.items and self.items[-1][0] == "trim":
            self.items.pop()
            tail = tail.lstrip(WS)
        self.items.append(("text", tail, line))
        if "{{" in "".join(x[1] for x in self.items if x[0] == "text"):
            raise _err(line, "an unclosed '{{'", "Close every action with }}")
        self.k = 0

    def parse(self) -> list[GoNode]:
        body, stop, line = self.block(())
        if stop is not None:
            raise _err(line, f"'{{{{ {stop} }}}}' without a matching if/range", "Remove it or add the opening action")
        return body

    def block(self, stops: tuple[str, ...], depth: int = 1) -> tuple[list[GoNode], str | None, int]:
        if depth > MAX_DEPTH:
            raise _err(self.items[min(self.k, len(self.items) - 1)][2], f"if/range nested more than {MAX_DEPTH} deep",
                       "Flatten the template; real chat templates nest a few levels")
        out: list[GoNode] = []
        while self.k < len(self.items):
            kind, body, line = self.items[self.k]
            self.k += 1
            if kind == "text":
                if body:
                    out.append(GoNode("text", line, body))
                continue
            if body.startswith("/*") or not body:
                continue  # a comment
            word = body.split(None, 1)[0]
            if word in ("end", "else") and word in stops:
                return out, body, line
            if word in ("end", "else"):
                raise _err(line, f"'{{{{ {body} }}}}' without a matching if/range", "Remove it or add the opening action")
            if word == "if":
                out.append(self.if_(body[2:], line, depth + 1))
            elif word == "range":
                out.append(self.range_(body[5:], line, depth + 1))
            elif word in ("break", "continue") and body == word:
                out.append(GoNode(word, line))
            elif word in ("with", "template", "block", "define"):
                raise _err(line, f"the '{word}' action")
            elif m := re.fullmatch(r"(\$\w+)\s*(:?=)\s*(.*)", body, re.S):
                out.append(GoNode("set", line, Expr(m.group(3), line).parse(), names=m.group(1, 2)))
            else:
                out.append(GoNode("out", line, Expr(body, line).parse()))
        if stops:
            raise _err(self.items[-1][2], "an if/range without '{{ end }}'", "Close it with {{ end }}")
        return out, None, 0

    def if_(self, cond: str, line: int, depth: int) -> GoNode:
        node = GoNode("if", line)
        while True:
            body, stop, _ = self.block(("end", "else"), depth)
            node.branches.append((Expr(cond, line).parse(), body))
            if stop == "end" or stop is None:  # None only without stops: block() raised already
                return node
            rest = stop[4:].strip()
            if rest.startswith("if "):
                cond = rest[3:]
                continue
            if rest:
                raise _err(line, f"'else {rest}'")
            node.orelse, stop, _ = self.block(("end",), depth)
            return node

    def range_(self, spec: str, line: int, depth: int) -> GoNode:
        names: tuple = ()
        m = re.fullmatch(r"\s*(\$\w*)\s*(?:,\s*(\$\w*)\s*)?:=\s*(.*)", spec, re.S)
        if m:
            names, spec = tuple(x for x in m.group(1, 2) if x), m.group(3)
        node = GoNode("range", line, names=names)
        body, stop, _ = self.block(("end", "else"), depth)
        node.branches.append((Expr(spec, line).parse(), body))
        if stop != "end":
            node.orelse, _, _ = self.block(("end",), depth)
        return node


class Expr:
    """One pipeline without `|`: a term, or a function applied to terms."""

    def __init__(self, text: str, line: int) -> None:
        self.line, self.text = line, text.strip()
        self.toks = [(m.lastgroup, m.group(m.lastgroup)) for m in TOKEN.finditer(text) if m.lastgroup]
        self.k = self.depth = 0  # token index; parentheses open

    def parse(self) -> tuple:
        if "|" in self.text.replace('"|"', ""):
            raise _err(self.line, f"a pipe in '{self.text}'")
        e = self.command()
        if self.k < len(self.toks):
            raise _err(self.line, f"unexpected {self.toks[self.k][1]!r} in '{self.text}'")
        return e

    def command(self) -> tuple:
        kind, tok = self.toks[self.k] if self.k < len(self.toks) else ("end", "")
        if kind == "name" and tok in FUNCS:
            self.k += 1
            args = []
            while self.k < len(self.toks) and self.toks[self.k][1] != ")":
                args.append(self.term())
            return ("call", tok, args)
        return self.term()

    def term(self) -> tuple:
        if self.k >= len(self.toks):
            raise _err(self.line, f"an incomplete expression '{self.text}'")
        kind, tok = self.toks[self.k]
        self.k += 1
        if tok == "(":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _err(self.line, f"parentheses nested more than {MAX_DEPTH} deep")
            e = self.command()
            self.depth -= 1
            if self.k >= len(self.toks) or self.toks[self.k][1] != ")":
                raise _err(self.line, f"an unbalanced '(' in '{self.text}'")
            self.k += 1
            return e
        if kind in ("str", "raw"):
            return ("lit", json.loads(tok) if kind == "str" else tok[1:-1])
        if kind == "num":
            return ("lit", int(tok))
        if kind == "name" and tok in ("true", "false"):
            return ("lit", tok == "true")
        if kind in ("var", "field"):
            root, *names = tok.split(".") if kind == "var" else ["", *tok.split(".")[1:]]
            bad = [n for n in names if n and n not in DOT_FIELDS]
            if bad:
                raise _err(self.line, f"the field {tok!r}",
                           "Ollama passes no such field (template.go); use a template without it")
            return ("get", root, [n for n in names if n])
        raise _err(self.line, f"the {'function' if kind == 'name' else 'token'} {tok!r} in '{self.text}'")
