"""Evaluate a parsed Go-template subset (gotemplate.py) into chatlab pieces, as Ollama would.

Go semantics kept here: empty strings, lists and zero are false; `and`/`or` return an operand;
`eq` takes several. How Ollama runs a template over a chat is ollama.py's `render_modelfile`.
"""
from __future__ import annotations

from chatlab._thirdparty import GoValue
from chatlab.errors import ChatlabError
from chatlab.render.ids import Piece
from chatlab.render.io.gotemplate import GoNode, Val
from chatlab.render.io.govalues import GoStruct, go_json, go_print, keys, printf, truth
from chatlab.render.io.govalues import value_owner


MAX_PIECES = 200_000  # far above any prompt; bounds time and memory on a runaway template


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


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
                self.emit(self.eval(n.value, dot, scopes, n.line), owner, n.line)
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
            elif n.kind == "break":
                raise _Break
            elif n.kind == "continue":
                raise _Continue

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
            except _Continue:
                continue
            except _Break:
                break
        if not pairs:
            self.run(n.orelse, dot, scopes, owner)

    def emit(self, v: GoValue, owner: int, line: int) -> None:
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


def mentions(nodes: list[GoNode], name: str) -> bool:
    """Whether any action refers to the field `name` (Ollama's Vars())."""
    def in_expr(e: tuple) -> bool:
        return (e[0] == "get" and name in e[2]) or (e[0] == "call" and any(in_expr(a) for a in e[2]))
    for n in nodes:
        if n.kind in ("out", "set") and in_expr(n.value):
            return True
        if n.kind in ("if", "range") and (any(in_expr(c) or mentions(b, name) for c, b in n.branches)
                                          or mentions(n.orelse, name)):
            return True
    return False


def cut_after_response(nodes: list[GoNode]) -> tuple[list[GoNode], bool]:
    """Ollama's last legacy round: keep the template up to its first printed .Response."""
    out: list[GoNode] = []
    for n in nodes:
        if n.kind == "out" and mentions([n], "Response"):
            return [*out, n], True
        if n.kind in ("if", "range"):
            branches = []
            for cond, body in n.branches:
                body, found = cut_after_response(body)
                branches.append((cond, body))
                if found:
                    return [*out, GoNode(n.kind, n.line, n.value, branches, [], n.names)], True
            orelse, found = cut_after_response(n.orelse)
            out.append(GoNode(n.kind, n.line, n.value, branches, orelse, n.names))
            if found:
                return out, True
            continue
        out.append(n)
    return out, False
