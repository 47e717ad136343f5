"""The one set of parse rules: OpenAI-shaped dicts in, chat domain objects out (for the server's
request path, the CLI, a notebook passing plain dicts); nothing below re-checks them."""
from __future__ import annotations

import json

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError, UnknownNameError
from chatlab.types.checks import check_json, check_name, check_schema, check_text
from chatlab.types.objects import Message, ResponseFormat, Role, ToolCall, ToolChoice, ToolSpec
from chatlab.types.wire import MAX_TOOLS, ROLES  # the wire shape's own values (and its schema's)

MAX_DESCRIPTION_CHARS = 8_192


def _content(i: int, msg: dict[str, Jsonable]) -> str | None:
    content = msg.get("content")
    if content is None or isinstance(content, str):
        return None if content is None else check_text(content, f"messages[{i}].content")
    if not isinstance(content, list):
        raise ChatlabError(f"messages[{i}].content must be a string, a list of text parts or null, "
                           f"not {type(content).__name__}", param=f"messages[{i}].content")
    texts = []
    for j, part in enumerate(content):
        if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise ChatlabError(f"messages[{i}].content[{j}] is a {kind!r} part; this model takes "
                               'text only: send a string or [{"type": "text", "text": "..."}] parts',
                               param=f"messages[{i}].content[{j}]")
        texts.append(check_text(part["text"], f"messages[{i}].content[{j}].text"))
    return "".join(texts)


def _arguments(where: str, args: Jsonable) -> str:
    if args is None:
        return "{}"
    if isinstance(args, dict):
        return check_json(args, where)
    return check_text(args, where)


def _tool_calls(i: int, msg: dict[str, Jsonable]) -> tuple[ToolCall, ...]:
    calls = msg.get("tool_calls")
    if calls is None and msg.get("function_call") is not None:
        calls = [{"id": f"call_{i}", "type": "function", "function": msg["function_call"]}]
    if calls is None:
        return ()
    if not isinstance(calls, list):
        raise ChatlabError(f"messages[{i}].tool_calls must be a list of "
                           '{"id", "type": "function", "function": {"name", "arguments"}}',
                           param=f"messages[{i}].tool_calls")
    out = []
    for j, call in enumerate(calls):
        where = f"messages[{i}].tool_calls[{j}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not fn.get("name"):
            raise ChatlabError(f"{where} has no function name; expected "
                               '{"type": "function", "function": {"name": ..., "arguments": "{...}"}}',
                               param=f"{where}.function.name")
        call_id = call.get("id") or f"call_{i}_{j}"
        out.append(ToolCall(check_text(call_id, f"{where}.id")[:128], check_name(fn["name"], f"{where}.function.name"),
                            _arguments(f"{where}.function.arguments", fn.get("arguments"))))
    return tuple(out)


def parse_message(i: int, msg: Jsonable) -> Message:
    if isinstance(msg, Message):
        return msg
    if not isinstance(msg, dict):
        raise ChatlabError(f"messages[{i}] must be an object with role and content, not "
                           f"{type(msg).__name__}", param=f"messages[{i}]")
    role = msg.get("role")
    if role not in ROLES:
        raise ChatlabError(f"messages[{i}].role: unknown role {str(role)[:40]!r}; valid roles: "
                           f"{', '.join(ROLES)}", param=f"messages[{i}].role")
    content = _content(i, msg)
    calls = _tool_calls(i, msg) if role == "assistant" else ()
    if content is None and not calls and role != "assistant":
        raise ChatlabError(f"messages[{i}] ({role}) has no content; every {role} message needs "
                           "'content' (a string or a list of text parts)", param=f"messages[{i}].content")
    if role == "assistant" and content is None and not calls:
        raise ChatlabError(f"messages[{i}] (assistant) has neither content nor tool_calls; send one",
                           param=f"messages[{i}].content")
    tool_call_id = name = reasoning = None
    # optional, as vLLM, LMDeploy and Ollama take a result without one (no chatlab renderer reads
    # it; a template that needs it, such as Mistral's, says so itself)
    if role == "tool" and msg.get("tool_call_id") is not None:
        if not isinstance(msg["tool_call_id"], str) or not msg["tool_call_id"]:
            raise ChatlabError(f"messages[{i}].tool_call_id must be the id (a non-empty string) of the "
                               "assistant's tool call that this message answers, or left out",
                               param=f"messages[{i}].tool_call_id")
        tool_call_id = check_text(msg["tool_call_id"], f"messages[{i}].tool_call_id")
    if msg.get("name") is not None:  # a participant's or a tool's name: bounded, plain
        name = check_name(msg["name"], f"messages[{i}].name")
    if role == "function" and name is None:
        raise ChatlabError(f"messages[{i}] (function) has no name; send the function's name",
                           param=f"messages[{i}].name")
    if role == "assistant" and isinstance(msg.get("reasoning_content"), str):
        reasoning = check_text(msg["reasoning_content"], f"messages[{i}].reasoning_content")
    kind: Role = {"developer": "system", "function": "tool"}.get(role, role)  # type: ignore[assignment]
    return Message(kind, content or "", calls, tool_call_id, name, reasoning)


def parse_messages(messages: Jsonable) -> list[Message]:
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ChatlabError('messages must be a non-empty list of {"role": ..., "content": ...} objects',
                           param="messages")
    return [parse_message(i, m) for i, m in enumerate(messages)]


def _tool(label: str, i: int, tool: Jsonable, legacy: bool) -> ToolSpec:
    if isinstance(tool, ToolSpec):
        return tool
    fn = tool if legacy else (tool.get("function") if isinstance(tool, dict) else None)
    if not legacy and isinstance(tool, dict) and tool.get("type", "function") != "function":
        raise ChatlabError(f"{label}[{i}].type is {str(tool.get('type'))[:40]!r}; only 'function' tools "
                           "are supported", param=f"{label}[{i}].type")
    if not isinstance(fn, dict) or not fn.get("name"):
        raise ChatlabError(f"{label}[{i}] has no name; each tool needs "
                           '{"type": "function", "function": {"name": "...", "parameters": {...}}}',
                           param=f"{label}[{i}]" if not legacy else f"{label}[{i}].name")
    name = check_name(fn["name"], f"{label}[{i}].function.name")
    desc = fn.get("description") or ""
    check_text(desc, f"{label}[{i}].function.description")
    if len(desc) > MAX_DESCRIPTION_CHARS:
        raise ChatlabError(f"{label}[{i}].function.description is {len(desc):,} characters, over the "
                           f"limit of {MAX_DESCRIPTION_CHARS:,}; shorten it",
                           param=f"{label}[{i}].function.description")
    params = fn.get("parameters")
    where = f"{label}[{i}].function.parameters" if not legacy else f"{label}[{i}].parameters"
    return ToolSpec(name, desc, None if params is None else _arguments_schema(check_schema(params, where), where))


def _arguments_schema(schema: dict[str, Jsonable], where: str) -> dict[str, Jsonable]:
    """A tool's parameters: the schema of its arguments object ("type": "object"), or `{}` for a
    tool that declares none. A call's arguments are always a JSON object, so a schema of anything
    else (an array, a string, a root enum, no type at all) describes no call a model can make:
    the forced grammar would write a value that no parser can return as a call."""
    if not schema or schema.get("type") == "object":
        return schema
    root = f'"type": {json.dumps(schema["type"])}' if "type" in schema else 'no "type"'
    raise ChatlabError(f'{where} must be the JSON schema of an object ("type": "object"), not one with '
                       f"{root}: a tool's arguments are always a JSON object. Put the value in a "
                       'property instead, e.g. {"type": "object", "properties": {"value": <this schema>}, '
                       '"required": ["value"]}', param=where)


def parse_tools(tools: Jsonable = None, functions: Jsonable = None) -> list[ToolSpec]:
    """OpenAI `tools` (or legacy `functions`) as ToolSpecs; names unique, schemas valid."""
    out: list[ToolSpec] = []
    for label, value, legacy in (("tools", tools, False), ("functions", functions, True)):
        if value is None:
            continue
        if not isinstance(value, (list, tuple)):
            raise ChatlabError(f"{label} must be a list, got {type(value).__name__}; pass "
                               '[{"type": "function", "function": {"name": ..., "parameters": {...}}}]',
                               param=label)
        out += [_tool(label, i, t, legacy) for i, t in enumerate(value)]
    if len(out) > MAX_TOOLS:
        raise ChatlabError(f"{len(out)} tools is over the limit of {MAX_TOOLS}; send fewer",
                           param="tools" if tools is not None else "functions")
    seen = [t.name for t in out]
    dup = next((n for n in seen if seen.count(n) > 1), None)
    if dup:
        raise ChatlabError(f"the tool name {dup!r} is given twice; tool names must be unique",
                           param="tools" if tools is not None else "functions")
    return out


def parse_tool_choice(choice: Jsonable, tools: list[ToolSpec]) -> ToolChoice:
    """OpenAI `tool_choice` (or legacy `function_call`): "auto" / "none" / "required",
    {"type": "function", "function": {"name": N}}, legacy {"name": N}, or a bare tool name (the
    CLI's --tool-choice NAME). "required" with no tools is allowed: llama-index sends it."""
    if isinstance(choice, ToolChoice):
        return choice
    if choice is None:
        return ToolChoice("auto")
    if choice in ("auto", "none", "required"):
        return ToolChoice(choice)
    name = choice
    if isinstance(choice, dict):
        fn = choice.get("function", choice)
        name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str):
        raise ChatlabError(f"tool_choice {str(choice)[:60]!r} is not understood; use 'auto', 'none', "
                           "'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}",
                           param="tool_choice")
    names = [t.name for t in tools]
    if name not in names:
        raise UnknownNameError("tool_choice", name[:64], ["auto", "none", "required", *names],
                               param="tool_choice")
    return ToolChoice("named", name)


def parse_response_format(fmt: Jsonable) -> ResponseFormat | None:
    """None for plain text; json_object; json_schema with its schema checked."""
    if fmt is None or isinstance(fmt, ResponseFormat):
        return None if fmt is None or fmt.kind == "text" else fmt
    if not isinstance(fmt, dict):
        raise ChatlabError("response_format must be {\"type\": \"text\" | \"json_object\" | \"json_schema\"}",
                           param="response_format")
    kind = fmt.get("type", "text")
    if kind not in ("text", "json_object", "json_schema"):
        raise ChatlabError("response_format.type must be \"text\", \"json_object\" or \"json_schema\", "
                           f"not {str(fmt.get('type'))[:40]!r}", param="response_format.type")
    if kind == "text":
        return None
    if kind == "json_object":
        return ResponseFormat("json_object")
    spec = fmt.get("json_schema") or {}
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
        raise ChatlabError("response_format json_schema needs json_schema.schema (a JSON schema object)",
                           param="response_format.json_schema.schema")
    name = spec.get("name")
    return ResponseFormat("json_schema", check_schema(spec["schema"], "response_format.json_schema.schema"),
                          check_text(name, "response_format.json_schema.name") if isinstance(name, str) else None)
