"""Check and normalize OpenAI-style messages before any template sees them.

After `normalize_messages` every message has a known role (legacy `function` messages become
`tool` messages), string content (text parts joined; None becomes ""), and assistant calls in
the modern `tool_calls` shape (a legacy `function_call` becomes one tool call). Renderers and
Jinja templates then handle a single shape.
"""
from __future__ import annotations

import json
from typing import Any

from chatlab.errors import ChatlabError

ROLES = ["system", "user", "assistant", "tool", "function"]


def _content(i: int, msg: dict) -> str:
    content = msg.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                raise ChatlabError(f"messages[{i}].content has a part that is not text ({part!r:.60}); "
                                   'only [{"type": "text", "text": "..."}] parts are supported')
        return "".join(texts)
    raise ChatlabError(f"messages[{i}].content must be a string, a list of text parts or null, "
                       f"not {type(content).__name__}")


def _arguments(i: int, args: Any) -> str:
    if args is None:
        return "{}"
    if isinstance(args, str):
        return args
    if isinstance(args, dict):
        return json.dumps(args, ensure_ascii=False)
    raise ChatlabError(f"messages[{i}]: tool call arguments must be a JSON string or an object")


def _tool_calls(i: int, msg: dict) -> list[dict]:
    calls = msg.get("tool_calls")
    if calls is None and isinstance(msg.get("function_call"), dict):
        calls = [{"id": f"call_{i}", "type": "function", "function": msg["function_call"]}]
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise ChatlabError(f"messages[{i}].tool_calls must be a list of "
                           '{"id", "type": "function", "function": {"name", "arguments"}}')
    out = []
    for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ChatlabError(f"messages[{i}].tool_calls[{j}] has no function name; expected "
                               '{"type": "function", "function": {"name": ..., "arguments": "{...}"}}')
        out.append({"id": call.get("id") or f"call_{i}_{j}", "type": "function",
                    "function": {"name": fn["name"], "arguments": _arguments(i, fn.get("arguments"))}})
    return out


def normalize_messages(messages: Any) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise ChatlabError("messages must be a non-empty list of {\"role\": ..., \"content\": ...} objects")
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict):
            raise ChatlabError(f"messages[{i}] must be an object with role and content, "
                               f"not {type(msg).__name__}")
        role = msg.get("role")
        if role not in ROLES:
            raise ChatlabError(f"messages[{i}] has unknown role {role!r}; valid roles: {', '.join(ROLES)}")
        new: dict[str, Any] = {"role": "tool" if role == "function" else role,
                               "content": _content(i, msg)}
        if role == "assistant":
            calls = _tool_calls(i, msg)
            if calls:
                new["tool_calls"] = calls
            if isinstance(msg.get("reasoning_content"), str):
                new["reasoning_content"] = msg["reasoning_content"]
        if new["role"] == "tool":
            for key in ("tool_call_id", "name"):
                if isinstance(msg.get(key), str):
                    new[key] = msg[key]
        out.append(new)
    return out


def arguments_object(args: str) -> dict:
    """Arguments JSON text as a dict (for formats that spell calls out, like ChatGLM3's)."""
    try:
        value = json.loads(args) if args.strip() else {}
    except ValueError:
        raise ChatlabError(f"tool call arguments are not valid JSON: {args[:80]!r}; "
                           "send arguments as a JSON object string") from None
    if not isinstance(value, dict):
        raise ChatlabError("tool call arguments must be a JSON object")
    return value
