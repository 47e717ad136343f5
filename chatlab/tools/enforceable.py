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
    check_finishes(schema, param)
    found = unenforceable(schema)
    if found is not None:
        keyword, at = found
        raise ChatlabError(f"{param}{at} uses {keyword!r}, which constrained decoding cannot "
                           f"enforce ({_WHY[keyword]}); rewrite the schema without {keyword!r}",
                           param=f"{param}{at}" if at else param)


def check_finishes(schema: Jsonable, param: str) -> None:
    """ChatlabError when the schema's grammar has a rule that can never finish: a value that
    must contain itself (`{"$ref": "#"}`, a required property referring back, $ref loops a -> b
    -> a). No JSON value matches such a part, and decoding that enters it reaches a point where
    the grammar allows no token at all. Decided on the grammar xgrammar prints for the schema
    (which rules can derive a finite text), so every way of writing such a loop is caught; the
    error names the schema's first $ref, where a loop starts."""
    import json

    import xgrammar as xgr

    from chatlab.tools.ebnf import endless_rules

    try:
        ebnf = str(xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False))
    except RuntimeError:
        return  # compiling it reports what is wrong, with its own message
    if not endless_rules(ebnf):
        return
    found = first_keyword(schema, ("$ref",))
    at = f"{param}{found[1]}" if found else param
    ref = f" ($ref {found_ref!r})" if found and isinstance(found_ref := _ref_at(schema, found[1]), str) else ""
    raise ChatlabError(f"{at}{ref} makes a value that must contain itself: no finite JSON value "
                       "matches the schema, so constrained decoding could never end; make the "
                       "recursion optional (leave it out of `required`, or offer a "
                       "non-recursive choice in anyOf)", param=f"{at}.$ref" if found else param)


def _ref_at(schema: Jsonable, at: str) -> Jsonable:
    for node, where in positions(schema):
        if where == at:
            return node.get("$ref")
    return None
