"""Evaluate a parsed Go-template subset (gotemplate.py) into chatlab pieces, as Ollama would.

Ollama's template/template.go: when the template mentions .Messages it runs once with
System (every system message joined by "\\n\\n"), Messages (consecutive messages of one role
merged with "\\n\\n", tool results kept apart) and Response ""; otherwise (a legacy
.System/.Prompt/.Response template) it runs once per round and, for the last round, only up to
the first `{{ .Response }}` (a template without one gets it appended). Go semantics kept here:
empty strings, lists and zero are false; `and`/`or` return an operand; `eq` takes several.
"""
from __future__ import annotations

from typing import Any

from chatlab.errors import ChatlabError
from chatlab.render.ids import Piece
from chatlab.render.io.gotemplate import Node, Val


def truth(v: Any) -> bool:
    return bool(v) if not isinstance(v, (int, float)) or isinstance(v, bool) else v != 0


class Evaluator:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.out: list[Piece] = []

    def run(self, nodes: list[Node], dot: Any, scopes: list[dict[str, Any]], owner: int) -> None:
        scopes = [*scopes, {}]
        for n in nodes:
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
                expr, body = n.branches[0]
                items = self.eval(expr, dot, scopes, n.line)
                if not isinstance(items, list):
                    raise ChatlabError(f"Ollama TEMPLATE line {n.line}: range over a {type(items).__name__}; "
                                       "range only over .Messages")
                for i, item in enumerate(items):
                    names = dict(zip(n.names, (i, item))) if len(n.names) == 2 else dict(zip(n.names, (item,)))
                    self.run(body, item, [*scopes, names], item.get("_index", owner) if isinstance(item, dict) else owner)
                if not items:
                    self.run(n.orelse, dot, scopes, owner)

    def emit(self, v: Any, owner: int, line: int) -> None:
        if isinstance(v, Val):
            self.out.append(Piece("content", str(v), v.msg, v.slot))
        elif isinstance(v, bool):
            self.out.append(Piece("text", "true" if v else "false", owner, "template"))
        elif isinstance(v, (str, int)):
            self.out.append(Piece("text", str(v), owner, "template"))
        else:
            raise ChatlabError(f"Ollama TEMPLATE line {line}: prints a {type(v).__name__} "
                               "(e.g. {{ .Messages }}); print only strings such as .Content")

    def eval(self, e: tuple, dot: Any, scopes: list[dict[str, Any]], line: int) -> Any:
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
                if not isinstance(value, dict):
                    raise ChatlabError(f"Ollama TEMPLATE line {line}: .{name} of a {type(value).__name__}")
                value = value.get(name, "")
            return value
        _, fn, args = e
        if fn == "and" or fn == "or":  # Go returns the deciding operand, evaluating lazily
            value = None
            for a in args:
                value = self.eval(a, dot, scopes, line)
                if truth(value) != (fn == "and"):
                    return value
            return value
        vals = [self.eval(a, dot, scopes, line) for a in args]
        want = {"not": 1, "len": 1, "ne": 2}.get(fn)
        if (want and len(vals) != want) or (fn == "eq" and len(vals) < 2) or (fn == "slice" and not vals):
            raise ChatlabError(f"Ollama TEMPLATE line {line}: {fn} takes {want or 'more'} argument(s), got {len(vals)}")
        if fn == "not":
            return not truth(vals[0])
        if fn == "eq":
            return any(vals[0] == v for v in vals[1:])
        if fn == "ne":
            return vals[0] != vals[1]
        if fn == "len":
            return len(vals[0])
        bounds = vals[1:3]
        if not all(isinstance(b, int) for b in bounds):
            raise ChatlabError(f"Ollama TEMPLATE line {line}: slice takes integer indices")
        return vals[0][slice(*bounds)] if len(bounds) == 2 else vals[0][bounds[0]:] if bounds else vals[0]


def mentions(nodes: list[Node], name: str) -> bool:
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


def cut_after_response(nodes: list[Node]) -> tuple[list[Node], bool]:
    """Ollama's last legacy round: keep the template up to its first printed .Response."""
    out: list[Node] = []
    for n in nodes:
        if n.kind == "out" and mentions([n], "Response"):
            return [*out, n], True
        if n.kind in ("if", "range"):
            branches = []
            for cond, body in n.branches:
                body, found = cut_after_response(body)
                branches.append((cond, body))
                if found:
                    return [*out, Node(n.kind, n.line, n.value, branches, [], n.names)], True
            orelse, found = cut_after_response(n.orelse)
            out.append(Node(n.kind, n.line, n.value, branches, orelse, n.names))
            if found:
                return out, True
            continue
        out.append(n)
    return out, False
