"""The subset of Go's text/template that Ollama chat templates use: its parser and evaluator.
Anything outside SUBSET is refused at parse time, naming the line, so an import never renders
unlike Ollama in silence."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from chatlab._thirdparty import GoValue
from chatlab.errors import ChatlabError
from chatlab.render.encoder import Piece
from chatlab.render.io.govalues import GoStruct, Val, go_json, go_print, keys, printf, truth, value_owner

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
        pos, line, trim = 0, first_line, False  # trim: the last action ended with -}}
        for m in ACTION.finditer(source):
            text = source[pos:m.start()].lstrip(WS) if trim else source[pos:m.start()]
            self.items.append(("text", text.rstrip(WS) if m.group(1) else text, line))
            line += source.count("\n", pos, m.start())
            self.items.append(("act", m.group(2).strip(), line))
            trim = bool(m.group(3))
            line += source.count("\n", m.start(), m.end())
            pos = m.end()
        self.items.append(("text", source[pos:].lstrip(WS) if trim else source[pos:], line))
        if "{{" in "".join(x[1] for x in self.items if x[0] == "text"):
            raise _err(line, "an unclosed '{{'", "Close every action with }}")
        self.k = 0

    def parse(self) -> list[GoNode]:
        body, stop, line = self.block((), loop=False)
        if stop is not None:
            raise _err(line, f"'{{{{ {stop} }}}}' without a matching if/range", "Remove it or add the opening action")
        return body

    def block(self, stops: tuple[str, ...], loop: bool,
              depth: int = 1) -> tuple[list[GoNode], str | None, int]:
        """Nodes up to one of `stops`; `loop`: inside a range's body, where break and continue may go."""
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
                out.append(self.if_(body[2:], line, loop, depth + 1))
            elif word == "range":
                out.append(self.range_(body[5:], line, loop, depth + 1))
            elif word in ("break", "continue") and body == word:
                if not loop:  # as Go's parser refuses it: at render time it would have no loop to leave
                    raise _err(line, f"'{{{{ {word} }}}}' outside a range",
                               "Move it inside a {{ range }} ... {{ end }} body, or remove it")
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

    def if_(self, cond: str, line: int, loop: bool, depth: int) -> GoNode:
        node = GoNode("if", line)
        while True:
            body, stop, _ = self.block(("end", "else"), loop, depth)
            node.branches.append((Expr(cond, line).parse(), body))
            if stop == "end" or stop is None:  # None only without stops: block() raised already
                return node
            rest = stop[4:].strip()
            if rest.startswith("if "):
                cond = rest[3:]
                continue
            if rest:
                raise _err(line, f"'else {rest}'")
            node.orelse, stop, _ = self.block(("end",), loop, depth)
            return node

    def range_(self, spec: str, line: int, loop: bool, depth: int) -> GoNode:
        names: tuple = ()
        m = re.fullmatch(r"\s*(\$\w*)\s*(?:,\s*(\$\w*)\s*)?:=\s*(.*)", spec, re.S)
        if m:
            names, spec = tuple(x for x in m.group(1, 2) if x), m.group(3)
        node = GoNode("range", line, names=names)
        body, stop, _ = self.block(("end", "else"), True, depth)
        node.branches.append((Expr(spec, line).parse(), body))
        if stop != "end":  # the else runs when there is nothing to range over: not in this loop
            node.orelse, _, _ = self.block(("end",), loop, depth)
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


MAX_PIECES = 200_000  # far above any prompt; bounds time and memory on a runaway template


class _Jump(Exception):
    """`{{ break }}` or `{{ continue }}` (its args[0]): leaves the body of the innermost range."""


class Evaluator:
    def __init__(self, root: dict[str, GoValue]) -> None:
        self.root = root
        self.out: list[Piece] = []

    def run(self, nodes: list[GoNode], dot: GoValue, scopes: list[dict[str, GoValue]], owner: int) -> None:
        scopes = [*scopes, {}]
        for n in nodes:
            if len(self.out) > MAX_PIECES:
                raise ChatlabError(f"Ollama TEMPLATE line {n.line}: the render passed {MAX_PIECES} pieces; "
                                   "a chat template's output is a prompt, so this template is refused as runaway")
            if n.kind == "text":
                self.out.append(Piece("text", n.value, owner, "template"))
            elif n.kind == "out":
                self.emit(self.eval(n.value, dot, scopes, n.line), owner)
            elif n.kind == "set":
                name, op = n.names
                value = self.eval(n.value, dot, scopes, n.line)
                target = next((s for s in reversed(scopes) if name in s), None) if op == "=" else scopes[-1]
                if target is None:
                    raise ChatlabError(f"Ollama TEMPLATE line {n.line}: {name} is assigned before it is declared (:=)")
                target[name] = value
            elif n.kind == "if":
                for cond, body in n.branches:
                    if truth(self.eval(cond, dot, scopes, n.line)):
                        self.run(body, dot, scopes, owner)
                        break
                else:
                    self.run(n.orelse, dot, scopes, owner)
            elif n.kind == "range":
                self.range_(n, dot, scopes, owner)
            elif n.kind in ("break", "continue"):
                raise _Jump(n.kind)

    def range_(self, n: GoNode, dot: GoValue, scopes: list[dict[str, GoValue]], owner: int) -> None:
        expr, body = n.branches[0]
        items = self.eval(expr, dot, scopes, n.line)
        if isinstance(items, dict) and not isinstance(items, GoStruct):  # a Go map: in key order
            pairs = [(k, items[k]) for k in keys(items)]
        elif isinstance(items, (list, tuple)):
            pairs = list(enumerate(items))
        elif items is None or items == "":
            pairs = []
        else:
            raise ChatlabError(f"Ollama TEMPLATE line {n.line}: range over a {type(items).__name__}; "
                               "range over a list or a map (.Messages, .Tools, .ToolCalls, ...)")
        for key, item in pairs:
            names = dict(zip(n.names, (key, item))) if len(n.names) == 2 else dict(zip(n.names, (item,)))
            who = item.get("_index", owner) if isinstance(item, dict) and not isinstance(item, GoStruct) else owner
            try:
                self.run(body, item, [*scopes, names], who)
            except _Jump as jump:
                if jump.args[0] == "break":
                    break
        if not pairs:
            self.run(n.orelse, dot, scopes, owner)

    def emit(self, v: GoValue, owner: int) -> None:
        if isinstance(v, Val):
            self.out.append(Piece("content", str(v), v.msg, v.slot))
        elif isinstance(v, (str, int, float, bool)) or v is None:
            self.out.append(Piece("text", go_print(v), owner, "template"))
        else:  # a struct, list or map printed as Go prints it: client data, so content
            who = value_owner(v) or (owner, "template")
            self.out.append(Piece("content", go_print(v), who[0], who[1]))

    def field(self, value: GoValue, name: str, line: int) -> GoValue:
        if isinstance(value, GoStruct):
            if name not in value:
                raise ChatlabError(f"Ollama TEMPLATE line {line}: a {type(value).__name__} has no field .{name}")
            return value[name]
        if isinstance(value, dict):
            return value.get(name, "")
        if value is None or value == "":
            return ""  # a missing map entry's field: Go's zero value prints nothing here
        raise ChatlabError(f"Ollama TEMPLATE line {line}: .{name} of a {type(value).__name__}")

    def eval(self, e: tuple, dot: GoValue, scopes: list[dict[str, GoValue]], line: int) -> GoValue:
        kind = e[0]
        if kind == "lit":
            return e[1]
        if kind == "get":
            _, root, names = e
            if root == "":
                value = dot
            elif root == "$":
                value = self.root
            else:
                scope = next((s for s in reversed(scopes) if root in s), None)
                if scope is None:
                    raise ChatlabError(f"Ollama TEMPLATE line {line}: undefined variable {root}")
                value = scope[root]
            for name in names:
                value = self.field(value, name, line)
            return value
        _, fn, args = e
        if fn == "and" or fn == "or":  # Go returns the deciding operand, evaluating lazily
            value = None
            for a in args:
                value = self.eval(a, dot, scopes, line)
                if truth(value) != (fn == "and"):
                    return value
            return value
        return call(fn, [self.eval(a, dot, scopes, line) for a in args], line)


ARITY = {"not": 1, "len": 1, "ne": 2, "lt": 2, "le": 2, "gt": 2, "ge": 2, "json": 1}


def call(fn: str, vals: list[GoValue], line: int) -> GoValue:
    """The functions of the subset, with Go's argument rules."""
    want = ARITY.get(fn)
    if (want and len(vals) != want) or (fn in ("eq", "index", "printf") and len(vals) < (2 if fn == "eq" else 1)) \
            or (fn == "slice" and not vals):
        raise ChatlabError(f"Ollama TEMPLATE line {line}: {fn} takes {want or 'more'} argument(s), got {len(vals)}")
    if fn == "not":
        return not truth(vals[0])
    if fn == "eq":
        return any(vals[0] == v for v in vals[1:])
    if fn == "ne":
        return vals[0] != vals[1]
    if fn in ("lt", "le", "gt", "ge"):
        a, b = vals
        if type(a) is bool or type(b) is bool or isinstance(a, str) != isinstance(b, str):
            raise ChatlabError(f"Ollama TEMPLATE line {line}: {fn} compares a {type(a).__name__} with a "
                               f"{type(b).__name__}; Go compares only numbers with numbers, strings with strings")
        return {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[fn]
    if fn == "len":
        return 0 if vals[0] is None else len(vals[0])  # Go's len of a nil slice (no tools)
    if fn == "json":
        who = value_owner(vals[0])
        text = go_json(vals[0])
        return Val(text, *who) if who else text
    if fn in ("print", "printf"):
        text = printf(str(vals[0]), vals[1:]) if fn == "printf" else _sprint(vals)
        who = value_owner(vals)
        return Val(text, *who) if who else text  # client text in it: encoded as content
    if fn == "index":
        value = vals[0]
        for k in vals[1:]:
            try:
                value = value[k] if not isinstance(value, dict) or k in value else ""
            except (IndexError, TypeError, KeyError):
                raise ChatlabError(f"Ollama TEMPLATE line {line}: index {k!r} is out of range") from None
        return value
    bounds = vals[1:3]
    if not all(isinstance(b, int) for b in bounds):
        raise ChatlabError(f"Ollama TEMPLATE line {line}: slice takes integer indices")
    return vals[0][slice(*bounds)] if len(bounds) == 2 else vals[0][bounds[0]:] if bounds else vals[0]


def _sprint(vals: list[GoValue]) -> str:
    """fmt.Sprint: a space between operands when neither is a string."""
    out = ""
    for k, v in enumerate(vals):
        if k and not isinstance(v, str) and not isinstance(vals[k - 1], str):
            out += " "
        out += go_print(v)
    return out
