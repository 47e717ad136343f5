"""From a request to a Plan: everything decided and checked before any token is generated.

This is where the RTP-LLM lesson lands: the *server* renders (id-level, through the resolved
template), merges the template's stop words and ids with the request's `stop`, and decides
whether tool calls are parsed from free text ("auto") or forced by a grammar ("required", a
named tool, or a JSON response_format). `plan_chat` does all of it once: the request is parsed
into domain types (chatlab.types), rendered once, its sampling values and grammar checked, so a
bad request is refused before it waits in a queue, and `chat` / `chat_stream` only execute.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from chatlab.engine.request import ChatRequest, CompletionRequest
from chatlab.errors import ChatlabError
from chatlab.tools.formats import ToolFormat
from chatlab.types import (Message, ResponseFormat, ToolChoice, ToolSpec, parse_messages,
                           parse_response_format, parse_tool_choice, parse_tools)

DEFAULT_MAX_TOKENS = 1024  # when the client sends none; SmolLM2 could run on for 8k tokens


@dataclass(frozen=True)
class ChatPlan:
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]  # what is rendered and may be called (empty: none)
    choice: ToolChoice
    response_format: ResponseFormat | None
    prompt_ids: tuple[int, ...]
    params: tuple[Any, ...]  # one SamplingParams per choice (n)
    tool_format: ToolFormat | None = None  # parse calls from the output in this format; None = text
    call_format: ToolFormat | None = None  # the template's format, for the grammar (even for JSON)
    constrained: bool = False  # a grammar shapes the output (forced call, lazy call, JSON)
    legacy: bool = False  # answer with function_call / finish_reason "function_call"
    stream: bool = False
    include_usage: bool = False
    user: str | None = None
    rendered: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class CompletionPlan:
    prompts: tuple[tuple[str, tuple[int, ...]], ...]  # (text, ids) per prompt
    params: tuple[tuple[Any, ...], ...]  # per prompt, one SamplingParams per choice (n)
    echo: bool = False
    stream: bool = False
    include_usage: bool = False
    user: str | None = None


def sampling(req: ChatRequest | CompletionRequest, stop: list[str], stop_ids: list[int], prompt_len: int,
             context_length: int, vocab_size: int | None, seed_offset: int = 0) -> Any:
    """The loop's SamplingParams for one choice, checked against the context window."""
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
    params = SamplingParams(
        max_new_tokens=wanted or min(DEFAULT_MAX_TOKENS, room),
        temperature=1.0 if req.temperature is None else req.temperature,
        top_p=1.0 if req.top_p is None else req.top_p, top_k=req.top_k or 0,
        repetition_penalty=req.repetition_penalty or 1.0,
        seed=None if req.seed is None else req.seed + seed_offset,
        stop=[*stop, *(req.stop or [])], stop_ids=[] if req.ignore_eos else list(stop_ids),
        ignore_eos=req.ignore_eos,
        # JSON's keys are strings: validate() checks them and turns them into token ids
        logit_bias=dict(req.logit_bias or {}),  # type: ignore[arg-type]
        logprobs=req.token_logprobs[0], top_logprobs=req.token_logprobs[1])
    params.validate(context_length, prompt_len, vocab_size)
    return params


def _wire(items: list[Any] | None) -> list[Any] | None:
    """Pydantic wire objects (or plain dicts) as plain dicts for chatlab.types to parse."""
    if items is None:
        return None
    return [i.model_dump(exclude_none=True) if hasattr(i, "model_dump") else i for i in items]


def parse_chat(req: ChatRequest) -> tuple[list[Message], list[ToolSpec], ToolChoice, ResponseFormat | None]:
    """The request's chat fields as domain objects: the one place they are validated."""
    messages = parse_messages(_wire(req.messages))
    tools = parse_tools(req.tools, req.functions)
    raw_choice = req.tool_choice if req.tool_choice is not None else req.function_call
    choice = parse_tool_choice(raw_choice, tools)
    if choice.mode == "none" or not tools:  # vLLM's default: no tools in the prompt either
        tools, choice = [], ToolChoice("none")
    fmt = req.response_format
    return messages, tools, choice, parse_response_format(_wire([fmt])[0] if fmt is not None else None)  # type: ignore[index]


def plan_chat(engine: Any, req: ChatRequest) -> ChatPlan:
    messages, tools, choice, response_format = parse_chat(req)
    resolution = engine.resolution
    # a template that ignores tools also drops earlier calls and results from the history
    # (tool_choice "none", or no tools sent): render those with the tool-aware template too
    if tools or any(m.tool_calls or m.role == "tool" for m in messages):
        resolution = resolution.for_tools()
    rendered = resolution.render(messages, tools or None, add_generation_prompt=True)
    fmt = resolution.tool_format if tools else None
    constrained = bool(tools) or response_format is not None
    if constrained:
        from chatlab.tools.constrain import compile_constraint

        # compiled (and cached) now, so a schema the grammar engine cannot take is a 400 here
        compile_constraint(engine.tokenizer, engine.vocab_size, tools=tools, choice=choice,
                           response_format=response_format, fmt=fmt,
                           stop_ids=list(rendered.stop_ids) or None)
    ids = list(rendered.ids)
    params = tuple(sampling(req, list(rendered.stop_words), list(rendered.stop_ids), len(ids),
                            engine.context_length, engine.vocab_size, seed_offset=i)
                   for i in range(req.n))
    return ChatPlan(tuple(messages), tuple(tools), choice, response_format, tuple(ids), params,
                    tool_format=fmt if response_format is None else None, call_format=fmt,
                    constrained=constrained,
                    legacy=req.legacy_functions, stream=req.stream,
                    include_usage=req.include_usage, user=req.user, rendered=rendered)


def plan_completion(engine: Any, req: CompletionRequest) -> CompletionPlan:
    from chatlab.types import check_text

    if req.echo and req.logprobs is not None:
        raise ChatlabError("echo with logprobs would need the prompt tokens' logprobs, which chatlab "
                           "does not compute; send echo or logprobs, not both")
    texts = [req.prompt] if isinstance(req.prompt, str) else list(req.prompt)
    prompts, params = [], []
    for i, text in enumerate(texts):
        where = f"prompt[{i}]" if isinstance(req.prompt, list) else "prompt"
        ids = tuple(engine.tokenizer.encode(check_text(text, where), add_special_tokens=False))
        if not ids:
            raise ChatlabError(f"{where} is empty; send at least one character of text")
        prompts.append((text, ids))
        params.append(tuple(sampling(req, [], [], len(ids), engine.context_length, engine.vocab_size,
                                     seed_offset=k) for k in range(req.n)))
    return CompletionPlan(tuple(prompts), tuple(params), req.echo, req.stream, req.include_usage, req.user)
