"""The chat domain as frozen objects; the refusal a wire-shape validator raises, relative to
the refused value's path (`param`); and `FromWire`, read as a wire shape, held as an object."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Callable, Literal

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, TypeAdapter, ValidationError
from pydantic_core import CoreSchema, core_schema

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError

NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")  # OpenAI's rule for function names (plus '.')
MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_CHARS = 100_000

Role = Literal["system", "user", "assistant", "tool"]
ChoiceMode = Literal["auto", "none", "required", "named"]
FormatKind = Literal["text", "json_object", "json_schema"]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text of an object, exactly as the model (or client) wrote it

    def to_openai(self) -> dict[str, Jsonable]:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # tool results: which call this answers
    name: str | None = None  # tool results: the tool's name
    reasoning: str | None = None  # assistant `reasoning_content` (Qwen3's <think>)

    def to_template(self) -> dict[str, Jsonable]:
        """The dict shape that Jinja chat templates and the built-in renderers read."""
        d: dict[str, Jsonable] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            d["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        if self.reasoning is not None:
            d["reasoning_content"] = self.reasoning
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        return d


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str = ""
    parameters: dict[str, Jsonable] | None = None  # as sent: templates write "no parameters" their way

    @property
    def schema(self) -> dict[str, Jsonable]:
        """The arguments' JSON schema (an empty object's when the tool declares no parameters)."""
        return self.parameters if self.parameters else {"type": "object", "properties": {}}

    def to_openai(self) -> dict[str, Jsonable]:
        fn: dict[str, Jsonable] = {"name": self.name}
        if self.description:
            fn["description"] = self.description
        if self.parameters is not None:
            fn["parameters"] = self.parameters
        return {"type": "function", "function": fn}


@dataclass(frozen=True)
class ToolChoice:
    mode: ChoiceMode = "auto"
    name: str | None = None  # with mode "named"

    def to_openai(self) -> Jsonable:
        return {"type": "function", "function": {"name": self.name}} if self.mode == "named" else self.mode


@dataclass(frozen=True)
class ResponseFormat:
    kind: FormatKind
    schema: dict[str, Jsonable] | None = None  # json_schema: the schema; json_object: None
    name: str | None = None


class Refusal(ValueError):
    """A validator's refusal: the message is the value's path and `text` (`text` alone when
    `whole`); `param` is the path extended by `field` (or `param` when given)."""

    def __init__(self, text: str, field: str = "", whole: bool = False, param: str | None = None) -> None:
        super().__init__(text)
        self.text, self.field, self.whole, self.param = text, field, whole, param

    def at(self, where: str) -> ChatlabError:
        return ChatlabError(self.text if self.whole else where + self.text, self.param or where + self.field)


_TYPE_NAMES = {"str", "int", "float", "bool", "list", "dict", "none", "tuple"}


def field_path(parts: list[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p[:64]}" if out else p[:64])
    return out or "the request body"


def param_of(loc: tuple[Jsonable, ...]) -> str | None:
    """A pydantic error location as a field path (`stream_options.include_usage`), without the
    union-member and validator names pydantic puts in between (`stop.list[str].0`)."""
    parts: list[str | int] = [p for p in loc if isinstance(p, int) or (
        isinstance(p, str) and p.isidentifier() and p not in _TYPE_NAMES)]
    return field_path(parts) if parts else None


def refusal(err: ValidationError, *root: str) -> ChatlabError:
    """The first error of a validation as a ChatlabError whose `param` names the field."""
    first = err.errors(include_url=False, include_input=False)[0]
    param = param_of((*root, *first["loc"]))
    cause = first.get("ctx", {}).get("error")
    if isinstance(cause, Refusal):
        return cause.at(param or "")
    msg = first["msg"].removeprefix("Value error, ")
    return ChatlabError(f"{param}: {msg}" if param and not msg.startswith(param) else msg, param)


def text_at(value: Jsonable, at: str) -> str:
    """A string that can be encoded: lone UTF-16 surrogates ("\\ud800") cannot be tokenized."""
    if not isinstance(value, str):
        raise Refusal(f"{at} must be a string, not {type(value).__name__}", at)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise Refusal(f"{at} holds a lone UTF-16 surrogate at character {err.start} "
                      "(e.g. '\\ud800'); send valid Unicode text", at) from None
    return value


def check_text(value: Jsonable, where: str) -> str:
    """`value` as encodable text, or a ChatlabError naming `where`."""
    try:
        return text_at(value, "")
    except Refusal as r:
        raise r.at(where) from None


def name_at(value: Jsonable, at: str) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        shown = repr(value)[:40] + ("…" if len(repr(value)) > 40 else "")
        raise Refusal(f"{at} {shown} is not a valid name; use 1-64 characters of "
                      "a-z, A-Z, 0-9, '_', '-' or '.'", at)
    return value


def json_at(value: Jsonable, at: str) -> str:
    """JSON text of `value`, refusing values too large, too deep or not encodable."""
    def depth(v: Jsonable, d: int = 0) -> int:
        if d > MAX_SCHEMA_DEPTH:
            raise Refusal(f"{at} is nested deeper than {MAX_SCHEMA_DEPTH} levels; flatten it", at)
        kids = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
        return max((depth(k, d + 1) for k in kids), default=d)

    depth(value)
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > MAX_SCHEMA_CHARS:
        raise Refusal(f"{at} is {len(text):,} characters of JSON, over the limit of "
                      f"{MAX_SCHEMA_CHARS:,}; shorten it", at)
    return text_at(text, at)


def schema_at(schema: Jsonable, at: str) -> dict[str, Jsonable]:
    """A usable JSON schema (jsonschema's metaschema check), within the size and depth limits."""
    import jsonschema

    if not isinstance(schema, dict):
        raise Refusal(f"{at} must be a JSON schema object, not {type(schema).__name__}", at)
    json_at(schema, at)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        path = "/".join(map(str, e.path)) or "the top"
        raise Refusal(f"{at} is not a valid JSON schema: {e.message[:200]} (at {path}); fix the schema",
                      at) from None
    return schema


def _inline(schema: dict[str, Jsonable]) -> dict[str, Jsonable]:
    """A JSON schema with its $defs inlined (no wire shape recurses)."""
    defs = schema.pop("$defs", {})

    def inline(node: Jsonable) -> Jsonable:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.rsplit("/", 1)[1]])
            return {k: inline(v) for k, v in node.items()}
        return [inline(v) for v in node] if isinstance(node, list) else node

    out = inline(schema)
    assert isinstance(out, dict)
    return out


@cache
def adapter(shape: object) -> TypeAdapter[Jsonable]:
    """The validator of a wire shape (a type form, which mypy cannot name), built once on first use."""
    return TypeAdapter(shape)  # type: ignore[arg-type]


class FromWire:
    """A field read as a wire shape and held as what `convert` makes of it: validated by the
    shape's models, documented as the shape (`doc`, when the documented form differs)."""

    def __init__(self, shape: object, convert: Callable[[Jsonable], Jsonable], doc: object = None,
                 deprecated: bool = False) -> None:
        self.shape, self.convert, self.doc, self.deprecated = shape, convert, doc, deprecated

    def __get_pydantic_core_schema__(self, source: object, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self.convert, handler.generate_schema(self.shape))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> dict[str, Jsonable]:
        doc = self.doc or self.shape
        out = _inline(adapter(doc).json_schema())
        if "anyOf" in out:  # null means "left out": documented as the shape alone
            options = [o for o in out.pop("anyOf") if o.get("type") != "null"]
            out = {**out, **options[0]} if len(options) == 1 else {**out, "anyOf": options}
        return {**out, "deprecated": True} if self.deprecated else out
