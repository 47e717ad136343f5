"""Printed EBNF grammars read as text: the names an older reader (openvino-genai's xgrammar)
would not know, the rules that can never finish, and regexes written out as rules."""
from __future__ import annotations

import re
from typing import Collection, Iterator

_RULE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*::=\s*(.*)$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"?|\[(?:[^\]\\]|\\.)*\]?')  # a "string" or [character class]


def _past(body: str, i: int) -> int:
    """The index just after the "string" or [character class] that starts at body[i]."""
    m = _QUOTED.match(body, i)
    assert m is not None  # body[i] opens one
    return m.end()


def unknown_names(ebnf: str) -> list[str]:
    """Names a rule body uses that no rule defines, in order of first use (empty: readable)."""
    rules = [m.groups() for m in map(_RULE.match, ebnf.splitlines()) if m is not None]
    defined = {name for name, _ in rules}
    unknown: list[str] = []
    for _, body in rules:
        unknown += [n for n in _NAME.findall(_QUOTED.sub(" ", body)) if n not in defined and n not in unknown]
    return unknown


# A rule body as nested tuples: ("alt", [...]), ("seq", [...]), ("rep", least, part), ("ref", name),
# ("end",) for what always matches some finite text (a literal, a class, a builtin, a lookahead).
Node = tuple


def _parse(body: str) -> Node:
    """A rule body as nested tuples (see Node), by recursive descent."""
    pos = 0

    def skip() -> None:
        nonlocal pos
        while pos < len(body) and body[pos].isspace():
            pos += 1

    def alt() -> Node:
        nonlocal pos
        options = [seq()]
        while pos < len(body) and body[pos] == "|":
            pos += 1
            options.append(seq())
        return ("alt", options)

    def seq() -> Node:
        items: list[Node] = []
        while True:
            skip()
            if pos >= len(body) or body[pos] in "|)":
                return ("seq", items)
            items.append(suffixed(atom()))

    def atom() -> Node:
        nonlocal pos
        c = body[pos]
        if c in "\"[":
            pos = _past(body, pos)
            return ("end",)
        if c == "(":
            pos += 1
            skip()
            lookahead = body.startswith("=", pos)
            pos += lookahead
            inner = alt()
            pos += 1  # ")"
            return ("end",) if lookahead else inner
        m = _NAME.match(body, pos)
        if m is None:  # a character this reading does not know: it constrains nothing here
            pos += 1
            return ("end",)
        pos = m.end()
        if body.startswith("(", pos):  # a builtin call: Regex("..."), TagDispatch(...)
            depth = 0
            while pos < len(body):
                if body[pos] == '"':
                    pos = _past(body, pos)
                    continue
                depth += {"(": 1, ")": -1}.get(body[pos], 0)
                pos += 1
                if depth == 0:
                    break
            return ("end",)
        return ("ref", m.group())

    def suffixed(node: Node) -> Node:
        nonlocal pos
        while pos < len(body) and body[pos] in "*+?{":
            c = body[pos]
            if c == "{":
                end = body.index("}", pos)
                least = int(body[pos + 1:end].split(",")[0].strip() or 0)
                pos = end + 1
            else:
                least = 1 if c == "+" else 0
                pos += 1
            node = ("rep", least, node)
        return node

    return alt()


def _finishes(node: Node, finite: set[str], rules: dict[str, Node]) -> bool:
    kind = node[0]
    if kind == "end":
        return True
    if kind == "ref":
        return node[1] in finite or node[1] not in rules  # builtins and outside names: not ours
    if kind == "alt":
        return any(_finishes(n, finite, rules) for n in node[1])
    if kind == "seq":
        return all(_finishes(n, finite, rules) for n in node[1])
    return node[1] == 0 or _finishes(node[2], finite, rules)  # "rep"


def _refs(node: Node) -> Iterator[str]:
    if node[0] == "ref":
        yield node[1]
    for part in node[1] if node[0] in ("alt", "seq") else node[2:]:  # a rep's part, or none
        yield from _refs(part)


def endless_rules(ebnf: str) -> list[str]:
    """Rules reachable from root that never finish (`{"$ref": "#"}`): decoding would reach a dead end."""
    rules = {m.group(1): _parse(m.group(2)) for m in map(_RULE.match, ebnf.splitlines()) if m}
    finite: set[str] = set()
    # the least fixed point: a rule finishes once some option of it does
    while grown := {name for name, node in rules.items()
                    if name not in finite and _finishes(node, finite, rules)}:
        finite |= grown
    seen, todo = set(), ["root"]
    while todo:
        name = todo.pop()
        if name in seen or name not in rules:
            continue
        seen.add(name)
        todo.extend(_refs(rules[name]))
    return sorted(seen - finite)


_REGEX_RULE = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*) ::= Regex\("((?:[^"\\]|\\.)*)", json_string=true\)$')
_FROM_REGEX = re.compile(r"\broot((?:_[0-9]+)*)\b")  # the rule names of xgrammar's translation


def spell_out(ebnf: str, patterns: Collection[str]) -> str:
    """`ebnf` with each rule `name ::= Regex("p", json_string=true)` whose p is in `patterns`
    written out as plain rules (only for patterns with no character JSON escapes)."""
    import xgrammar as xgr

    lines = []
    for line in ebnf.splitlines():
        m = _REGEX_RULE.match(line)
        # the literal as printed, with its escapes (`\?`) undone: patterns have no backslash
        pattern = "" if m is None else re.sub(r"\\(.)", r"\1", m.group(2))
        if m is None or pattern not in patterns:
            lines.append(line)
            continue
        name = m.group(1)
        # xgrammar names them root, root_1, root_3_1, ...: here name, name_re_1, name_re_3_1, ...
        rules = str(xgr.Grammar.from_regex(pattern)).strip().splitlines()
        lines += [_FROM_REGEX.sub(lambda r: name + ("_re" + r.group(1) if r.group(1) else ""), rule)
                  for rule in rules]
    return "\n".join(lines) + ("\n" if ebnf.endswith("\n") else "")
