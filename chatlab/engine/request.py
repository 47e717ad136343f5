"""The request shapes at the edge: OpenAI's chat and completion requests as pydantic models.

Shared by `chatlab complete` and the server, so both accept exactly the same fields. Unknown
fields are ignored (clients send many). This layer checks the *wire*: types, ranges, sizes, and
that every string in the body is encodable. The chat domain (messages, tools, tool_choice,
response_format) is left loose here on purpose: chatlab.types parses it, and its messages
("messages[2] (tool) has no tool_call_id ...") must not be pre-empted by pydantic's.
`top_k`, `repetition_penalty` and `ignore_eos` are extensions, as in vLLM.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from chatlab.errors import ChatlabError
from chatlab.types import check_text

MAX_NAME_CHARS = 256  # `model`, `user`: ids, not text
MAX_STOPS, MAX_STOP_CHARS = 16, 1_000
MAX_CHOICES = 32  # /v1/completions: prompts × n, all generated one after another
MAX_BODY_DEPTH = 64  # the chat domain nests schemas 32 deep; the body wraps them a few levels more
MIN_TEMPERATURE = 1e-5  # below this 1/T overflows into NaN probabilities: treated as 0 (greedy)
INT64 = (-(2**63), 2**63 - 1)


class WireError(ChatlabError):
    """A request the wire layer refuses; `param` names the field, as OpenAI's error body does."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class _Open(BaseModel):
    """Domain objects passed through untouched (extra fields kept) for chatlab.types to judge."""

    model_config = ConfigDict(extra="allow")


class StreamOptions(_Lenient):
    include_usage: bool = False


class ResponseFormat(_Open):
    type: Any = "text"
    json_schema: Any = None


class Message(_Open):
    role: Any = None
    content: Any = None
    name: Any = None
    tool_calls: Any = None
    tool_call_id: Any = None
    function_call: Any = None


def _short_id(value: str | None, field: str) -> str | None:
    if value is not None and len(value) > MAX_NAME_CHARS:
        raise ValueError(f"{field} is {len(value):,} characters, over the limit of "
                         f"{MAX_NAME_CHARS}; send a shorter {field}")
    return value


class SamplingFields(_Lenient):
    model: str | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    top_k: int | None = Field(default=None, ge=0)
    # bounded both ways: logits divided by 1e-310 (or times 1e308) overflow into NaN
    repetition_penalty: float | None = Field(default=None, ge=0.01, le=100.0)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: Any = None
    n: int = Field(default=1, ge=1, le=8)
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    ignore_eos: bool = False  # extension (as in vLLM): benchmarks generate exactly max_tokens
    logit_bias: dict[str, float] | None = None  # token id (as a string key) -> bias in [-100, 100]

    @field_validator("model")
    @classmethod
    def _model(cls, v: str | None) -> str | None:
        return _short_id(v, "model")

    @field_validator("user")
    @classmethod
    def _user(cls, v: str | None) -> str | None:
        return _short_id(v, "user")

    @field_validator("temperature")
    @classmethod
    def _temperature(cls, v: float | None) -> float | None:
        # vLLM's choice too: a temperature this small is greedy in all but rounding
        return 0.0 if v is not None and v < MIN_TEMPERATURE else v

    @field_validator("seed")
    @classmethod
    def _seed(cls, v: int | None) -> int | None:
        """OpenAI takes any int64. The sampler's generator takes only unsigned seeds, so a
        negative seed is read as the same 64 bits unsigned (-1 -> 2**64 - 1), as torch does."""
        if v is None:
            return None
        if not INT64[0] <= v <= INT64[1]:
            raise ValueError(f"seed must be a 64-bit integer ({INT64[0]} to {INT64[1]})")
        return v % 2**64

    @field_validator("stop")
    @classmethod
    def _stops(cls, v: Any) -> list[str] | None:
        if v is None:
            return None
        stops = [v] if isinstance(v, str) else v
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise ValueError("stop takes a non-empty string or a list of non-empty strings")
        if len(stops) > MAX_STOPS or any(len(s) > MAX_STOP_CHARS for s in stops):
            raise ValueError(f"stop takes up to {MAX_STOPS} strings of up to {MAX_STOP_CHARS:,} "
                             "characters each; send fewer or shorter stop strings")
        return stops

    @property
    def max_new_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatRequest(SamplingFields):
    messages: list[Message] = Field(min_length=1)
    tools: Any = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    functions: Any = None
    function_call: Any = None
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
    prompt: Any
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=5)  # legacy: the number of alternatives

    @property
    def token_logprobs(self) -> tuple[bool, int]:
        return self.logprobs is not None, self.logprobs or 0

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, v: Any) -> str | list[str]:
        if isinstance(v, str) and v:
            return v
        if isinstance(v, list) and v and all(isinstance(p, str) and p for p in v):
            return v
        raise ValueError("prompt must be a non-empty string or a non-empty list of non-empty "
                         "strings (token-id prompts are not supported)")

    @property
    def prompts(self) -> list[str]:
        return [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)


# -- the body as a whole --------------------------------------------------------------------
def _path(parts: list[str | int]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p[:64]}" if out else p[:64])
    return out or "the request body"


def check_body(data: Any) -> None:
    """Every string in the body (values and keys, known fields or not) must be encodable, and
    the body no deeper than MAX_BODY_DEPTH. Iterative, so a hostile body cannot recurse us."""
    stack: list[tuple[Any, list[str | int]]] = [(data, [])]
    while stack:
        value, where = stack.pop()
        if len(where) > MAX_BODY_DEPTH:
            raise WireError(f"{_path(where[:8])}... is nested deeper than {MAX_BODY_DEPTH} levels; "
                            "flatten it", _path(where[:1]))
        if isinstance(value, str):
            try:
                check_text(value, _path(where))
            except ChatlabError as err:
                raise WireError(str(err), _path(where)) from None
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str) or not _encodable(key):
                    raise WireError(f"a key in {_path(where)} holds a lone UTF-16 surrogate "
                                    "(e.g. '\\ud800'); send valid Unicode text", _path(where))
                stack.append((item, [*where, key]))
        elif isinstance(value, list):
            stack.extend((item, [*where, i]) for i, item in enumerate(value))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_TYPE_NAMES = {"str", "int", "float", "bool", "list", "dict", "none"}


def param_of(loc: tuple[Any, ...]) -> str | None:
    """A pydantic error location as a field path (`messages[0].role`), without the union-member
    and validator names pydantic puts in between (`stop.list[str].0`)."""
    parts: list[str | int] = [p for p in loc if isinstance(p, int) or (
        isinstance(p, str) and p.isidentifier() and p not in _TYPE_NAMES)]
    return _path(parts) if parts else None


def parse_request(data: Any, cls: type[SamplingFields] = ChatRequest) -> Any:
    """Validate a request body; anything wrong is a WireError naming the field."""
    if not isinstance(data, dict):
        raise WireError(f"the request body must be a JSON object, not {type(data).__name__}")
    check_body(data)
    try:
        req = cls.model_validate(data)
    except ValidationError as err:
        first = err.errors(include_url=False, include_input=False)[0]
        param = param_of(tuple(first["loc"]))
        msg = first["msg"].removeprefix("Value error, ")
        raise WireError(f"{param}: {msg}" if param and not msg.startswith(param) else msg, param) from None
    if isinstance(req, CompletionRequest) and len(req.prompts) * req.n > MAX_CHOICES:
        raise WireError(f"{len(req.prompts)} prompts × n={req.n} is {len(req.prompts) * req.n} "
                        f"completions, over the limit of {MAX_CHOICES}; send fewer prompts or a "
                        "smaller n", "prompt")
    return req
