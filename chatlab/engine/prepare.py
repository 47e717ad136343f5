"""From an OpenAI request to what the loop needs: prompt ids, sampling params, a tool plan.

This is where the RTP-LLM lesson lands: the *server* renders (id-level, through the resolved
template), merges the template's stop words and ids with the request's `stop`, and decides
whether tool calls are parsed from free text ("auto") or forced by a grammar ("required", a
named tool, or a JSON response_format).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chatlab.engine.request import ChatRequest, Message, SamplingFields
from chatlab.errors import ChatlabError

DEFAULT_MAX_TOKENS = 1024  # when the client sends none; SmolLM2 could run on for 8k tokens


@dataclass
class Plan:
    prompt_ids: list[int]
    stop: list[str]
    stop_ids: list[int]
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_format: str | None = None  # parse calls from the output in this format, None = don't
    tool_choice: Any = None  # as the request sent it (validated), for the grammar
    constrained: bool = False  # a grammar may shape the output (forced call, lazy call, JSON)
    response_format: dict[str, Any] | None = None
    legacy: bool = False  # answer with function_call / finish_reason "function_call"
    rendered: Any = None


def plain_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Pydantic messages to template dicts; text parts joined, other parts refused clearly."""
    out = []
    for i, m in enumerate(messages):
        d = m.model_dump(exclude_none=True)
        if d["role"] == "developer":  # OpenAI's newer name for the system role
            d["role"] = "system"
        if isinstance(m.content, list):
            texts = []
            for part in m.content:
                if part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise ChatlabError(
                        f"messages[{i}].content has a {part.get('type')!r} part; this model "
                        "takes text only: send string content or parts of type 'text'")
                texts.append(part["text"])
            d["content"] = "".join(texts)
        out.append(d)
    return out


def tool_plan(req: ChatRequest) -> tuple[list[dict], Any]:
    """(tools to render, tool_choice) from tools/functions and their choices, validated."""
    from chatlab.render import normalize_tools
    from chatlab.tools.schema import validate_tool_choice

    tools = normalize_tools(tools=req.tools, functions=req.functions) if (req.tools or req.functions) else []
    raw_choice = req.tool_choice if req.tool_choice is not None else req.function_call
    if validate_tool_choice(raw_choice, tools).mode == "none" or not tools:
        return [], "none"
    return tools, raw_choice


def sampling(req: SamplingFields, stop: list[str], stop_ids: list[int], prompt_len: int,
             context_length: int, seed_offset: int = 0) -> Any:
    from chatlab.generate import SamplingParams

    room = context_length - prompt_len
    if room < 1:
        raise ChatlabError(f"the prompt has {prompt_len} tokens, which fills the context window "
                           f"of {context_length}; send fewer or shorter messages")
    wanted = req.max_new_tokens
    if wanted is not None and wanted > room:
        name = "max_completion_tokens" if req.max_completion_tokens else "max_tokens"
        raise ChatlabError(f"{name}={wanted} plus the prompt's {prompt_len} tokens exceeds the "
                           f"context window of {context_length}; use {name} <= {room}")
    seed = None if req.seed is None else req.seed + seed_offset
    return SamplingParams(
        max_new_tokens=wanted or min(DEFAULT_MAX_TOKENS, room),
        temperature=1.0 if req.temperature is None else req.temperature,
        top_p=1.0 if req.top_p is None else req.top_p, top_k=req.top_k or 0,
        repetition_penalty=req.repetition_penalty or 1.0, seed=seed,
        stop=[*stop, *(req.stop or [])], stop_ids=[] if req.ignore_eos else list(stop_ids),
        ignore_eos=req.ignore_eos)


def plan_chat(resolution: Any, req: ChatRequest) -> Plan:
    messages = plain_messages(req.messages)
    tools, choice = tool_plan(req)
    # a template that ignores tools also drops earlier calls and results from the history
    # (tool_choice "none", or no tools sent): render those with the tool-aware template too
    if tools or any(m.get("tool_calls") or m.get("function_call") or m["role"] in ("tool", "function")
                    for m in messages):
        resolution = resolution.for_tools()
    fmt = req.response_format.model_dump(exclude_none=True) if req.response_format else None
    if fmt and fmt.get("type") == "text":
        fmt = None
    if fmt and fmt["type"] == "json_schema" and not (fmt.get("json_schema") or {}).get("schema"):
        raise ChatlabError("response_format json_schema needs json_schema.schema (a JSON schema)")
    rendered = resolution.render(messages, tools=tools or None, add_generation_prompt=True)
    return Plan(prompt_ids=list(rendered.ids), stop=list(rendered.stop_words),
                stop_ids=list(rendered.stop_ids), tools=tools,
                tool_format=resolution.tool_format if tools else None,
                tool_choice=choice, constrained=bool(tools) or fmt is not None,
                response_format=fmt, legacy=req.legacy_functions, rendered=rendered)
