"""A call's arguments checked against its tool's JSON schema.

Tool definitions and tool_choice are parsed (and their schemas checked) once, by
chatlab.types; what is left here is the model's side: are the arguments a call came back
with valid for the tool? Problems are the model's, so they come back as a list of sentences
(empty: valid), never as an exception.
"""
from __future__ import annotations

import json
from typing import Sequence

from chatlab._thirdparty import Jsonable
from chatlab.types import ToolSpec


def validate_instance(instance: Jsonable, schema: Jsonable) -> list[str]:
    """Problems with `instance` against `schema` (empty list: valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(instance)]


def validate_arguments(arguments: str, tools: Sequence[ToolSpec], name: str) -> list[str]:
    """Problems with a call's JSON arguments text against the named tool's parameters."""
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        return [f"unknown tool {name!r}"]
    try:
        value = json.loads(arguments)
    except ValueError as e:
        return [f"arguments are not valid JSON: {e}"]
    return validate_instance(value, tool.schema)
