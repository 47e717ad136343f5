"""The OpenAI wire shape of the chat domain, as JSON Schema for the OpenAPI document.

chatlab.types.parse is what enforces these shapes (and more: names, sizes, a tool result's call
id); the schemas here only tell a client, through /openapi.json, what the parse rules take. They
are written from OpenAI's API reference, deliberately loose where the parse rules are stricter.
"""
from __future__ import annotations

from chatlab._thirdparty import Jsonable


_TEXT_PARTS: dict[str, Jsonable] = {"type": "array", "items": {
    "type": "object", "required": ["type", "text"],
    "properties": {"type": {"const": "text"}, "text": {"type": "string"}}}}
_FUNCTION_CALL: dict[str, Jsonable] = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string"}, "arguments": {"type": ["string", "object"]}}}
_FUNCTION: dict[str, Jsonable] = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string", "pattern": "^[A-Za-z0-9_.\\-]{1,64}$"},
    "description": {"type": "string"}, "parameters": {"type": "object"}}}

MESSAGES: dict[str, Jsonable] = {"type": "array", "minItems": 1, "items": {
    "type": "object", "required": ["role"], "properties": {
        "role": {"enum": ["system", "developer", "user", "assistant", "tool", "function"]},
        "content": {"anyOf": [{"type": "string"}, _TEXT_PARTS, {"type": "null"}]},
        "name": {"type": "string"},
        "tool_call_id": {"type": "string"},
        "tool_calls": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "string"}, "type": {"const": "function"}, "function": _FUNCTION_CALL}}},
        "function_call": _FUNCTION_CALL,
        "reasoning_content": {"type": "string"}}}}
TOOLS: dict[str, Jsonable] = {"type": "array", "maxItems": 128, "items": {
    "type": "object", "required": ["function"],
    "properties": {"type": {"const": "function"}, "function": _FUNCTION}}}
FUNCTIONS: dict[str, Jsonable] = {"type": "array", "deprecated": True, "items": _FUNCTION}
TOOL_CHOICE: dict[str, Jsonable] = {"anyOf": [
    {"enum": ["auto", "none", "required"]},
    {"type": "object", "required": ["function"], "properties": {
        "type": {"const": "function"},
        "function": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}}]}
FUNCTION_CALL: dict[str, Jsonable] = {"deprecated": True, "anyOf": [
    {"enum": ["auto", "none"]},
    {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}]}
RESPONSE_FORMAT: dict[str, Jsonable] = {"type": "object", "required": ["type"], "properties": {
    "type": {"enum": ["text", "json_object", "json_schema"]},
    "json_schema": {"type": "object", "required": ["schema"], "properties": {
        "name": {"type": "string"}, "schema": {"type": "object"}, "strict": {"type": "boolean"}}}}}
STOP: dict[str, Jsonable] = {"anyOf": [{"type": "string"}, {"type": "array", "maxItems": 16,
                                                        "items": {"type": "string"}}, {"type": "null"}]}
PROMPT: dict[str, Jsonable] = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
