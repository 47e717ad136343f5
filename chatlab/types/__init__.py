"""The chat domain: messages, tools, tool choice and response format.

OpenAI's wire shapes are pydantic models: one definition validates what a client sends, documents
it (/openapi.json) and makes the frozen objects that every layer below takes (`Message`,
`ToolSpec`, ...). A validator refuses with a `Refusal` written relative to the value's place, so
`param` is the field's path (`messages[0].role`) however the value was reached. The `parse_*`
functions apply the same models to plain dicts (the CLI, a notebook); domain objects pass through.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Callable, ClassVar, Literal, get_args

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, GetCoreSchemaHandler, GetJsonSchemaHandler,
                      StringConstraints, TypeAdapter, ValidationError, model_validator)
from pydantic_core import CoreSchema, core_schema

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError, UnknownNameError

NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")  # OpenAI's rule for function names (plus '.')
MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_CHARS = 100_000
MAX_DESCRIPTION_CHARS = 8_192
MAX_TOOLS = 128  # OpenAI's limit
MAX_STOPS, MAX_STOP_CHARS = 16, 1_000

Role = Literal["system", "user", "assistant", "tool"]
WireRole = Literal["system", "developer", "user", "assistant", "tool", "function"]
ROLES: tuple[str, ...] = get_args(WireRole)  # developer -> system, function -> tool (legacy)
ChoiceMode = Literal["auto", "none", "required", "named"]
FormatKind = Literal["text", "json_object", "json_schema"]
Name = Annotated[str, StringConstraints(pattern=NAME_RE.pattern)]


# -- the domain: what every layer below the edge takes ----------------------------------------
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
        """The arguments' JSON schema (an empty object when the tool declares no parameters:
        none sent, or `{}`, which alone would let a grammar write any JSON value)."""
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


# -- refusals and where they point ------------------------------------------------------------
class Refusal(ValueError):
    """A validator's refusal, written relative to the refused value's path: the message is the
    path followed by `text` (or `text` alone when `whole`); `param` is the path extended by
    `field` (or `param` itself when given)."""

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


def _text(value: Jsonable, at: str) -> str:
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
        return _text(value, "")
    except Refusal as r:
        raise r.at(where) from None


def _name(value: Jsonable, at: str) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        shown = repr(value)[:40] + ("…" if len(repr(value)) > 40 else "")
        raise Refusal(f"{at} {shown} is not a valid name; use 1-64 characters of "
                      "a-z, A-Z, 0-9, '_', '-' or '.'", at)
    return value


def _json(value: Jsonable, at: str) -> str:
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
    return _text(text, at)


def _schema(schema: Jsonable, at: str) -> dict[str, Jsonable]:
    """A usable JSON schema (jsonschema's metaschema check), within the size and depth limits."""
    import jsonschema

    if not isinstance(schema, dict):
        raise Refusal(f"{at} must be a JSON schema object, not {type(schema).__name__}", at)
    _json(schema, at)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        path = "/".join(map(str, e.path)) or "the top"
        raise Refusal(f"{at} is not a valid JSON schema: {e.message[:200]} (at {path}); fix the schema",
                      at) from None
    return schema


# -- the wire shapes --------------------------------------------------------------------------
class Wire(BaseModel):
    # strict, as OpenAI's parsing is ("0.5" is not a number); validators built on first use
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, strict=True, frozen=True, defer_build=True)


class TextPart(Wire):
    type: Literal["text"]
    text: str


class WireFunctionCall(Wire):
    name: str
    arguments: str | dict[str, Jsonable] = "{}"  # JSON text (an object is taken too)


class WireToolCall(Wire):
    id: str | None = None
    type: Literal["function"] = "function"
    function: WireFunctionCall


def _calls(msg: dict[str, Jsonable]) -> list[dict[str, Jsonable]]:
    """An assistant's calls (legacy `function_call` as the one call), checked."""
    calls = msg.get("tool_calls")
    if calls is None and msg.get("function_call") is not None:
        calls = [{"function": msg["function_call"]}]
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise Refusal('.tool_calls must be a list of {"id", "type": "function", "function": {"name", '
                      '"arguments"}}', ".tool_calls")
    out = []
    for j, call in enumerate(calls):
        at = f".tool_calls[{j}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not fn.get("name"):
            raise Refusal(f"{at} has no function name; expected "
                          '{"type": "function", "function": {"name": ..., "arguments": "{...}"}}',
                          f"{at}.function.name")
        call_id = _text(call["id"], f"{at}.id")[:128] if call.get("id") else None
        args = fn.get("arguments")
        where = f"{at}.function.arguments"
        text = "{}" if args is None else _json(args, where) if isinstance(args, dict) else _text(args, where)
        out.append({"id": call_id, "function": {"name": _name(fn["name"], f"{at}.function.name"),
                                                "arguments": text}})
    return out


class WireMessage(Wire):
    role: WireRole
    content: str | list[TextPart] | None = None
    name: Name | None = None
    tool_call_id: str | None = None
    tool_calls: list[WireToolCall] | None = None
    function_call: WireFunctionCall | None = None
    reasoning_content: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _rules(cls, msg: Jsonable) -> Jsonable:
        if isinstance(msg, Message):
            msg = msg.to_template()
        if not isinstance(msg, dict):
            raise Refusal(f" must be an object with role and content, not {type(msg).__name__}")
        role = msg.get("role")
        if role not in ROLES:
            raise Refusal(f".role: unknown role {str(role)[:40]!r}; valid roles: {', '.join(ROLES)}", ".role")
        content = msg.get("content")
        if isinstance(content, str):
            _text(content, ".content")
        elif isinstance(content, list):
            for j, part in enumerate(content):
                if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                    kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                    raise Refusal(f".content[{j}] is a {kind!r} part; this model takes text only: send a "
                                  'string or [{"type": "text", "text": "..."}] parts', f".content[{j}]")
                _text(part["text"], f".content[{j}].text")
        elif content is not None:
            raise Refusal(f".content must be a string, a list of text parts or null, not "
                          f"{type(content).__name__}", ".content")
        calls = _calls(msg) if role == "assistant" else []
        if content is None and not calls and role != "assistant":
            raise Refusal(f" ({role}) has no content; every {role} message needs 'content' (a string or "
                          "a list of text parts)", ".content")
        if role == "assistant" and content is None and not calls:
            raise Refusal(" (assistant) has neither content nor tool_calls; send one", ".content")
        out: dict[str, Jsonable] = {"role": role, "content": content, "tool_calls": calls or None}
        # optional, as vLLM, LMDeploy and Ollama take a result without one (no chatlab renderer
        # reads it; a template that needs it, such as Mistral's, says so itself)
        if role == "tool" and msg.get("tool_call_id") is not None:
            if not isinstance(msg["tool_call_id"], str) or not msg["tool_call_id"]:
                raise Refusal(".tool_call_id must be the id (a non-empty string) of the assistant's tool "
                              "call that this message answers, or left out", ".tool_call_id")
            out["tool_call_id"] = _text(msg["tool_call_id"], ".tool_call_id")
        if msg.get("name") is not None:  # a participant's or a tool's name: bounded, plain
            out["name"] = _name(msg["name"], ".name")
        if role == "function" and out.get("name") is None:
            raise Refusal(" (function) has no name; send the function's name", ".name")
        if role == "assistant" and isinstance(msg.get("reasoning_content"), str):
            out["reasoning_content"] = _text(msg["reasoning_content"], ".reasoning_content")
        return out

    def domain(self, i: int) -> Message:
        """The message as the i-th of its list (calls sent without an id get one from i)."""
        legacy = self.function_call is not None and self.tool_calls is None
        calls = tuple(ToolCall(c.id or (f"call_{i}" if legacy else f"call_{i}_{j}"), c.function.name,
                               str(c.function.arguments)) for j, c in enumerate(self.tool_calls or ()))
        content = self.content if isinstance(self.content, str) else "".join(p.text for p in self.content or ())
        role: Role = {"developer": "system", "function": "tool"}.get(self.role, self.role)  # type: ignore[assignment]
        return Message(role, content, calls, self.tool_call_id, self.name, self.reasoning_content)


class Function(Wire):
    legacy: ClassVar[bool] = False  # a legacy `functions` entry: its paths keep `.function.`

    name: Name
    description: str = ""
    parameters: dict[str, Jsonable] | None = None

    @model_validator(mode="before")
    @classmethod
    def _rules(cls, fn: Jsonable) -> Jsonable:
        named = ".function" if cls.legacy else ""
        if cls.legacy and (not isinstance(fn, dict) or not fn.get("name")):
            raise Refusal(' has no name; each tool needs {"type": "function", "function": {"name": "...", '
                          '"parameters": {...}}}', ".name")
        assert isinstance(fn, dict)  # a WireTool checked it
        name = _name(fn["name"], f"{named}.name")
        desc = _text(fn.get("description") or "", f"{named}.description")
        if len(desc) > MAX_DESCRIPTION_CHARS:
            raise Refusal(f"{named}.description is {len(desc):,} characters, over the limit of "
                          f"{MAX_DESCRIPTION_CHARS:,}; shorten it", f"{named}.description")
        params = fn.get("parameters")
        return {"name": name, "description": desc,
                "parameters": None if params is None else _arguments_schema(_schema(params, ".parameters"))}

    def domain(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


class LegacyFunction(Function):
    legacy = True


def _arguments_schema(schema: dict[str, Jsonable]) -> dict[str, Jsonable]:
    """A tool's parameters: the schema of its arguments object ("type": "object"), or `{}` for a
    tool that declares none. A call's arguments are always a JSON object, so a schema of anything
    else (an array, a string, a root enum, no type at all) describes no call a model can make:
    the forced grammar would write a value that no parser can return as a call."""
    if not schema or schema.get("type") == "object":
        return schema
    root = f'"type": {json.dumps(schema["type"])}' if "type" in schema else 'no "type"'
    raise Refusal(f'.parameters must be the JSON schema of an object ("type": "object"), not one with '
                  f"{root}: a tool's arguments are always a JSON object. Put the value in a "
                  'property instead, e.g. {"type": "object", "properties": {"value": <this schema>}, '
                  '"required": ["value"]}', ".parameters")


class WireTool(Wire):
    type: Literal["function"] = "function"
    function: Function

    @model_validator(mode="before")
    @classmethod
    def _rules(cls, tool: Jsonable) -> Jsonable:
        if isinstance(tool, ToolSpec):
            return tool.to_openai()
        if isinstance(tool, dict) and tool.get("type", "function") != "function":
            raise Refusal(f".type is {str(tool.get('type'))[:40]!r}; only 'function' tools are supported",
                          ".type")
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not fn.get("name"):
            raise Refusal(' has no name; each tool needs {"type": "function", "function": {"name": "...", '
                          '"parameters": {...}}}')
        return {"type": "function", "function": fn}


class NamedFunction(Wire):
    name: str


class NamedTool(Wire):
    type: Literal["function"] = "function"
    function: NamedFunction


class JsonSchemaFormat(Wire):
    name: str | None = None
    schema_: dict[str, Jsonable] = Field(alias="schema")
    strict: bool | None = None


class WireResponseFormat(Wire):
    type: FormatKind
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="before")
    @classmethod
    def _rules(cls, fmt: Jsonable) -> Jsonable:
        if isinstance(fmt, ResponseFormat):
            return {"type": fmt.kind, "json_schema": None if fmt.schema is None else
                    {"schema": fmt.schema, "name": fmt.name}}
        if not isinstance(fmt, dict):
            raise Refusal("response_format must be {\"type\": \"text\" | \"json_object\" | \"json_schema\"}",
                          whole=True)
        kind = fmt.get("type", "text")
        if kind not in get_args(FormatKind):
            raise Refusal("response_format.type must be \"text\", \"json_object\" or \"json_schema\", "
                          f"not {str(fmt.get('type'))[:40]!r}", ".type", whole=True)
        if kind != "json_schema":
            return {"type": kind}
        spec = fmt.get("json_schema") or {}
        if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
            raise Refusal("response_format json_schema needs json_schema.schema (a JSON schema object)",
                          ".json_schema.schema", whole=True)
        name = spec.get("name")
        return {"type": kind, "json_schema": {
            "schema": _schema(spec["schema"], ".json_schema.schema"),
            "name": _text(name, ".json_schema.name") if isinstance(name, str) else None}}

    def domain(self) -> ResponseFormat | None:
        if self.type == "text":
            return None
        spec = self.json_schema
        return ResponseFormat(self.type, spec.schema_ if spec else None, spec.name if spec else None)


def _choice(choice: Jsonable) -> Jsonable:
    """`tool_choice` (or legacy `function_call`) in its one wire form: "auto" / "none" /
    "required", or {"type": "function", "function": {"name": N}} from that, legacy {"name": N}
    or a bare tool name (the CLI's --tool-choice NAME)."""
    if isinstance(choice, ToolChoice):
        return choice.to_openai()
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    name = choice
    if isinstance(choice, dict):
        fn = choice.get("function", choice)
        name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str):
        raise Refusal(f"tool_choice {str(choice)[:60]!r} is not understood; use 'auto', 'none', "
                      "'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                      whole=True, param="tool_choice")
    return {"type": "function", "function": {"name": name}}


def _nonempty_list(value: Jsonable) -> Jsonable:
    if not isinstance(value, (list, tuple)) or not value:
        raise Refusal('messages must be a non-empty list of {"role": ..., "content": ...} objects', whole=True)
    return list(value)


def _a_list(value: Jsonable) -> Jsonable:
    if value is not None and not isinstance(value, (list, tuple)):
        raise Refusal(f" must be a list, got {type(value).__name__}; pass "
                      '[{"type": "function", "function": {"name": ..., "parameters": {...}}}]')
    return value


Messages = Annotated[list[WireMessage], BeforeValidator(_nonempty_list), Field(min_length=1)]
Tools = Annotated[list[WireTool] | None, BeforeValidator(_a_list), Field(json_schema_extra={"maxItems": MAX_TOOLS})]
Functions = Annotated[list[LegacyFunction] | None, BeforeValidator(_a_list),
                      Field(json_schema_extra={"maxItems": MAX_TOOLS})]
WireToolChoice = Annotated[Literal["auto", "none", "required"] | NamedTool | None, BeforeValidator(_choice)]
WireFunctionChoice = Literal["auto", "none"] | NamedFunction  # the legacy shape, as documented
Stop = str | Annotated[list[Annotated[str, Field(max_length=MAX_STOP_CHARS)]], Field(max_length=MAX_STOPS)] | None
Prompt = str | list[str]


def _inline(schema: dict[str, Jsonable]) -> dict[str, Jsonable]:
    """A JSON schema with its $defs inlined (no wire shape recurses), so each field's schema in
    /openapi.json stands alone."""
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
def _adapter(shape: Any) -> TypeAdapter[Jsonable]:
    return TypeAdapter(shape)


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
        out = _inline(_adapter(doc).json_schema())
        if "anyOf" in out:  # null means "left out": documented as the shape alone
            options = [o for o in out.pop("anyOf") if o.get("type") != "null"]
            out = {**out, **options[0]} if len(options) == 1 else {**out, "anyOf": options}
        return {**out, "deprecated": True} if self.deprecated else out


def messages_of(wire: list[WireMessage]) -> tuple[Message, ...]:
    return tuple(m.domain(i) for i, m in enumerate(wire))


def tools_of(wire: list[WireTool] | list[LegacyFunction] | None) -> tuple[ToolSpec, ...]:
    return tuple((t.function if isinstance(t, WireTool) else t).domain() for t in wire or ())


def choice_of(wire: Jsonable) -> ToolChoice | None:
    if wire is None or isinstance(wire, str):
        return None if wire is None else ToolChoice(wire)  # type: ignore[arg-type]
    return ToolChoice("named", wire.function.name)


def format_of(wire: WireResponseFormat | None) -> ResponseFormat | None:
    return None if wire is None else wire.domain()


def merge_tools(tools: tuple[ToolSpec, ...], functions: tuple[ToolSpec, ...], label: str) -> list[ToolSpec]:
    """`tools` and legacy `functions` as one list: within the limit, names unique."""
    out = [*tools, *functions]
    if len(out) > MAX_TOOLS:
        raise ChatlabError(f"{len(out)} tools is over the limit of {MAX_TOOLS}; send fewer", param=label)
    seen = [t.name for t in out]
    dup = next((n for n in seen if seen.count(n) > 1), None)
    if dup:
        raise ChatlabError(f"the tool name {dup!r} is given twice; tool names must be unique", param=label)
    return out


def named_choice(choice: ToolChoice | None, tools: list[ToolSpec]) -> ToolChoice:
    """The choice, its named tool one of `tools`. "required" with no tools is allowed: llama-index
    sends it."""
    if choice is None:
        return ToolChoice("auto")
    names = [t.name for t in tools]
    if choice.mode == "named" and choice.name not in names:
        raise UnknownNameError("tool_choice", (choice.name or "")[:64], ["auto", "none", "required", *names],
                               param="tool_choice")
    return choice


def _validate(shape: object, value: Jsonable, root: str) -> Jsonable:
    try:
        return _adapter(shape).validate_python(value)
    except ValidationError as err:
        raise refusal(err, root) from None


def parse_messages(messages: Jsonable) -> list[Message]:
    """OpenAI-shaped messages (dicts or Messages) as Messages."""
    return list(messages_of(_validate(Messages, messages, "messages")))


def parse_tools(tools: Jsonable = None, functions: Jsonable = None) -> list[ToolSpec]:
    """OpenAI `tools` (or legacy `functions`) as ToolSpecs; names unique, schemas valid."""
    return merge_tools(tools_of(_validate(Tools, tools, "tools")),
                       tools_of(_validate(Functions, functions, "functions")),
                       "tools" if tools is not None else "functions")


def parse_tool_choice(choice: Jsonable, tools: list[ToolSpec]) -> ToolChoice:
    """OpenAI `tool_choice` (or legacy `function_call`) naming one of `tools` if any."""
    return named_choice(choice_of(_validate(WireToolChoice, choice, "tool_choice")), tools)


def parse_response_format(fmt: Jsonable) -> ResponseFormat | None:
    """None for plain text; json_object; json_schema with its schema checked."""
    return format_of(_validate(WireResponseFormat | None, fmt, "response_format"))


__all__ = ["FromWire", "Message", "NAME_RE", "ResponseFormat", "Refusal", "ToolCall", "ToolChoice",
           "ToolSpec", "Wire", "check_text", "param_of", "parse_messages", "parse_response_format",
           "parse_tool_choice", "parse_tools", "refusal"]
