"""Where a JSON schema's subschemas are, and where its local `$ref`s lead (`Refs`, with
jsonschema's own resolver); `follow_ref` rewrites a `$ref` into one xgrammar 0.2.8 follows the
same way (it splits at "/", decodes nothing, drops what stands beside it), or refuses it."""
from __future__ import annotations

import copy
import re
from typing import Callable, Iterator, Sequence

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError

_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_ONE = ("items", "additionalProperties", "contains", "propertyNames", "unevaluatedItems",
        "unevaluatedProperties")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
# keywords that say nothing about the value (and where subschemas are kept)
NOTES = frozenset({"description", "title", "default", "examples", "$comment", "deprecated",
                   "readOnly", "writeOnly", "$schema", "$id", "$anchor", "$dynamicAnchor",
                   "$defs", "definitions"})
# keywords that constrain the value on their own, whatever stands beside them: one beside a
# $ref means the same written into the target, when the target does not set it too
_ON_THEIR_OWN = frozenset({"type", "enum", "const", "minimum", "maximum", "exclusiveMinimum",
                           "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern",
                           "format", "minItems", "maxItems", "minProperties", "maxProperties",
                           "required"})
NAMES = ("$id", "$anchor", "$dynamicAnchor")
_PLAIN_REF = re.compile(r"#(/\$?[A-Za-z0-9_]+)*")  # a pointer xgrammar follows as written


def types_of(schema: Jsonable) -> set[str] | None:
    kind = schema.get("type") if isinstance(schema, dict) else None
    return {kind} if isinstance(kind, str) else set(kind) if isinstance(kind, list) else None


def positions(schema: Jsonable) -> Iterator[tuple[dict[str, Jsonable], str]]:
    """Every subschema at a schema position (a property *named* "not" is no keyword), with its
    path from the root (`.properties.a.items`), parents before children."""
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
    return next(((k, at) for node, at in positions(schema) for k in keywords if k in node), None)


class Refs:
    """The local `$ref`s of one schema: decoded RFC 6901 pointers, or `$anchor` names."""

    def __init__(self, root: Jsonable) -> None:
        from referencing import Registry
        from referencing.jsonschema import DRAFT202012

        self.root = root
        self.resolver = Registry().with_resource("", DRAFT202012.create_resource(root)).resolver()

    def target(self, ref: str) -> Jsonable:
        """The subschema `ref` names; LookupError when it names nothing."""
        from referencing.exceptions import Unresolvable

        try:
            return self.resolver.lookup(ref).contents
        except (Unresolvable, LookupError, ValueError, TypeError) as err:  # a pointer through a str
            raise LookupError(ref) from err

    def resolve(self, node: Jsonable) -> Jsonable:
        """A local $ref followed to its target (a few hops), else the node itself."""
        for _ in range(8):
            ref = node.get("$ref") if isinstance(node, dict) else None
            if not isinstance(ref, str) or not ref.startswith("#"):
                return node
            try:
                node = self.target(ref)
            except LookupError:
                return node
        return node

    def in_place(self, node: Jsonable) -> Iterator[Jsonable]:
        """The subschemas that apply to the same value as `node`: its $ref's target, its *Of members."""
        if not isinstance(node, dict):
            return
        if isinstance(node.get("$ref"), str) and (target := self.resolve(node)) is not node:
            yield target
        for key in ("anyOf", "oneOf", "allOf"):
            if isinstance(node.get(key), list):
                yield from node[key]

    def plain(self, ref: str) -> bool:
        """Whether xgrammar reaches the target of `ref` (a pointer through keys needing no escape)."""
        if not _PLAIN_REF.fullmatch(ref):
            return False
        node = self.root
        for key in ref.split("/")[1:]:
            if not isinstance(node, dict) or key not in node:
                return False
            node = node[key]
        return True


def self_reference(schema: Jsonable) -> tuple[str, str] | None:
    """(the $ref, where) of a $ref that leads back to itself without entering a property or an
    item (`{"anyOf": [{"$ref": "#"}, ...]}`): no validator can check a value defined by itself."""
    refs = Refs(schema)
    for node, at in positions(schema):
        ref = node.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#"):
            continue
        seen: set[int] = set()
        todo = list(refs.in_place(node))
        while todo:
            item = todo.pop()
            if item is node:
                return ref, at
            if id(item) not in seen:
                seen.add(id(item))
                todo.extend(refs.in_place(item))
    return None


def follow_ref(node: dict[str, Jsonable], refs: Refs, reachable: Callable[[Jsonable, str], str],
               where: str, at: str) -> None:
    """Point the node's $ref where xgrammar can follow it (`reachable`: a $ref to a copy of a
    target), merging what stands beside it into (a copy of) the target."""
    for _ in range(64):  # a chain of $refs with siblings, each merged in turn
        ref = node.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#"):
            return
        try:
            target = refs.target(ref)
        except LookupError:
            raise ChatlabError(f"{where} uses '$ref' {ref!r}, which names nothing in the schema (no "
                               "such JSON pointer or $anchor), so no grammar can follow it; point "
                               "it at a subschema (a JSON pointer, with ~1 for / and ~0 for ~ in "
                               "a name) or at an $anchor", param=f"{where}.$ref") from None
        beside = [k for k in node if k != "$ref" and k not in NOTES]
        if not beside:
            if not refs.plain(ref):
                node["$ref"] = reachable(target, at)
            return
        if target is True:
            target = {}
        if not isinstance(target, dict):
            raise ChatlabError(f"{where} has $ref {ref!r} to a schema that matches nothing "
                               f"(false), so no value matches it; point the $ref elsewhere",
                               param=f"{where}.$ref")
        choice = next((k for k in ("anyOf", "oneOf", "allOf") if k in target), None)
        clash = next((k for k in beside if k not in _ON_THEIR_OWN or k in target or choice), None)
        if clash is not None:
            fix = (f"its target sets {clash!r} too); keep one {clash!r}, in the target" if clash in target
                   else f"its target is a {choice!r}, beside which the grammar compiler drops "
                        f"keywords too); move {clash!r} into each of its subschemas" if choice
                   else f"{clash!r} does not mean the same written into the target); move it there")
            raise ChatlabError(f"{where} uses {clash!r} beside a $ref, which constrained decoding "
                               f"cannot enforce (the grammar compiler follows the $ref and drops "
                               f"what stands beside it, and {fix}", param=where)
        merged = {k: copy.deepcopy(v) for k, v in target.items() if k not in NOTES}
        merged.update((k, v) for k, v in node.items() if k != "$ref")
        node.clear()
        node.update(merged)
    raise ChatlabError(f"{where} is a chain of more than 64 $refs with keywords beside them; "
                       "shorten it", param=where)
