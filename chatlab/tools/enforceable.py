"""Schema keywords the grammar cannot enforce, refused before they become unconstrained output.

xgrammar compiles a JSON schema into a grammar, and a grammar can only say what may come next:
it cannot say "anything but this" (`not`), "if this then that" (`if`/`then`/`else`), fetch a
schema from elsewhere (a remote `$ref`), make one value two types at once (`allOf` of
different types), remember what came before (`uniqueItems`), require an item somewhere
(`contains`), tie one property to another (`dependentRequired`, `dependentSchemas`), or forbid
a value that two `oneOf` choices both match. Its compiler merges no `allOf` of several parts
(it allows any JSON there). xgrammar compiles such schemas without a word, ignoring the keyword, so a
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


# keywords that only describe: an allOf beside them is still the one subschema it holds
_ANNOTATIONS = {"allOf", "description", "title", "default", "examples", "$comment", "deprecated",
                "readOnly", "writeOnly", "$defs", "definitions", "$schema", "$id"}


def unenforceable(schema: Jsonable) -> tuple[str, str, str] | None:
    """(keyword, where in the schema, why) of the first keyword the grammar cannot enforce."""
    for node, at in positions(schema):
        for keyword in ("not", "if"):
            if keyword in node:
                return keyword, at, _WHY[keyword]
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            return "$ref", at, _WHY["$ref"]
        parts = node.get("allOf")
        if isinstance(parts, list):
            kinds = [t for t in map(_types, parts) if t is not None]
            if kinds and not set.intersection(*kinds):
                return "allOf", at, _WHY["allOf"]
            if len(parts) > 1 or set(node) - _ANNOTATIONS:
                return "allOf", at, _WHY["allOf several"]
        if node.get("uniqueItems") is True and not (_is_int(node.get("maxItems")) and node["maxItems"] <= 1):
            return "uniqueItems", at, _WHY["uniqueItems"]
        for keyword in ("contains", "dependentRequired", "dependentSchemas", "dependencies"):
            if node.get(keyword) not in (None, {}):
                return keyword, at, _WHY[keyword]
        options = node.get("oneOf")
        if isinstance(options, list) and len(options) > 1:
            resolved = [_resolve(schema, o) for o in options]
            if not all(_disjoint(a, b) for i, a in enumerate(resolved) for b in resolved[i + 1:]):
                return "oneOf", at, _WHY["oneOf"]
    return None


_WHY = {"not": "a grammar cannot exclude what a subschema matches",
        "if": "a grammar cannot switch on a condition (if/then/else)",
        "$ref": "a remote $ref would have to be fetched; only local '#/...' references are followed",
        "allOf": "its subschemas ask for different types, which no value can have",
        "allOf several": "the grammar compiler enforces an allOf only when it holds a single "
                         "subschema and nothing beside it; merge the subschemas into one",
        "uniqueItems": "a grammar cannot remember which items came before",
        "contains": "a grammar cannot require that some item, anywhere, matches a subschema",
        "dependentRequired": "a grammar cannot make one property's presence require another's",
        "dependentSchemas": "a grammar cannot apply a subschema only when a property is present",
        "dependencies": "a grammar cannot make one property's presence require others",
        "oneOf": "its subschemas can match the same value, and a grammar cannot forbid a value "
                 "that matches two of them; use anyOf, or make the choices exclusive (different "
                 "types, or a required property with a different const in each)"}


def _is_int(x: Jsonable) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _resolve(root: Jsonable, node: Jsonable) -> Jsonable:
    """A local $ref followed to its target (a few hops), else the node itself."""
    for _ in range(8):
        ref = node.get("$ref") if isinstance(node, dict) else None
        if not isinstance(ref, str) or not ref.startswith("#"):
            return node
        target: Jsonable = root
        for part in filter(None, ref[1:].split("/")):
            key = part.replace("~1", "/").replace("~0", "~")
            target = target.get(key) if isinstance(target, dict) else None
        if target is None:
            return node
        node = target
    return node


def _values(node: Jsonable) -> list[Jsonable] | None:
    """The only values a subschema allows (const / enum), or None when it is not a finite list."""
    if not isinstance(node, dict):
        return None
    if "const" in node:
        return [node["const"]]
    enum = node.get("enum")
    return list(enum) if isinstance(enum, list) else None


def _disjoint(a: Jsonable, b: Jsonable) -> bool:
    """Whether no JSON value can match both subschemas, by what is plain to see: types that do
    not overlap, const/enum values that differ, or a property both require whose const/enum
    values differ (a discriminator)."""
    ta, tb = _types(a), _types(b)
    if ta is not None and tb is not None:
        # integers are numbers too
        widen = {"integer": {"integer", "number"}, "number": {"integer", "number"}}
        if not {w for t in ta for w in widen.get(t, {t})} & tb:
            return True
    va, vb = _values(a), _values(b)
    if va is not None and vb is not None:
        return not any(x == y and type(x) is type(y) for x in va for y in vb)
    if isinstance(a, dict) and isinstance(b, dict):
        props_a, props_b = a.get("properties") or {}, b.get("properties") or {}
        required = set(a.get("required") or ()) & set(b.get("required") or ())
        return any(_disjoint(props_a.get(k), props_b.get(k)) for k in required
                   if _values(props_a.get(k)) is not None and _values(props_b.get(k)) is not None)
    return False


def check_enforceable(schema: Jsonable, param: str) -> None:
    """ChatlabError (param: the schema's field path) when the grammar cannot enforce `schema`."""
    looped = self_reference(schema)
    if looped is not None:
        ref, at = looped
        raise ChatlabError(f"{param}{at} ($ref {ref!r}) leads back to itself without entering a "
                           "property or an item, so the schema defines the value by itself; put "
                           "the recursion inside properties or items", param=f"{param}{at}.$ref")
    check_finishes(schema, param)
    found = unenforceable(schema)
    if found is not None:
        keyword, at, why = found
        raise ChatlabError(f"{param}{at} uses {keyword!r}, which constrained decoding cannot "
                           f"enforce ({why}); rewrite the schema without {keyword!r}",
                           param=f"{param}{at}" if at else param)


def _in_place(root: Jsonable, node: Jsonable) -> Iterator[Jsonable]:
    """The subschemas that apply to the same value as `node`: its $ref's target and the
    members of its anyOf / oneOf / allOf."""
    if not isinstance(node, dict):
        return
    if isinstance(node.get("$ref"), str):
        target = _resolve(root, node)
        if target is not node:
            yield target
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(node.get(key), list):
            yield from node[key]


def self_reference(schema: Jsonable) -> tuple[str, str] | None:
    """(the $ref, where) of a $ref that leads back to itself without entering a property or an
    item (`{"anyOf": [{"$ref": "#"}, ...]}`): such a schema says what a value is in terms of
    that same value, which no validator can check (jsonschema recurses without end)."""
    for node, at in positions(schema):
        ref = node.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#"):
            continue
        seen: set[int] = set()
        todo = list(_in_place(schema, node))
        while todo:
            item = todo.pop()
            if item is node:
                return ref, at
            if id(item) in seen:
                continue
            seen.add(id(item))
            todo.extend(_in_place(schema, item))
    return None


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
    found = next(((node["$ref"], at) for node, at in positions(schema) if "$ref" in node), None)
    at = f"{param}{found[1]}" if found else param
    ref = f" ($ref {found[0]!r})" if found and isinstance(found[0], str) else ""
    raise ChatlabError(f"{at}{ref} makes a value that must contain itself: no finite JSON value "
                       "matches the schema, so constrained decoding could never end; make the "
                       "recursion optional (leave it out of `required`, or offer a "
                       "non-recursive choice in anyOf)", param=f"{at}.$ref" if found else param)
