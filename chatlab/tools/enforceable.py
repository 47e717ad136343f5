"""Schema keywords the grammar cannot enforce (it says only what may come next) are refused, and
so is what matches nothing; the rest is rewritten so that xgrammar 0.2.8 reads it as JSON Schema does."""
from __future__ import annotations

import copy
import json
import re
from typing import TYPE_CHECKING

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.tools.ebnf import endless_rules
from chatlab.tools.refs import NAMES, NOTES, Refs, follow_ref, positions, self_reference, types_of

if TYPE_CHECKING:
    import jsonschema

# keywords that only describe: an allOf beside them is still the one subschema it holds
_ANNOTATIONS = NOTES - {"$anchor", "$dynamicAnchor"} | {"allOf"}


def unenforceable(schema: Jsonable) -> tuple[str, str, str] | None:
    """(keyword, where in the schema, why) of the first keyword the grammar cannot enforce."""
    refs = Refs(schema)
    for node, at in positions(schema):
        for keyword in ("not", "if"):
            if keyword in node:
                return keyword, at, _WHY[keyword]
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            return "$ref", at, _WHY["$ref"]
        parts = node.get("allOf")
        if isinstance(parts, list):
            kinds = [t for t in map(types_of, parts) if t is not None]
            if kinds and not set.intersection(*kinds):
                return "allOf", at, _WHY["allOf"]
            if len(parts) > 1 or set(node) - _ANNOTATIONS:
                return "allOf", at, _WHY["allOf several"]
        one_item = type(node.get("maxItems")) is int and node["maxItems"] <= 1  # unique as it stands
        if node.get("uniqueItems") is True and not one_item:
            return "uniqueItems", at, _WHY["uniqueItems"]
        for keyword in ("contains", "dependentRequired", "dependentSchemas", "dependencies"):
            if node.get(keyword) not in (None, {}):
                return keyword, at, _WHY[keyword]
        options = node.get("oneOf")
        if isinstance(options, list) and len(options) > 1:
            resolved = [refs.resolve(o) for o in options]
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


def _values(node: Jsonable) -> list[Jsonable] | None:
    """The only values a subschema allows (const / enum), or None when it is not a finite list."""
    if not isinstance(node, dict):
        return None
    if "const" in node:
        return [node["const"]]
    enum = node.get("enum")
    return list(enum) if isinstance(enum, list) else None


def _disjoint(a: Jsonable, b: Jsonable) -> bool:
    """Whether no JSON value can match both subschemas, by what is plain to see: types, const/enum
    values, or a discriminator property both require."""
    ta, tb = types_of(a), types_of(b)
    if ta is not None and tb is not None:
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


def check_enforceable(schema: Jsonable, param: str) -> dict[str, Jsonable]:
    """`schema` as the grammar compiler is to get it; ChatlabError when a grammar cannot enforce it."""
    if (looped := self_reference(schema)) is not None:
        ref, at = looped
        raise ChatlabError(f"{param}{at} ($ref {ref!r}) leads back to itself without entering a "
                           "property or an item, so the schema defines the value by itself; put "
                           "the recursion inside properties or items", param=f"{param}{at}.$ref")
    if (found := unenforceable(schema)) is not None:
        keyword, at, why = found
        raise ChatlabError(f"{param}{at} uses {keyword!r}, which constrained decoding cannot "
                           f"enforce ({why}); rewrite the schema without {keyword!r}",
                           param=f"{param}{at}" if at else param)
    compiled = grammar_schema(schema, param)
    check_finishes(compiled, param, named_by=schema)
    return compiled


# Formats whose xgrammar grammar writes only strings jsonschema's format checker accepts.
FORMATS = frozenset({"duration", "email", "uri", "uri-reference", "uuid"})
# Formats whose xgrammar grammar also writes invalid strings (31 April, ...) get these patterns
# instead, exact or narrower (no leap second, hostname over 3 labels, ...), with no character JSON
# escapes, so ebnf.py can write them out as rules. Other formats are refused.
_YEAR = "([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_MONTH_DAY = ("(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
              "|02-(0[1-9]|1[0-9]|2[0-8])")
_LEAP_DAY = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29"
_DATE = f"({_YEAR}-({_MONTH_DAY})|{_LEAP_DAY})"
_TIME = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]([.][0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_LABEL = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HEX = "[0-9A-Fa-f]{1,4}"
# 8 groups, or fewer around one "::" (i groups before it, at most 7 - i after)
_IPV6 = "|".join([f"({_HEX}:){{7}}{_HEX}", f"({_HEX}:){{1,7}}:", f":(:{_HEX}){{1,7}}", "::"]
                 + [f"({_HEX}:){{{i}}}(:{_HEX}){{1,{7 - i}}}" for i in range(1, 7)])
FORMAT_PATTERNS = {"date": f"^{_DATE}$", "time": f"^{_TIME}$", "date-time": f"^{_DATE}T{_TIME}$",
                   "ipv4": f"^({_OCTET}[.]){{3}}{_OCTET}$", "hostname": f"^{_LABEL}([.]{_LABEL}){{0,2}}$",
                   "ipv6": f"^({_IPV6})$", "json-pointer": "^(/([A-Za-z0-9_.-]|~[01])*)*$"}

# a schema with no type: the keywords that say which one it is meant to have
_TYPE_OF = {"object": ("properties", "required", "additionalProperties", "patternProperties",
                       "propertyNames", "minProperties", "maxProperties"),
            "array": ("items", "prefixItems", "minItems", "maxItems"),
            "string": ("minLength", "maxLength", "pattern", "format"),
            "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")}


def grammar_schema(schema: Jsonable, param: str) -> dict[str, Jsonable]:
    """`schema` rewritten so every value xgrammar 0.2.8 allows is valid for it (it may allow
    fewer); ChatlabError, naming the keyword and where, for what cannot be written so."""
    refs = Refs(schema)
    out = copy.deepcopy(schema)
    assert isinstance(out, dict)  # chatlab.types checked it is a schema object
    copies: dict[str, Jsonable] = {}  # targets xgrammar cannot reach, by the key they get in $defs
    taken = set(out.get("$defs") or ())
    by_target: dict[int, str] = {}
    todo: list[tuple[Jsonable, str]] = [(out, "")]

    def reachable(target: Jsonable, at: str) -> str:
        """A $ref xgrammar follows to (a copy of) `target`."""
        if id(target) not in by_target:
            key = next(k for k in (f"ref{n}" for n in range(len(taken) + 1)) if k not in taken)
            taken.add(key)
            by_target[id(target)] = key
            # without the names that would now name two places
            copies[key] = copy.deepcopy({k: v for k, v in target.items() if k not in NAMES}
                                        if isinstance(target, dict) else target)
            todo.append((copies[key], f"{at}.$ref"))
        return f"#/$defs/{by_target[id(target)]}"

    while todo:
        top, base = todo.pop()
        for node, at in positions(top):
            at = base + at
            follow_ref(node, refs, reachable, f"{param}{at}", at)
            _infer_type(node)
            _list_required(node, schema, f"{param}{at}")
            _string_keywords(node, f"{param}{at}")
    if copies:
        out.setdefault("$defs", {}).update(copies)
    _keep_valid_values(out, param)
    return out


def check_finishes(schema: Jsonable, param: str, named_by: Jsonable) -> None:
    """ChatlabError when the schema's grammar (as xgrammar prints it) has a rule that can never
    finish: a value that must contain itself. It names the first $ref of `named_by`."""
    import xgrammar as xgr

    try:
        ebnf = str(xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=False))
    except RuntimeError:
        return  # compiling it reports what is wrong, with its own message
    if not endless_rules(ebnf):
        return
    found = next(((node["$ref"], at) for node, at in positions(named_by) if "$ref" in node), None)
    at = f"{param}{found[1]}" if found else param
    ref = f" ($ref {found[0]!r})" if found and isinstance(found[0], str) else ""
    raise ChatlabError(f"{at}{ref} makes a value that must contain itself: no finite JSON value "
                       "matches the schema, so constrained decoding could never end; make the "
                       "recursion optional (leave it out of `required`, or offer a "
                       "non-recursive choice in anyOf)", param=f"{at}.$ref" if found else param)


def _may_be(node: dict[str, Jsonable], kind: str) -> bool:
    kinds = types_of(node)
    return kinds is None or kind in kinds or (kind == "number" and "integer" in kinds)


def _infer_type(node: dict[str, Jsonable]) -> None:
    """Give a schema without `type` the type its keywords are about (xgrammar would drop them)."""
    if any(k in node for k in ("type", "$ref", "enum", "const", "anyOf", "oneOf", "allOf")):
        return
    kind = next((kind for kind, keywords in _TYPE_OF.items() if any(k in node for k in keywords)), None)
    if kind is not None:
        node["type"] = kind


def _list_required(node: dict[str, Jsonable], root: Jsonable, where: str) -> None:
    """List under `properties` each required name it lacks, with the schema its value gets
    (from patternProperties or additionalProperties): xgrammar writes only listed properties."""
    required = node.get("required")
    if not isinstance(required, list) or not _may_be(node, "object"):
        return
    listed = node["properties"] if isinstance(node.get("properties"), dict) else {}
    for name in dict.fromkeys(required):
        if not isinstance(name, str) or name in listed:
            continue
        value, why = _unlisted(node, root, name, where)
        if value is False:
            raise ChatlabError(f"{where} uses 'required' for {name!r}, which 'properties' does not "
                               f"list and {why} forbids, so no object matches the schema; list "
                               f"{name!r} under 'properties', or drop it from 'required'", param=where)
        listed[name] = copy.deepcopy(value)
        node["properties"] = listed


def _unlisted(node: dict[str, Jsonable], root: Jsonable, name: str,
              where: str) -> tuple[Jsonable, str]:
    """(the schema of property `name`, not in `properties`; what decides it): propertyNames,
    then a matching patternProperties, else additionalProperties (or unevaluatedProperties)."""
    names = node.get("propertyNames")
    if names is not None and not _validator(root, names).is_valid(name):
        return False, "'propertyNames'"
    patterns = node["patternProperties"] if isinstance(node.get("patternProperties"), dict) else {}
    try:
        matched = [sub for pattern, sub in patterns.items() if re.search(pattern, name)]
    except re.error:
        matched = [None, None]  # a pattern Python cannot read: which ones match is unknown
    if len(matched) > 1:
        raise ChatlabError(f"{where} uses 'required' for {name!r}, which 'properties' does not "
                           "list and which several 'patternProperties' may match, which "
                           "constrained decoding cannot enforce (the grammar compiler applies "
                           f"one schema to a property); list {name!r} under 'properties'",
                           param=where)
    if matched:
        return matched[0], "'patternProperties'"
    extra = node.get("additionalProperties", node.get("unevaluatedProperties", True))
    keyword = "unevaluatedProperties" if "additionalProperties" not in node else "additionalProperties"
    return ({} if extra is True else extra), f"{keyword!r}: false"


def _string_keywords(node: dict[str, Jsonable], where: str) -> None:
    """A format the grammar enforces as it is, or as a pattern; otherwise refused (xgrammar
    enforces one of format and pattern, and neither with a length)."""
    if not _may_be(node, "string"):
        return
    fmt = node.get("format")
    if isinstance(fmt, str):
        if fmt not in FORMATS and fmt not in FORMAT_PATTERNS:
            known = ", ".join(sorted(FORMATS | set(FORMAT_PATTERNS)))
            raise ChatlabError(f"{where} uses 'format' {fmt!r}, which constrained decoding cannot "
                               f"enforce (the grammar knows the formats {known}); drop 'format', "
                               "or describe the string with 'pattern'", param=where)
        if "pattern" in node:
            raise ChatlabError(f"{where} uses 'pattern' beside 'format', which constrained decoding "
                               "cannot enforce (the grammar compiler applies only one of them); "
                               "keep one of the two", param=where)
        if fmt in FORMAT_PATTERNS:
            del node["format"]
            node["pattern"] = FORMAT_PATTERNS[fmt]
    length = next((k for k in ("minLength", "maxLength") if k in node), None)
    shape = next((k for k in ("format", "pattern") if k in node), None)
    if length is not None and shape is not None:
        raise ChatlabError(f"{where} uses {length!r} beside {shape!r}, which constrained decoding "
                           f"cannot enforce (the grammar compiler drops the length bounds of a "
                           f"string with a {shape}); put the length into a 'pattern', or drop "
                           f"{length!r}", param=where)


def _validator(root: Jsonable, schema: Jsonable) -> "jsonschema.Draft202012Validator":
    """A validator for `schema`, a part of `root` (its $refs resolve in `root`), with formats."""
    import jsonschema

    whole = jsonschema.Draft202012Validator(root, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return whole.evolve(schema=schema)


def _keep_valid_values(root: dict[str, Jsonable], param: str) -> None:
    """Drop enum values the keywords beside them refuse (xgrammar ignores those); refuse such a const."""
    for node, at in positions(root):
        if "enum" not in node and "const" not in node:
            continue
        beside = {k: v for k, v in node.items() if k not in ("enum", "const") and k not in NOTES}
        if not beside:
            continue
        check = _validator(root, beside)
        where = f"{param}{at}"
        if "const" in node and not check.is_valid(node["const"]):
            raise ChatlabError(f"{where} uses 'const' {node['const']!r}, which the keywords beside "
                               f"it ({', '.join(beside)}) refuse, so no value matches the schema; "
                               "make them agree", param=where)
        values = node.get("enum")
        if isinstance(values, list) and values:  # (an empty enum: xgrammar's own error says so)
            kept = [v for v in values if check.is_valid(v)]
            if not kept:
                raise ChatlabError(f"{where} uses 'enum', whose values the keywords beside it "
                                   f"({', '.join(beside)}) all refuse, so no value matches the "
                                   "schema; make them agree", param=where)
            node["enum"] = kept
