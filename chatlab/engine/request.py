"""The request at the edge, parsed once: OpenAI's chat and completion bodies as frozen objects,
shared by `chatlab complete`, the server and notebooks.

Unknown fields are ignored (clients send many). Parsing is *strict*, as OpenAI's is: "0.5" is not
a number, `true` is not an integer. The sampling ranges come from chatlab.generate.limits, which
SamplingParams reads too. The chat domain is parsed by chatlab.types inside this model's
validation, so a ChatRequest holds chatlab.types objects; its OpenAPI schema is the wire shape
(chatlab.types.wire). Every refusal is a ChatlabError whose `param` names the field.
`top_k`, `repetition_penalty` and `ignore_eos` are extensions, as in vLLM.
"""
from __future__ import annotations

from typing import Annotated, ClassVar, TypeVar, overload

from pydantic import (BaseModel, ConfigDict, Field, SkipValidation, ValidationError,
                      ValidationInfo, WithJsonSchema, field_validator, model_validator)
from pydantic.json_schema import SkipJsonSchema

from chatlab._thirdparty import Jsonable, PydanticField
from chatlab.engine.wire import check_body, param_of
from chatlab.errors import ChatlabError
from chatlab.generate import limits
from chatlab.types import (Message, ResponseFormat, ToolChoice, ToolSpec, parse_messages,
                           parse_response_format, parse_tool_choice, parse_tools, wire)
from chatlab.types.wire import MAX_STOP_CHARS, MAX_STOPS

MAX_NAME_CHARS = 256  # `model`, `user`: ids, not text
MAX_CHOICES = 32  # /v1/completions: prompts × n, all generated one after another
INT64 = (-(2**63), 2**63 - 1)


class _Strict(BaseModel):
    # validators built on first use: `chatlab --help` loads these models but never validates
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, strict=True, frozen=True, defer_build=True)


class StreamOptions(_Strict):
    include_usage: bool = False


def _ranged(rng: limits.Range) -> PydanticField:
    """An optional field bounded by one of the shared limits (the OpenAPI schema shows them)."""
    return Field(default=None, **rng.field())


class SamplingFields(_Strict):
    # fields OpenAI's spec marks nullable but chatlab gives a plain default: null means the default
    nullable: ClassVar[tuple[str, ...]] = ("n", "stream")

    model: str | None = None
    temperature: float | None = _ranged(limits.TEMPERATURE)
    top_p: float | None = _ranged(limits.TOP_P)
    top_k: int | None = _ranged(limits.TOP_K)
    repetition_penalty: float | None = _ranged(limits.REPETITION_PENALTY)
    presence_penalty: float | None = _ranged(limits.PRESENCE_PENALTY)
    frequency_penalty: float | None = _ranged(limits.FREQUENCY_PENALTY)
    max_tokens: int | None = _ranged(limits.MAX_NEW_TOKENS)
    max_completion_tokens: int | None = _ranged(limits.MAX_NEW_TOKENS)
    stop: Annotated[tuple[str, ...] | None, WithJsonSchema(wire.STOP_SCHEMA)] = None
    n: int = Field(default=1, ge=1, le=8)
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    ignore_eos: bool = False  # extension (as in vLLM): benchmarks generate exactly max_tokens
    logit_bias: dict[str, float] | None = None  # token id (as a string key) -> bias in [-100, 100]

    @model_validator(mode="before")
    @classmethod
    def _nulls(cls, data: Jsonable) -> Jsonable:
        if isinstance(data, dict) and any(data.get(k, 0) is None for k in cls.nullable):
            data = {k: v for k, v in data.items() if not (v is None and k in cls.nullable)}
        return data

    @field_validator("model", "user")
    @classmethod
    def _short_id(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is not None and len(v) > MAX_NAME_CHARS:
            raise ValueError(f"{info.field_name} is {len(v):,} characters, over the limit of "
                             f"{MAX_NAME_CHARS}; send a shorter {info.field_name}")
        return v

    @field_validator("temperature")
    @classmethod
    def _temperature(cls, v: float | None) -> float | None:
        # vLLM's choice too: a temperature this small is greedy in all but rounding
        return 0.0 if v is not None and v < limits.MIN_TEMPERATURE else v

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

    @field_validator("stop", mode="before")  # before: the raw value, then the tuple is checked
    @classmethod
    def _stops(cls, v: Jsonable) -> tuple[str, ...] | None:
        if v is None:
            return None
        stops = [v] if isinstance(v, str) else v
        if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
            raise ValueError("stop takes a non-empty string or a list of non-empty strings")
        if len(stops) > MAX_STOPS or any(len(s) > MAX_STOP_CHARS for s in stops):
            raise ValueError(f"stop takes up to {MAX_STOPS} strings of up to {MAX_STOP_CHARS:,} "
                             "characters each; send fewer or shorter stop strings")
        return tuple(stops)

    @property
    def token_logprobs(self) -> tuple[bool, int]:
        """(report logprobs, how many alternatives): each request kind spells these its way."""
        return False, 0

    @property
    def max_new_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatRequest(SamplingFields):
    nullable = ("n", "stream", "logprobs")

    # chatlab.types objects (parsed by `_parse_chat`), documented as the wire shape they come from
    messages: Annotated[tuple[Message, ...], SkipValidation, WithJsonSchema(wire.MESSAGES_SCHEMA)]
    tools: Annotated[tuple[ToolSpec, ...], SkipValidation, WithJsonSchema(wire.TOOLS_SCHEMA)] = ()
    tool_choice: Annotated[ToolChoice, SkipValidation,
                           WithJsonSchema(wire.TOOL_CHOICE_SCHEMA)] = ToolChoice("auto")
    response_format: Annotated[ResponseFormat | None, SkipValidation,
                               WithJsonSchema(wire.RESPONSE_FORMAT_SCHEMA)] = None
    # the legacy shapes, folded into tools / tool_choice while parsing (then always None)
    functions: Annotated[None, SkipValidation, WithJsonSchema(wire.FUNCTIONS_SCHEMA)] = None
    function_call: Annotated[None, SkipValidation, WithJsonSchema(wire.FUNCTION_CALL_SCHEMA)] = None
    parallel_tool_calls: bool | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    # set by parsing, never read from the body: answer in the old `functions` shape
    legacy: SkipJsonSchema[Annotated[bool, SkipValidation]] = Field(default=False, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _parse_chat(cls, data: Jsonable) -> Jsonable:
        """The chat fields through chatlab.types, once. tool_choice needs the tools, so this is
        one validator over the body rather than one per field."""
        if not isinstance(data, dict):
            return data  # pydantic then says "should be a valid dictionary"
        data = dict(data)  # parse_* pass chatlab.types objects through: a caller may send those
        data["messages"] = tuple(parse_messages(data.get("messages")))
        tools = parse_tools(data.get("tools"), data.get("functions"))
        raw_choice = data.get("tool_choice")
        choice = parse_tool_choice(raw_choice if raw_choice is not None else data.get("function_call"),
                                   tools)
        legacy = bool(data.get("functions")) and not data.get("tools")
        if choice.mode == "none" or not tools:  # vLLM's default: no tools in the prompt either
            tools, choice = [], ToolChoice("none")
        data.update(tools=tuple(tools), tool_choice=choice, functions=None, function_call=None,
                    response_format=parse_response_format(data.get("response_format")), legacy=legacy)
        return data

    @property
    def token_logprobs(self) -> tuple[bool, int]:
        return self.logprobs, self.top_logprobs or 0


class CompletionRequest(SamplingFields):
    nullable = ("n", "stream", "echo")

    prompt: Annotated[str | tuple[str, ...], WithJsonSchema(wire.PROMPT_SCHEMA)]
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=5)  # legacy: the number of alternatives
    # OpenAI fields chatlab does not implement: refused unless they ask for nothing
    suffix: str | None = None
    best_of: int | None = None

    @property
    def token_logprobs(self) -> tuple[bool, int]:
        return self.logprobs is not None, self.logprobs or 0

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt(cls, v: Jsonable) -> str | tuple[str, ...]:
        if isinstance(v, str) and v:
            return v
        if isinstance(v, list) and v and all(isinstance(p, str) and p for p in v):
            return tuple(v)
        raise ValueError("prompt must be a non-empty string or a non-empty list of non-empty "
                         "strings (token-id prompts are not supported)")

    @field_validator("suffix")
    @classmethod
    def _suffix(cls, v: str | None) -> str | None:
        if v:  # insertion (fill-in-the-middle) needs a model and template trained for it
            raise ValueError("suffix (text insertion) is not supported by chatlab; drop suffix "
                             "and send the text before the gap as the prompt")
        return None

    @field_validator("best_of")
    @classmethod
    def _best_of(cls, v: int | None) -> int | None:
        if v not in (None, 1):
            raise ValueError(f"best_of={v} is not supported by chatlab (it would generate {v} "
                             "completions and keep the most likely); drop best_of, or send n "
                             "and pick among the choices yourself")
        return v

    @model_validator(mode="after")
    def _pairs(self) -> "CompletionRequest":
        if self.echo and self.logprobs is not None:
            raise ChatlabError("echo with logprobs would need the prompt tokens' logprobs, which "
                               "chatlab does not compute; send echo or logprobs, not both",
                               param="logprobs")
        return self

    @property
    def prompts(self) -> list[str]:
        return [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)


_R = TypeVar("_R", bound=SamplingFields)


@overload
def parse_request(data: Jsonable) -> ChatRequest: ...
@overload
def parse_request(data: Jsonable, cls: type[_R]) -> _R: ...
def parse_request(data: Jsonable, cls: type[SamplingFields] = ChatRequest) -> SamplingFields:
    """Validate a request body; anything wrong is a ChatlabError whose `param` names the field."""
    if not isinstance(data, dict):
        raise ChatlabError(f"the request body must be a JSON object, not {type(data).__name__}")
    check_body(data)
    try:
        req = cls.model_validate(data)
    except ValidationError as err:
        first = err.errors(include_url=False, include_input=False)[0]
        param = param_of(tuple(first["loc"]))
        msg = first["msg"].removeprefix("Value error, ")
        raise ChatlabError(f"{param}: {msg}" if param and not msg.startswith(param) else msg, param) from None
    if isinstance(req, CompletionRequest) and len(req.prompts) * req.n > MAX_CHOICES:
        raise ChatlabError(f"{len(req.prompts)} prompts × n={req.n} is {len(req.prompts) * req.n} "
                        f"completions, over the limit of {MAX_CHOICES}; send fewer prompts or a "
                        "smaller n", "prompt")
    return req
