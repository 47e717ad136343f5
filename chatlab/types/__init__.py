"""The chat domain read from OpenAI's wire shapes: pydantic models that validate, document
(/openapi.json) and make chatlab.types.objects; `parse_*` apply them to plain dicts."""
from __future__ import annotations

import json
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, ValidationError,
                      model_validator)

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.types.objects import (NAME_RE, FormatKind, FromWire, Message, Refusal, ResponseFormat, Role,
                                   ToolCall, ToolChoice, ToolSpec, adapter, check_text, field_path, json_at,
                                   name_at, param_of, refusal, schema_at, text_at)

MAX_DESCRIPTION_CHARS = 8_192
MAX_TOOLS = 128  # OpenAI's limit
MAX_STOPS, MAX_STOP_CHARS = 16, 1_000
WireRole = Literal["system", "developer", "user", "assistant", "tool", "function"]
ROLES: tuple[str, ...] = get_args(WireRole)  # developer -> system, function -> tool (legacy)
Name = Annotated[str, StringConstraints(pattern=NAME_RE.pattern)]


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
        call_id = text_at(call["id"], f"{at}.id")[:128] if call.get("id") else None
        args = fn.get("arguments")
        where = f"{at}.function.arguments"
        text = "{}" if args is None else json_at(args, where) if isinstance(args, dict) else text_at(args, where)
        out.append({"id": call_id, "function": {"name": name_at(fn["name"], f"{at}.function.name"),
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
            text_at(content, ".content")
        elif isinstance(content, list):
            for j, part in enumerate(content):
                if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                    kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                    raise Refusal(f".content[{j}] is a {kind!r} part; this model takes text only: send a "
                                  'string or [{"type": "text", "text": "..."}] parts', f".content[{j}]")
                text_at(part["text"], f".content[{j}].text")
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
        if calls and msg.get("tool_calls") is None:  # legacy: the one call, as sent
            out.update(tool_calls=None, function_call=calls[0]["function"])
        # optional, as in vLLM, LMDeploy and Ollama
        if role == "tool" and msg.get("tool_call_id") is not None:
            if not isinstance(msg["tool_call_id"], str) or not msg["tool_call_id"]:
                raise Refusal(".tool_call_id must be the id (a non-empty string) of the assistant's tool "
                              "call that this message answers, or left out", ".tool_call_id")
            out["tool_call_id"] = text_at(msg["tool_call_id"], ".tool_call_id")
        if msg.get("name") is not None:  # a participant's or a tool's name: bounded, plain
            out["name"] = name_at(msg["name"], ".name")
        if role == "function" and out.get("name") is None:
            raise Refusal(" (function) has no name; send the function's name", ".name")
        if role == "assistant" and isinstance(msg.get("reasoning_content"), str):
            out["reasoning_content"] = text_at(msg["reasoning_content"], ".reasoning_content")
        return out

    def domain(self, i: int) -> Message:
        """The message as the i-th of its list (calls sent without an id get one from i)."""
        calls = tuple(ToolCall(c.id or f"call_{i}_{j}", c.function.name, str(c.function.arguments))
                      for j, c in enumerate(self.tool_calls or ()))
        if self.function_call is not None:
            calls = (ToolCall(f"call_{i}", self.function_call.name, str(self.function_call.arguments)),)
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
        name = name_at(fn["name"], f"{named}.name")
        desc = text_at(fn.get("description") or "", f"{named}.description")
        if len(desc) > MAX_DESCRIPTION_CHARS:
            raise Refusal(f"{named}.description is {len(desc):,} characters, over the limit of "
                          f"{MAX_DESCRIPTION_CHARS:,}; shorten it", f"{named}.description")
        params = fn.get("parameters")
        return {"name": name, "description": desc,
                "parameters": None if params is None else _arguments_schema(schema_at(params, ".parameters"))}

    def domain(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


class LegacyFunction(Function):
    legacy = True


def _arguments_schema(schema: dict[str, Jsonable]) -> dict[str, Jsonable]:
    """A tool's parameters: the schema of its arguments object (always an object), or `{}`."""
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
            "schema": schema_at(spec["schema"], ".json_schema.schema"),
            "name": text_at(name, ".json_schema.name") if isinstance(name, str) else None}}

    def domain(self) -> ResponseFormat | None:
        if self.type == "text":
            return None
        spec = self.json_schema
        return ResponseFormat(self.type, spec.schema_ if spec else None, spec.name if spec else None)


def _choice(choice: Jsonable) -> Jsonable:
    """`tool_choice` (or legacy `function_call`) in its one wire form (a legacy {"name": N} or a
    bare tool name becomes {"type": "function", "function": {"name": N}})."""
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
    return None if value is None else list(value)


Messages = Annotated[list[WireMessage], BeforeValidator(_nonempty_list), Field(min_length=1)]
Tools = Annotated[list[WireTool] | None, BeforeValidator(_a_list), Field(json_schema_extra={"maxItems": MAX_TOOLS})]
Functions = Annotated[list[LegacyFunction] | None, BeforeValidator(_a_list),
                      Field(json_schema_extra={"maxItems": MAX_TOOLS})]
WireToolChoice = Annotated[Literal["auto", "none", "required"] | NamedTool | None, BeforeValidator(_choice)]
WireFunctionChoice = Literal["auto", "none"] | NamedFunction  # the legacy shape, as documented
Stop = str | Annotated[list[Annotated[str, Field(max_length=MAX_STOP_CHARS)]], Field(max_length=MAX_STOPS)] | None
Prompt = str | list[str]


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
    """The choice, its named tool one of `tools` ("required" with none: llama-index sends it)."""
    if choice is None:
        return ToolChoice("auto")
    names = [t.name for t in tools]
    if choice.mode == "named" and choice.name not in names:
        raise UnknownNameError("tool_choice", (choice.name or "")[:64], ["auto", "none", "required", *names],
                               param="tool_choice")
    return choice


def _validate(shape: object, value: Jsonable, root: str) -> Jsonable:
    try:
        return adapter(shape).validate_python(value)
    except ValidationError as err:
        raise refusal(err, root) from None


def parse_messages(messages: Jsonable) -> list[Message]:
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
           "ToolSpec", "Wire", "check_text", "field_path", "param_of", "parse_messages",
           "parse_response_format", "parse_tool_choice", "parse_tools", "refusal"]
