"""Checks on client strings and JSON that every parse rule shares, with the limits they enforce:
a request that would make the server do unbounded work is refused with the limit in the message.
"""
from __future__ import annotations

import json
import re

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError

NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")  # OpenAI's rule for function names (plus '.')
MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_CHARS = 100_000


def check_text(value: Jsonable, where: str) -> str:
    """A string that can be encoded: lone UTF-16 surrogates ("\\ud800") cannot be tokenized."""
    if not isinstance(value, str):
        raise ChatlabError(f"{where} must be a string, not {type(value).__name__}", param=where)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ChatlabError(f"{where} holds a lone UTF-16 surrogate at character {err.start} "
                           "(e.g. '\\ud800'); send valid Unicode text", param=where) from None
    return value


def check_name(value: Jsonable, where: str) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        shown = repr(value)[:40] + ("…" if len(repr(value)) > 40 else "")
        raise ChatlabError(f"{where} {shown} is not a valid name; use 1-64 characters of "
                           "a-z, A-Z, 0-9, '_', '-' or '.'", param=where)
    return value


def check_json(value: Jsonable, where: str, max_chars: int = MAX_SCHEMA_CHARS) -> str:
    """JSON text of `value`, refusing values too large, too deep or not encodable."""
    def depth(v: Jsonable, d: int = 0) -> int:
        if d > MAX_SCHEMA_DEPTH:
            raise ChatlabError(f"{where} is nested deeper than {MAX_SCHEMA_DEPTH} levels; flatten it",
                               param=where)
        kids = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
        return max((depth(k, d + 1) for k in kids), default=d)

    depth(value)
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > max_chars:
        raise ChatlabError(f"{where} is {len(text):,} characters of JSON, over the limit of "
                           f"{max_chars:,}; shorten it", param=where)
    check_text(text, where)
    return text


def check_schema(schema: Jsonable, where: str) -> dict[str, Jsonable]:
    """A usable JSON schema (jsonschema's metaschema check), within the size and depth limits."""
    import jsonschema

    if not isinstance(schema, dict):
        raise ChatlabError(f"{where} must be a JSON schema object, not {type(schema).__name__}",
                           param=where)
    check_json(schema, where)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        at = "/".join(map(str, e.path)) or "the top"
        raise ChatlabError(f"{where} is not a valid JSON schema: {e.message[:200]} (at {at}); fix the schema",
                           param=where) from None
    return schema

