"""A tool-call format: from one set of strings, the prompt text (`Bit`s, `Turn`s), its Jinja, a
streaming parser and the xgrammar tag of a call, so all of them agree. Renderer and exporter never
ask a format's name."""
from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from typing import NamedTuple, Protocol, Sequence

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.tools.ebnf import spell_out
from chatlab.tools.enforceable import FORMAT_PATTERNS
from chatlab.tools.stream import StreamParser
from chatlab.types import ToolCall, ToolSpec


class Bit(NamedTuple):
    """One piece of a turn body: `text`, the format's own words; `content`, client data."""

    kind: str  # "text" | "content"
    value: str
    slot: str = "content"


def text(value: str, slot: str = "content") -> Bit:
    return Bit("text", value, slot)


def data(value: str, slot: str = "content") -> Bit:
    return Bit("content", value, slot)


class Turn(NamedTuple):
    """A turn in the template's layout for `role` (`header`/`footer` False: continue or leave
    open a turn; `meta`: ChatGLM3's metadata line)."""

    role: str
    bits: list[Bit]
    header: bool = True
    footer: bool = True
    meta: str = ""


class JinjaTurns(Protocol):
    """What a format needs from the exporter: Jinja for a whole turn or its ends."""

    def turn(self, role: str, body: str, meta: str = "''", header: str = "true",
             footer: str = "true") -> str: ...

    def header(self, role: str, when: str = "true") -> str: ...

    def footer(self, role: str, when: str = "true") -> str: ...


def dumps(value: Jsonable, indent: int | None = None) -> str:
    """JSON exactly as Hugging Face's `tojson` filter writes it (so exports match)."""
    return json.dumps(value, ensure_ascii=False, indent=indent)


def lit(value: str) -> str:
    """A Jinja string literal."""
    return json.dumps(value, ensure_ascii=False)


# Jinja for a call's arguments: the string as sent, or an object as JSON.
JINJA_ARGS = "(f.arguments if f.arguments is string else f.arguments | tojson)"
JINJA_CALLS = "{%- for call in m.tool_calls or [] %}{%- set f = call.function %}"
_XGR_PREFIX = re.compile(r"^\[[^\]]*\] \S+:\d+: ")


def schema_grammar(tool: ToolSpec) -> dict:
    """The arguments as compact JSON for the tool's schema (schema_ebnf)."""
    try:
        ebnf = schema_ebnf(json.dumps(tool.schema))
    except RuntimeError as err:
        raise grammar_error(f"the parameters schema of tool {tool.name!r}", err) from None
    return {"type": "grammar", "grammar": ebnf}


def schema_ebnf(schema: str, strict: bool = True) -> str:
    """xgrammar's grammar for a JSON schema's text: compact (a tiny model may spend its budget on
    newlines), format patterns written out as rules (xgrammar's Regex misreads `([.][0-9]+)?`)."""
    import xgrammar as xgr

    ebnf = str(xgr.Grammar.from_json_schema(schema, any_whitespace=False, strict_mode=strict))
    return spell_out(ebnf, FORMAT_PATTERNS.values())


def grammar_error(what: str, err: Exception, param: str | None = None) -> ChatlabError:
    """xgrammar's refusal of a schema that jsonschema accepted, as a user error."""
    why = _XGR_PREFIX.sub("", str(err).strip()).splitlines()[0][:200]
    return ChatlabError(f"{what} cannot be turned into a grammar for constrained decoding ({why}); "
                        "fix or simplify the schema (no dangling $ref, no empty enum, no "
                        "minimum/minLength above maximum/maxLength)", param=param)


class ToolFormat(ABC):
    """The base: subclasses set the strings and override the steps their format changes."""

    name = "base"
    trigger: str | None = None  # text that starts a call mid-reply; None: calls open the reply
    parallel_calls = True  # several calls in one reply (ReAct and ChatGLM3 make one per step)
    content_with_calls = True  # a reply may hold text and calls (a llama3 call is the whole reply)
    stop_words: tuple[str, ...] = ()  # extra stop words while tools are offered
    end_tokens: tuple[str, ...] = ()  # special tokens that end a turn holding a call
    default_system: str | None = None  # the system text when tools are given and none was sent
    template_marks: tuple[str, ...] = ()  # text that shows a Jinja chat_template writes this format

    def __repr__(self) -> str:
        return f"<tool format {self.name}>"

    def matches(self, chat_template: str) -> bool:
        """Whether a Jinja chat_template writes calls in this format."""
        return any(mark in chat_template for mark in self.template_marks)

    parser_class: type[StreamParser]

    def parser(self, tools: Sequence[ToolSpec] = ()) -> StreamParser:
        """A fresh streaming parser for one response (it knows the tools' names)."""
        return self.parser_class(tools)

    def system_tools(self, tools: Sequence[ToolSpec], after_text: bool) -> list[Bit]:
        """Bits appended to the system turn's body (after its text, if `after_text`)."""
        return []

    def user_prefix(self, tools: Sequence[ToolSpec]) -> list[Bit]:
        """Bits written before the last user message's content."""
        return []

    def is_result_text(self, content: str) -> bool:
        """A user message that is really a tool result (Qwen3 counts queries without them)."""
        return False

    @abstractmethod
    def call_bits(self, calls: Sequence[ToolCall], has_content: bool) -> list[Bit]:
        """The calls of one assistant message, written after its content."""

    def assistant_turns(self, i: int, content: str, body: list[Bit], calls: Sequence[ToolCall],
                        prev: str | None, nxt: str | None) -> list[Turn]:
        return [Turn("assistant", body + self.call_bits(calls, bool(content)))]

    def result_turns(self, i: int, content: str, prev: str | None,
                     nxt: str | None) -> tuple[list[Turn], bool]:
        """The turns of a tool result, and whether they leave the assistant turn open."""
        return [Turn("tool", [data(content)])], False

    def reply_text(self, content: str, calls: Sequence[ToolCall]) -> str:
        """The text a model generates for such a reply: what `parser()` reads back."""
        turns = self.assistant_turns(-1, content, [data(content)], calls, None, None)
        return "".join(b.value for t in turns for b in t.bits)

    def jinja_system(self) -> str:
        """Statements that add the tools to `ns.body` (the system text, `sys`)."""
        return ""

    def jinja_prelude(self) -> str:
        """Statements run once before the messages loop."""
        return ""

    def jinja_user(self) -> str:
        """The expression for a user turn's body (`c` is its content, `i` its index)."""
        return "c"

    def jinja_is_query(self, c: str) -> str:
        """A Jinja test that a user message's content `c` is a query, not a tool result."""
        return "true"

    @abstractmethod
    def jinja_assistant(self, w: JinjaTurns) -> str:
        """An assistant message (`ns.c` content, `ns.body` content with reasoning)."""

    def jinja_tool(self, w: JinjaTurns) -> str:
        return w.turn("tool", "c")

    @abstractmethod
    def call_tag(self, tool: ToolSpec) -> dict:
        """The xgrammar structural tag of one call to `tool`."""

    def forced_structure(self, tools: Sequence[ToolSpec]) -> dict:
        """Exactly one call to one of `tools` (one: a named tool_choice; several: "required")."""
        tags = [self.call_tag(t) for t in tools]
        return tags[0] if len(tags) == 1 else {"type": "or", "elements": tags}

    def lazy_structure(self, tools: Sequence[ToolSpec]) -> dict | None:
        """Free text until the model writes the trigger, then a constrained call (auto)."""
        if self.trigger is None or not tools:
            return None
        return {"type": "triggered_tags", "triggers": [self.trigger],
                "tags": [self.call_tag(t) for t in tools]}


def jinja_format(template: str, exprs: dict[str, str]) -> str:
    """A `str.format` template as a Jinja expression: literals joined with the `exprs` of its fields."""
    parts = re.split(r"\{(\w+)\}", template)  # literal, field, literal, field, ...
    return " + ".join(exprs[p] if k % 2 else lit(p) for k, p in enumerate(parts) if k % 2 or p)
