"""Tool definitions, tool_choice and arguments: checked against JSON schema.

jsonschema is used when installed (it arrives with the notebook extras); otherwise a small
validator covers what tool schemas use in practice: type, properties, required, enum, const,
items, additionalProperties. Definition errors are the user's, so they raise ChatlabError;
argument problems are the model's, so they come back as a list of sentences.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from chatlab.errors import ChatlabError, UnknownNameError

TYPES = {"object": dict, "array": list, "string": str, "integer": int, "number": (int, float),
         "boolean": bool, "null": type(None)}


def function_defs(tools: Any) -> list[dict]:
    """The `function` part of each tool: OpenAI `tools` or legacy `functions` entries."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ChatlabError(f"tools must be a list of tool objects, got {type(tools).__name__}; "
                           'pass [{"type": "function", "function": {"name": ..., "parameters": {...}}}]')
    out = []
    for i, tool in enumerate(tools):
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ChatlabError(f"tools[{i}] has no function name; each tool needs "
                               '{"type": "function", "function": {"name": "..."}}')
        out.append(fn)
    return out


def tool_names(tools: Any) -> list[str]:
    return [fn["name"] for fn in function_defs(tools)]


def validate_tools(tools: Any) -> list[dict]:
    """Check names and parameter schemas; returns the function definitions."""
    fns = function_defs(tools)
    for fn in fns:
        params = fn.get("parameters", {"type": "object"})
        try:
            check_schema(params)
        except ChatlabError as e:
            raise ChatlabError(f"tool {fn['name']!r} has an invalid JSON schema in "
                               f"'parameters': {e}; fix the schema") from None
    return fns


def check_schema(schema: Any) -> None:
    """Raise ChatlabError if `schema` is not a usable JSON schema."""
    try:
        import jsonschema
    except ImportError:
        return _check_schema_minimal(schema)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as e:
        raise ChatlabError(f"{e.message} (at {'/'.join(map(str, e.path)) or 'the top'})") from None


def _check_schema_minimal(schema: Any, where: str = "the top") -> None:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        raise ChatlabError(f"a schema must be an object, got {schema!r} at {where}")
    kinds = schema.get("type", [])
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind not in TYPES:
            raise ChatlabError(f"{kind!r} is not a JSON schema type at {where}")
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise ChatlabError(f"'properties' must be an object at {where}")
    for key, sub in props.items():
        _check_schema_minimal(sub, f"properties/{key}")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise ChatlabError(f"'required' must be a list of strings at {where}")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise ChatlabError(f"'enum' must be a list at {where}")
    if "items" in schema:
        _check_schema_minimal(schema["items"], f"{where}/items")


def validate_instance(instance: Any, schema: Any) -> list[str]:
    """Problems with `instance` against `schema` (empty list: valid)."""
    try:
        import jsonschema
    except ImportError:
        return _problems(instance, schema, "$")
    validator = jsonschema.Draft202012Validator(schema)
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(instance)]


def _problems(value: Any, schema: Any, path: str) -> list[str]:
    if schema is True or not isinstance(schema, dict):
        return [] if schema is not False else [f"{path}: no value is allowed here"]
    kinds = schema.get("type")
    if kinds is not None:
        kinds = kinds if isinstance(kinds, list) else [kinds]
        # bool is an int in Python but not in JSON
        if not any(isinstance(value, TYPES[k]) and not (k in ("integer", "number") and isinstance(value, bool))
                   for k in kinds):
            return [f"{path}: {value!r} is not of type {' or '.join(kinds)}"]
    out = []
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        out.append(f"{path}: {value!r} is not {schema['const']!r}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        out += [f"{path}: {r!r} is a required property" for r in schema.get("required", []) if r not in value]
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            sub = props.get(key, extra)
            out += _problems(item, sub, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            out += _problems(item, schema["items"], f"{path}[{i}]")
    return out


def validate_arguments(arguments: str, tools: Any, name: str) -> list[str]:
    """Problems with a call's JSON arguments text against the named tool's parameters."""
    fn = next((f for f in function_defs(tools) if f["name"] == name), None)
    if fn is None:
        return [f"unknown tool {name!r}"]
    try:
        value = json.loads(arguments)
    except ValueError as e:
        return [f"arguments are not valid JSON: {e}"]
    return validate_instance(value, fn.get("parameters", {"type": "object"}))


@dataclass(frozen=True)
class ToolChoice:
    mode: str  # "auto" | "none" | "required" | "named"
    name: str | None = None


def validate_tool_choice(tool_choice: Any, tools: Any) -> ToolChoice:
    """Normalize OpenAI `tool_choice` (or legacy `function_call`); unknown names raise.

    Accepts "auto"/"none"/"required", {"type": "function", "function": {"name": N}},
    legacy {"name": N}, and a bare tool name (the CLI's --tool-choice NAME).
    `required` without tools is allowed: llama-index sends it, and there is nothing to force.
    """
    names = tool_names(tools)
    if tool_choice is None:
        return ToolChoice("auto")
    if tool_choice in ("auto", "none", "required"):
        return ToolChoice(tool_choice)
    name = tool_choice
    if isinstance(tool_choice, dict):
        fn = tool_choice.get("function", tool_choice)
        name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str):
        raise ChatlabError(f"tool_choice {tool_choice!r} is not understood; use 'auto', 'none', "
                           "'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}")
    if name not in names:
        raise UnknownNameError("tool_choice", name, ["auto", "none", "required", *names])
    return ToolChoice("named", name)
