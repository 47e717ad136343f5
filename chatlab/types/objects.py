"""The chat domain as frozen objects: what every layer below the edge takes. Kinds are
`Literal`s, so a misspelt mode is a type error, not a silent branch."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from chatlab._thirdparty import Jsonable

Role = Literal["system", "user", "assistant", "tool"]
ChoiceMode = Literal["auto", "none", "required", "named"]
FormatKind = Literal["text", "json_object", "json_schema"]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text of an object, exactly as the model (or client) wrote it

    def to_openai(self) -> dict[str, Jsonable]:
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None  # tool results: which call this answers
    name: str | None = None  # tool results: the tool's name
    reasoning: str | None = None  # assistant `reasoning_content` (Qwen3's <think>)

    def to_template(self) -> dict[str, Jsonable]:
        """The dict shape that Jinja chat templates and the built-in renderers read."""
        d: dict[str, Jsonable] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            d["tool_calls"] = [c.to_openai() for c in self.tool_calls]
        if self.reasoning is not None:
            d["reasoning_content"] = self.reasoning
        for key in ("tool_call_id", "name"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        return d


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str = ""
    parameters: dict[str, Jsonable] | None = None  # as sent: templates write "no parameters" their way

    @property
    def schema(self) -> dict[str, Jsonable]:
        """The arguments' JSON schema (an empty object when the tool declares no parameters:
        none sent, or `{}`, which alone would let a grammar write any JSON value)."""
        return self.parameters if self.parameters else {"type": "object", "properties": {}}

    def to_openai(self) -> dict[str, Jsonable]:
        fn: dict[str, Jsonable] = {"name": self.name}
        if self.description:
            fn["description"] = self.description
        if self.parameters is not None:
            fn["parameters"] = self.parameters
        return {"type": "function", "function": fn}


@dataclass(frozen=True)
class ToolChoice:
    mode: ChoiceMode = "auto"
    name: str | None = None  # with mode "named"


@dataclass(frozen=True)
class ResponseFormat:
    kind: FormatKind
    schema: dict[str, Jsonable] | None = None  # json_schema: the schema; json_object: None
    name: str | None = None

