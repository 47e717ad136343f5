"""The request shapes at the edge: OpenAI's chat and completion requests as pydantic models.

Shared by `chatlab complete` and the server, so both accept exactly the same fields. Unknown
fields are ignored (clients send many); values are range-checked here, with messages that say
what to change. `top_k` and `repetition_penalty` are extensions, as in vLLM.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StreamOptions(_Lenient):
    include_usage: bool = False


class ResponseFormat(_Lenient):
    type: Literal["text", "json_object", "json_schema"] = "text"
    json_schema: dict[str, Any] | None = None


class Message(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    function_call: dict[str, Any] | None = None


class SamplingFields(_Lenient):
    model: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=0)
    repetition_penalty: float | None = Field(default=None, gt=0.0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    n: int = Field(default=1, ge=1, le=8)
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    ignore_eos: bool = False  # extension (as in vLLM): benchmarks generate exactly max_tokens
    logit_bias: dict[str, float] | None = None  # token id (as a string key) -> bias in [-100, 100]

    @field_validator("stop")
    @classmethod
    def _stops(cls, v: str | list[str] | None) -> list[str] | None:
        if v is None:
            return None
        stops = [v] if isinstance(v, str) else v
        if len(stops) > 16 or any(not s for s in stops):
            raise ValueError("stop takes up to 16 non-empty strings")
        return stops

    @property
    def max_new_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatRequest(SamplingFields):
    messages: list[Message] = Field(min_length=1)
    tools: list[Any] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    functions: list[Any] | None = None
    function_call: str | dict[str, Any] | None = None
    response_format: ResponseFormat | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)

    @property
    def token_logprobs(self) -> tuple[bool, int]:
        return self.logprobs, self.top_logprobs or 0

    @property
    def legacy_functions(self) -> bool:
        """A request in the old `functions` shape is answered in the old shape too."""
        return bool(self.functions) and not self.tools


class CompletionRequest(SamplingFields):
    prompt: str | list[str] = Field(min_length=1)
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=5)  # legacy: the number of alternatives

    @property
    def token_logprobs(self) -> tuple[bool, int]:
        return self.logprobs is not None, self.logprobs or 0


def parse_request(data: Any, cls: type[SamplingFields] = ChatRequest) -> Any:
    """Validate a request dict; a ValidationError becomes a ChatlabError naming the field."""
    from pydantic import ValidationError

    from chatlab.errors import ChatlabError

    try:
        return cls.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "request"
        raise ChatlabError(f"{where}: {first['msg']}") from None
