"""OpenAI's chat and completion bodies as frozen pydantic models that validate, document (/openapi.json)
and make the loop's SamplingParams; `top_k`, `repetition_penalty`, `ignore_eos` extend it as vLLM does."""
from __future__ import annotations

from typing import Annotated, ClassVar, TypeVar, overload

from pydantic import Field, PrivateAttr, ValidationError, ValidationInfo, field_validator, model_validator

from chatlab._thirdparty import Jsonable, PydanticField
from chatlab.errors import ChatlabError, ContextLengthError
from chatlab.generate import SamplingParams, limits
from chatlab.generate.sampling import check_logit_bias
from chatlab.types import (MAX_STOP_CHARS, MAX_STOPS, FromWire, Functions, Message, Messages, Prompt,
                           ResponseFormat, Stop, ToolChoice, Tools, ToolSpec, Wire, WireFunctionChoice,
                           WireResponseFormat, WireToolChoice, check_text, choice_of, field_path,
                           format_of, merge_tools, messages_of, named_choice, Refusal, refusal, tools_of)

MAX_NAME_CHARS = 256  # `model`, `user`: ids, not text
MAX_CHOICES = 32  # /v1/completions: prompts × n, all generated one after another
MAX_BODY_DEPTH = 64  # the chat domain nests schemas 32 deep; the body wraps them a few levels more
DEFAULT_MAX_TOKENS = 1024  # when the client sends none; SmolLM2 could run on for 8k tokens
INT64 = (-(2**63), 2**63 - 1)


def _bias(bias: dict[str, float] | None) -> dict[int, float] | None:
    """logit_bias with int keys, refused in field order (SamplingParams' one check)."""
    try:
        return None if bias is None else check_logit_bias(bias)
    except ChatlabError as err:
        raise Refusal(str(err), whole=True, param=err.param) from None


class StreamOptions(Wire):
    include_usage: bool = False


def _ranged(rng: limits.Range) -> PydanticField:
    """An optional field bounded by one of the shared limits (the OpenAPI schema shows them)."""
    return Field(default=None, **rng.field())


class SamplingFields(Wire):
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
    stop: Annotated[tuple[str, ...] | None, FromWire(Stop, lambda v: None if v is None else tuple(v))] = None
    n: int = Field(default=1, ge=1, le=8)
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    user: str | None = None
    ignore_eos: bool = False  # extension (as in vLLM): benchmarks generate exactly max_tokens
    # token id (a string key, as JSON has) -> bias in [-100, 100]; held with int keys
    logit_bias: Annotated[dict[int, float] | None, FromWire(dict[str, float] | None, _bias)] = None

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
        """Any int64, read as the same 64 bits unsigned (-1 -> 2**64 - 1), as torch does."""
        if v is None:
            return None
        if not INT64[0] <= v <= INT64[1]:
            raise ValueError(f"seed must be a 64-bit integer ({INT64[0]} to {INT64[1]})")
        return v % 2**64

    @field_validator("stop", mode="before")  # the raw value; the wire shape then checks the list
    @classmethod
    def _stops(cls, v: Jsonable) -> list[str] | None:
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
    def token_logprobs(self) -> tuple[bool, int]:
        """(report logprobs, how many alternatives): each request kind spells these its way."""
        return False, 0

    @property
    def max_new_tokens(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)

    def to_sampling_params(self, stop: list[str], stop_ids: list[int], prompt_len: int, context_length: int,
                           vocab_size: int | None, seed_offset: int = 0) -> SamplingParams:
        """The loop's SamplingParams for one choice, within the room the prompt leaves."""
        room = context_length - prompt_len
        wanted = self.max_new_tokens
        if wanted is not None and wanted > room:
            name = "max_completion_tokens" if self.max_completion_tokens else "max_tokens"
            raise ContextLengthError(f"{name}={wanted} plus the prompt's {prompt_len} tokens exceeds the "
                                     f"context window of {context_length}; use {name} <= {room}", param=name)
        logprobs, top_logprobs = self.token_logprobs
        params = SamplingParams(
            max_new_tokens=wanted or min(DEFAULT_MAX_TOKENS, room),
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p, top_k=self.top_k or 0,
            repetition_penalty=self.repetition_penalty or 1.0,
            presence_penalty=self.presence_penalty or 0.0, frequency_penalty=self.frequency_penalty or 0.0,
            seed=None if self.seed is None else self.seed + seed_offset,
            stop=[*stop, *(self.stop or ())], stop_ids=[] if self.ignore_eos else list(stop_ids),
            ignore_eos=self.ignore_eos, logit_bias=dict(self.logit_bias or {}),
            logprobs=logprobs, top_logprobs=top_logprobs, trusted=True)
        return params.validated(context_length, prompt_len, vocab_size)


class ChatFields(Wire):
    """The chat fields, held as domain objects (first in a ChatRequest: their refusals first)."""

    messages: Annotated[tuple[Message, ...], FromWire(Messages, messages_of)]
    tools: Annotated[tuple[ToolSpec, ...], FromWire(Tools, tools_of)] = ()
    tool_choice: Annotated[ToolChoice, FromWire(WireToolChoice, choice_of)] = None  # type: ignore[assignment]
    response_format: Annotated[ResponseFormat | None, FromWire(WireResponseFormat | None, format_of)] = None
    # the legacy shapes, folded into tools / tool_choice once validated
    functions: Annotated[tuple[ToolSpec, ...], FromWire(Functions, tools_of, deprecated=True)] = ()
    function_call: Annotated[ToolChoice | None, FromWire(WireToolChoice, choice_of, WireFunctionChoice,
                                                         deprecated=True)] = None
    _legacy: bool = PrivateAttr(False)  # answer in the old `functions` shape

    @model_validator(mode="after")
    def _tools_and_choice(self) -> "ChatFields":
        """tool_choice names one of the tools; "none" or no tools render none (vLLM's default)."""
        tools = merge_tools(self.tools, self.functions, "tools" if self.tools or not self.functions else "functions")
        choice = named_choice(self.tool_choice or self.function_call, tools)
        self._legacy = bool(self.functions) and not self.tools
        if choice.mode == "none" or not tools:
            tools, choice = [], ToolChoice("none")
        for name, value in (("tools", tuple(tools)), ("tool_choice", choice), ("functions", ()),
                            ("function_call", None)):
            object.__setattr__(self, name, value)  # frozen to callers; settled here, once
        return self

    @property
    def legacy(self) -> bool:
        return self._legacy


class ChatRequest(SamplingFields, ChatFields):
    nullable = ("n", "stream", "logprobs")

    parallel_tool_calls: bool | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=20)

    @model_validator(mode="after")
    def _alternatives(self) -> "ChatRequest":
        if self.top_logprobs and not self.logprobs:
            raise ChatlabError(f"top_logprobs={self.top_logprobs} needs logprobs=true; set logprobs "
                               "to true or drop top_logprobs", param="top_logprobs")
        return self

    @property
    def token_logprobs(self) -> tuple[bool, int]:
        return self.logprobs, self.top_logprobs or 0


class CompletionRequest(SamplingFields):
    nullable = ("n", "stream", "echo")

    prompt: Annotated[str | tuple[str, ...], FromWire(Prompt, lambda v: v if isinstance(v, str) else tuple(v))]
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
    def _prompt(cls, v: Jsonable) -> str | list[str]:
        if isinstance(v, str) and v or isinstance(v, list) and v and all(isinstance(p, str) and p for p in v):
            return v
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


def check_body(data: Jsonable) -> None:
    """Every string of the body (keys too) encodable, no deeper than MAX_BODY_DEPTH."""
    stack: list[tuple[Jsonable, list[str | int]]] = [(data, [])]
    while stack:
        value, where = stack.pop()
        if len(where) > MAX_BODY_DEPTH:
            raise ChatlabError(f"{field_path(where[:8])}... is nested deeper than {MAX_BODY_DEPTH} "
                               "levels; flatten it", param=field_path(where[:1]))
        if isinstance(value, str):
            check_text(value, field_path(where))  # its error names the path as its param
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str) or key != key.encode("utf-8", "replace").decode():
                    raise ChatlabError(f"a key in {field_path(where)} holds a lone UTF-16 surrogate "
                                       "(e.g. '\\ud800'); send valid Unicode text", param=field_path(where))
                stack.append((item, [*where, key]))
        elif isinstance(value, list):
            stack.extend((item, [*where, i]) for i, item in enumerate(value))


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
        raise refusal(err) from None
    if isinstance(req, CompletionRequest) and len(req.prompts) * req.n > MAX_CHOICES:
        raise ChatlabError(f"{len(req.prompts)} prompts × n={req.n} is {len(req.prompts) * req.n} "
                           f"completions, over the limit of {MAX_CHOICES}; send fewer prompts or a "
                           "smaller n", "prompt")
    return req
