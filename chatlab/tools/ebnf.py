"""Which names in a printed EBNF grammar another grammar reader would not know.

chatlab's xgrammar prints grammars with builtin calls (`Regex("...", json_string=true)` for a
schema's `pattern`) that an older reader, such as the xgrammar inside openvino-genai, takes for
references to rules nobody defined, and refuses. So before a printed grammar is handed to such a
reader it is read here the way that reader resolves names: every identifier in a rule's body,
outside string literals and character classes, must be the name of a rule of the grammar.
"""
from __future__ import annotations

import re

_RULE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*::=\s*(.*)$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _names_in(body: str) -> list[str]:
    """The identifiers of one rule body, skipping "strings" and [character classes]."""
    names, i = [], 0
    while i < len(body):
        c = body[i]
        if c in "\"[":
            close = '"' if c == '"' else "]"
            i += 1
            while i < len(body) and body[i] != close:
                i += 2 if body[i] == "\\" else 1
            i += 1
        elif c.isalpha() or c == "_":
            m = _NAME.match(body, i)
            assert m is not None  # c starts a name
            names.append(m.group())
            i = m.end()
        else:
            i += 1
    return names


def unknown_names(ebnf: str) -> list[str]:
    """Names a rule body uses that no rule defines, in order of first use (empty: readable)."""
    rules = [m.groups() for m in map(_RULE.match, ebnf.splitlines()) if m is not None]
    defined = {name for name, _ in rules}
    unknown: list[str] = []
    for _, body in rules:
        unknown += [n for n in _names_in(body) if n not in defined and n not in unknown]
    return unknown
