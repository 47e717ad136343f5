"""Checks on the raw body that no field's type can express, and error locations as field paths.

`check_body` walks the whole JSON body (known fields or not): every string, key included, must
be encodable and the body no deeper than MAX_BODY_DEPTH. `param_of` turns a pydantic error
location into the `param` OpenAI's error body carries (`messages[0].role`).
"""
from __future__ import annotations

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.types import check_text

MAX_BODY_DEPTH = 64  # the chat domain nests schemas 32 deep; the body wraps them a few levels more


def field_path(parts: list[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p[:64]}" if out else p[:64])
    return out or "the request body"


def check_body(data: Jsonable) -> None:
    """Iterative, so a hostile body cannot recurse us."""
    stack: list[tuple[Jsonable, list[str | int]]] = [(data, [])]
    while stack:
        value, where = stack.pop()
        if len(where) > MAX_BODY_DEPTH:
            raise ChatlabError(f"{field_path(where[:8])}... is nested deeper than {MAX_BODY_DEPTH} "
                               "levels; flatten it", param=field_path(where[:1]))
        if isinstance(value, str):
            check_text(value, field_path(where))  # its error names the path as its param
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str) or not _encodable(key):
                    raise ChatlabError(f"a key in {field_path(where)} holds a lone UTF-16 surrogate "
                                       "(e.g. '\\ud800'); send valid Unicode text",
                                       param=field_path(where))
                stack.append((item, [*where, key]))
        elif isinstance(value, list):
            stack.extend((item, [*where, i]) for i, item in enumerate(value))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_TYPE_NAMES = {"str", "int", "float", "bool", "list", "dict", "none", "tuple"}


def param_of(loc: tuple[Jsonable, ...]) -> str | None:
    """A pydantic error location as a field path (`stream_options.include_usage`), without the
    union-member and validator names pydantic puts in between (`stop.list[str].0`)."""
    parts: list[str | int] = [p for p in loc if isinstance(p, int) or (
        isinstance(p, str) and p.isidentifier() and p not in _TYPE_NAMES)]
    return field_path(parts) if parts else None
