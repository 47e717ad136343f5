"""Schema keywords the grammar cannot enforce, refused before they become unconstrained output.

xgrammar compiles a JSON schema into a grammar, and a grammar can only say what may come next:
it cannot say "anything but this" (`not`), "if this then that" (`if`/`then`/`else`), fetch a
schema from elsewhere (a remote `$ref`), or make one value two types at once (`allOf` of
different types). xgrammar compiles such schemas without a word, ignoring the keyword, so a
client asking for them would get output that the schema does not allow. The walk below visits
schema positions only (a property *named* "not" is fine) and names the first such keyword.
"""
from __future__ import annotations

from typing import Iterator, Sequence

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError

_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_ONE = ("items", "additionalProperties", "contains", "propertyNames", "unevaluatedItems",
        "unevaluatedProperties")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def _types(schema: Jsonable) -> set[str] | None:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else None


def positions(schema: Jsonable) -> Iterator[tuple[dict[str, Jsonable], str]]:
    """Every subschema (an object) at a schema position, with its path from the root
    (`.properties.a.items`), parents before children."""
    stack: list[tuple[Jsonable, str]] = [(schema, "")]
    while stack:
        node, at = stack.pop()
        if not isinstance(node, dict):
            continue
        yield node, at
        for key in _MAPS:
            if isinstance(node.get(key), dict):
                stack.extend((v, f"{at}.{key}.{k}") for k, v in reversed(node[key].items()))
        for key in _ONE:
            stack.append((node.get(key), f"{at}.{key}"))
        for key in _LISTS:
            if isinstance(node.get(key), list):
                stack.extend((v, f"{at}.{key}[{i}]") for i, v in reversed(list(enumerate(node[key]))))


def first_keyword(schema: Jsonable, keywords: Sequence[str]) -> tuple[str, str] | None:
    """(keyword, where) of the first of `keywords` used at a schema position, or None."""
    for node, at in positions(schema):
        for keyword in keywords:
            if keyword in node:
                return keyword, at
    return None


def unenforceable(schema: Jsonable) -> tuple[str, str] | None:
    """(keyword, where in the schema) of the first keyword the grammar cannot enforce, or None."""
    for node, at in positions(schema):
        for keyword in ("not", "if"):
            if keyword in node:
                return keyword, at
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            return "$ref", at
        parts = node.get("allOf")
        if isinstance(parts, list):
            kinds = [t for t in map(_types, parts) if t is not None]
            if kinds and not set.intersection(*kinds):
                return "allOf", at
    return None


_WHY = {"not": "a grammar cannot exclude what a subschema matches",
        "if": "a grammar cannot switch on a condition (if/then/else)",
        "$ref": "a remote $ref would have to be fetched; only local '#/...' references are followed",
        "allOf": "its subschemas ask for different types, which no value can have"}


def check_enforceable(schema: Jsonable, param: str) -> None:
    """ChatlabError (param: the schema's field path) when the grammar cannot enforce `schema`."""
    found = unenforceable(schema)
    if found is not None:
        keyword, at = found
        raise ChatlabError(f"{param}{at} uses {keyword!r}, which constrained decoding cannot "
                           f"enforce ({_WHY[keyword]}); rewrite the schema without {keyword!r}",
                           param=f"{param}{at}" if at else param)
