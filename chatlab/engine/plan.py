"""From a request to a Plan: rendered, stops merged, tool calls parsed or forced by a grammar,
all decided and checked once, so a bad request is refused before it waits in a queue."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from chatlab._thirdparty import HFTokenizer, Processor
from chatlab.engine.bound import ContextWindow, fits_before_tokenizing
from chatlab.engine.request import ChatRequest, CompletionRequest
from chatlab.errors import ChatlabError, ContextLengthError
from chatlab.generate import SamplingParams
from chatlab.models.memory import trim_heap
from chatlab.tools import TOOL_FORMATS, ToolFormat, constrain
from chatlab.tools.constrain import Constraint
from chatlab.render import Rendered, Resolution
from chatlab.types import Message, ResponseFormat, ToolChoice, ToolSpec


class Planner(ContextWindow, Protocol):
    resolution: Resolution
    tokenizer: HFTokenizer
    vocab_size: int


@dataclass(frozen=True)
class ChatPlan:
    """Everything a run needs, decided once: executors adapt it and never re-derive it."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]  # what is rendered and may be called (empty: none)
    choice: ToolChoice
    response_format: ResponseFormat | None
    prompt_ids: tuple[int, ...]
    params: tuple[SamplingParams, ...]  # one per choice (n), validated against the model
    tool_format: ToolFormat | None = None  # parse calls from the output in this format; None = text
    constraint: Constraint | None = None  # what is forced and its compiled grammar (None: nothing)
    legacy: bool = False  # answer with function_call / finish_reason "function_call"
    stream: bool = False
    include_usage: bool = False
    user: str | None = None
    rendered: Rendered | None = field(default=None, repr=False, compare=False)
    # `constraint` in a token source's own kind (genai's structured-output config), set at check
    adapted: Processor = field(default=None, repr=False, compare=False)

    @property
    def constrained(self) -> bool:
        """A grammar shapes the output (forced call, lazy call, JSON)."""
        return self.constraint is not None


@dataclass(frozen=True)
class CompletionPlan:
    prompts: tuple[tuple[str, tuple[int, ...]], ...]  # (text, ids) per prompt
    params: tuple[tuple[SamplingParams, ...], ...]  # per prompt, one per choice (n)
    echo: bool = False
    stream: bool = False
    include_usage: bool = False
    user: str | None = None


def overflow(prompt_len: int, context_length: int, where: str) -> ContextLengthError:
    """The error for a tokenized prompt that fills the window, the heap trimmed first."""
    trim_heap()
    return ContextLengthError(f"the prompt has {prompt_len} tokens, which fills the context window "
                              f"of {context_length}; send fewer or shorter messages", param=where)


def plan_chat(engine: Planner, req: ChatRequest) -> ChatPlan:
    # what every template renders verbatim (an assistant's content may lose its <think> part)
    fits_before_tokenizing(engine, [m.content for m in req.messages if m.role != "assistant"], "messages")
    resolution, rendered = engine.resolution.render_request(req.messages, req.tools)
    if (prompt_len := len(rendered.ids)) >= engine.context_length:
        del rendered  # its ids and slot offsets: the heap is trimmed without them
        raise overflow(prompt_len, engine.context_length, "messages")
    fmt = resolution.tool_format if req.tools else None
    if req.tools and fmt is None and req.tool_choice.mode != "none":
        refuse_unparsed_calls(resolution, req.tool_choice)
    constraint = None
    if req.tools or req.response_format is not None:
        # compiled now, so a schema the grammar engine cannot take is a 400 here, and kept
        constraint = constrain.compile_constraint(engine.tokenizer, engine.vocab_size, tools=req.tools,
                                                  choice=req.tool_choice, response_format=req.response_format,
                                                  fmt=fmt, stop_ids=list(rendered.stop_ids) or None)
    ids = tuple(rendered.ids)
    params = tuple(req.to_sampling_params(list(rendered.stop_words), list(rendered.stop_ids), len(ids),
                                          engine.context_length, engine.vocab_size, seed_offset=i)
                   for i in range(req.n))
    return ChatPlan(req.messages, req.tools, req.tool_choice, req.response_format, ids, params,
                    tool_format=fmt if req.response_format is None else None,
                    constraint=constraint, legacy=req.legacy, stream=req.stream,
                    include_usage=req.include_usage, user=req.user, rendered=rendered)


def refuse_unparsed_calls(resolution: Resolution, choice: ToolChoice) -> None:
    """Tools in a call format chatlab cannot parse: any tool_choice but "none" is refused."""
    said = "named" if choice.mode == "named" else repr(choice.mode)
    raise ChatlabError(f"{resolution.label} writes tools in its own format, which is none of the tool-call "
                       f"formats chatlab parses ({', '.join(TOOL_FORMATS)}), so tool_choice {said} cannot be "
                       "served: a call would come back as plain text, and a forced one cannot be enforced. "
                       "Send tool_choice \"none\" (or no tools) for a text reply, or serve a template whose "
                       "calls chatlab parses", param="tool_choice")


def plan_completion(engine: Planner, req: CompletionRequest) -> CompletionPlan:
    prompts, params = [], []
    for i, text in enumerate(req.prompts):
        where = f"prompt[{i}]" if not isinstance(req.prompt, str) else "prompt"
        fits_before_tokenizing(engine, [text], where)
        ids = tuple(engine.tokenizer.encode(text, add_special_tokens=False))
        if not ids:
            raise ChatlabError(f"{where} is empty; send at least one character of text", param=where)
        if (prompt_len := len(ids)) >= engine.context_length:
            del ids
            raise overflow(prompt_len, engine.context_length, where)
        prompts.append((text, ids))
        params.append(tuple(req.to_sampling_params([], [], len(ids), engine.context_length, engine.vocab_size,
                                                   seed_offset=k) for k in range(req.n)))
    return CompletionPlan(tuple(prompts), tuple(params), req.echo, req.stream, req.include_usage, req.user)
