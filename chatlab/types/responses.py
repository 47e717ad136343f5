"""OpenAI's response shapes as chatlab sends them, typed once (`NotRequired`: a key left out, not null)."""
# no `from __future__ import annotations`: 3.11 needs evaluated NotRequired for __required_keys__
from typing import Literal, NotRequired, TypedDict


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class TopLogprobEntry(TypedDict):
    token: str
    logprob: float
    bytes: list[int]


class LogprobEntry(TopLogprobEntry):
    top_logprobs: list[TopLogprobEntry]


class ChatLogprobs(TypedDict):
    content: list[LogprobEntry]
    refusal: None


class TextLogprobs(TypedDict):  # legacy completions: parallel lists, one entry per token
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]  # token text -> logprob, the chosen token included
    text_offset: list[int]


class AssistantFunctionCall(TypedDict):
    name: str
    arguments: str  # the arguments as JSON text, as the model wrote them


class AssistantToolCall(TypedDict):
    id: str | None  # the id its first streamed delta carried (chatlab's always carries one)
    type: Literal["function"]
    function: AssistantFunctionCall


class FunctionCallDelta(TypedDict, total=False):  # the name once, then argument fragments
    name: str
    arguments: str


class ToolCallDelta(TypedDict):
    index: int  # the call's place in the message's tool_calls
    id: NotRequired[str]  # with the name, in the call's first delta only
    type: NotRequired[Literal["function"]]
    function: FunctionCallDelta


class Delta(TypedDict, total=False):  # empty in a choice's last chunk
    role: Literal["assistant"]
    content: str
    tool_calls: list[ToolCallDelta]
    function_call: FunctionCallDelta  # legacy `functions` requests: one call


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: str | None  # None when the reply is only calls
    refusal: None
    tool_calls: NotRequired[list[AssistantToolCall]]
    function_call: NotRequired[AssistantFunctionCall]


class ChatChoice(TypedDict):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None
    finish_reason: str | None  # "stop", "length", "tool_calls" or "function_call"


class ChunkChoice(TypedDict):
    index: int
    delta: Delta
    logprobs: ChatLogprobs | None
    finish_reason: str | None  # set in the choice's last chunk only


class ChatCompletion(TypedDict):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage | None
    system_fingerprint: str | None


class ChatCompletionChunk(TypedDict):
    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    system_fingerprint: NotRequired[str]  # not in the usage chunk
    choices: list[ChunkChoice]  # empty in the usage chunk
    usage: NotRequired[Usage]  # only in the usage chunk


class TextChoice(TypedDict):
    index: int
    text: str
    logprobs: TextLogprobs | None
    finish_reason: str | None


class TextCompletionChunk(TypedDict):
    id: str
    object: Literal["text_completion"]  # OpenAI streams completions under the same name
    created: int
    model: str
    choices: list[TextChoice]  # empty in the usage chunk
    usage: NotRequired[Usage]  # only in the usage chunk


class TextCompletion(TypedDict):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[TextChoice]
    usage: Usage | None


class ErrorDetail(TypedDict):
    message: str
    type: str  # "invalid_request_error", "server_error", ...
    param: str | None  # the request field to blame, as a path (messages[0].role)
    code: str | None


class ErrorBody(TypedDict):
    error: ErrorDetail


Answer = ChatCompletion | TextCompletion  # a non-streamed response
Chunk = ChatCompletionChunk | TextCompletionChunk  # one streamed event's data
