"""The OpenAI wire shape of the chat domain, typed once as TypedDicts: the source of the parse
rules' constants and of /openapi.json's schemas (each standing alone, its definitions inlined).
The TypedDicts say what a client may send; chatlab.types.parse decides what it means.
"""
from __future__ import annotations

from typing import Annotated, Literal, NotRequired, get_args

from pydantic import Field, StringConstraints, TypeAdapter
from typing_extensions import TypedDict  # pydantic reads typing's TypedDict only from Python 3.12

from chatlab._thirdparty import Jsonable
from chatlab.types.checks import NAME_RE

WireRole = Literal["system", "developer", "user", "assistant", "tool", "function"]
ROLES: tuple[str, ...] = get_args(WireRole)  # developer -> system, function -> tool (legacy)
MAX_TOOLS = 128  # OpenAI's limit
MAX_STOPS, MAX_STOP_CHARS = 16, 1_000
Name = Annotated[str, StringConstraints(pattern=NAME_RE.pattern)]


class TextPart(TypedDict):
    type: Literal["text"]
    text: str


class WireFunctionCall(TypedDict):
    name: str
    arguments: NotRequired[str | dict[str, Jsonable]]  # JSON text (an object is taken too)


class WireToolCall(TypedDict):
    id: NotRequired[str]
    type: NotRequired[Literal["function"]]
    function: WireFunctionCall


class WireMessage(TypedDict):
    role: WireRole
    content: NotRequired[str | list[TextPart] | None]
    name: NotRequired[str]
    tool_call_id: NotRequired[str]
    tool_calls: NotRequired[list[WireToolCall]]
    function_call: NotRequired[WireFunctionCall]
    reasoning_content: NotRequired[str]


class Function(TypedDict):
    name: Name
    description: NotRequired[str]
    parameters: NotRequired[dict[str, Jsonable]]


class WireTool(TypedDict):
    type: NotRequired[Literal["function"]]
    function: Function


class NamedFunction(TypedDict):
    name: str


class NamedTool(TypedDict):
    type: NotRequired[Literal["function"]]
    function: NamedFunction


class JsonSchema(TypedDict):
    name: NotRequired[str]
    schema: dict[str, Jsonable]
    strict: NotRequired[bool]


class WireResponseFormat(TypedDict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: NotRequired[JsonSchema]


Messages = Annotated[list[WireMessage], Field(min_length=1)]
Tools = Annotated[list[WireTool], Field(max_length=MAX_TOOLS)]
Functions = Annotated[list[Function], Field(max_length=MAX_TOOLS)]
WireToolChoice = Literal["auto", "none", "required"] | NamedTool
WireFunctionChoice = Literal["auto", "none"] | NamedFunction
Stop = str | Annotated[list[Annotated[str, Field(max_length=MAX_STOP_CHARS)]], Field(max_length=MAX_STOPS)] | None
Prompt = str | list[str]


def schema_of(shape: TypeAdapter[object], deprecated: bool = False) -> dict[str, Jsonable]:
    """The JSON Schema of a wire shape, with its $defs inlined (none of these shapes recurse)."""
    schema = shape.json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Jsonable) -> Jsonable:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                return inline(defs[ref.rsplit("/", 1)[1]])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    out = inline(schema)
    assert isinstance(out, dict)
    return {**out, "deprecated": True} if deprecated else out


MESSAGES_SCHEMA = schema_of(TypeAdapter(Messages))
TOOLS_SCHEMA = schema_of(TypeAdapter(Tools))
FUNCTIONS_SCHEMA = schema_of(TypeAdapter(Functions), deprecated=True)
TOOL_CHOICE_SCHEMA = schema_of(TypeAdapter(WireToolChoice))
FUNCTION_CALL_SCHEMA = schema_of(TypeAdapter(WireFunctionChoice), deprecated=True)
RESPONSE_FORMAT_SCHEMA = schema_of(TypeAdapter(WireResponseFormat))
STOP_SCHEMA = schema_of(TypeAdapter(Stop))
PROMPT_SCHEMA = schema_of(TypeAdapter(Prompt))
