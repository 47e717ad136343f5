"""`Resolution`, one type for a template however it came, with its tokenizer; `Composer` lays a
built-in template and a chat out as pieces. Message data goes in as `content` pieces, so only the
template's parts can be control ids; io/jinja_writer.py writes the same rules as Jinja."""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import PurePath
from typing import Mapping, Protocol, Sequence

from chatlab._thirdparty import HFTokenizer, Jsonable
from chatlab.errors import ChatlabError
from chatlab.render.encoder import Encoder, Piece, Rendered, encode_pieces, encoder_for, tokenizer_name
from chatlab.render.jinja import jinja_pieces, template_reads
from chatlab.render.template import TEMPLATES, Parts, Template, get_template
from chatlab.tools import TOOL_FORMATS, ToolFormat, as_tools, format_of_chat_template
from chatlab.tools.format import Bit, Turn
from chatlab.types import Message, ToolSpec, parse_messages

# What render() takes: typed messages, or OpenAI-shaped dicts (a notebook's), parsed once.
ChatMessages = Sequence[Message] | Sequence[Mapping[str, Jsonable]]

# Tokens that end a turn in common chat_templates (the tool formats add their own).
END_MARKERS = ["<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<|endoftext|>", "<|user|>",
               "<end_of_turn>", *(t for f in TOOL_FORMATS.values() for t in f.end_tokens)]
TOOL_TEMPLATES = ", ".join(n for n, t in TEMPLATES.items() if t.tool_format)


class GoTemplate(Protocol):
    """An Ollama Modelfile (chatlab.render.io.ollama): its Go template runs the chat itself."""

    template: str
    system: str | None
    stops: list[str]

    def render(self, messages: Sequence[Message], tools: Sequence[ToolSpec], add_generation_prompt: bool,
               options: dict[str, Jsonable]) -> list[Piece]: ...


def as_messages(messages: Jsonable) -> list[Message]:
    """Messages as they are; anything else (OpenAI dicts, from a notebook) parsed once."""
    if isinstance(messages, (list, tuple)) and messages and all(isinstance(m, Message) for m in messages):
        return list(messages)
    return parse_messages(messages)


def vllm_message(m: Message) -> dict[str, Jsonable]:
    """A message as vLLM hands it to a Jinja chat_template: tool-call arguments that are a JSON
    object parsed (vLLM's chat_utils does), so `arguments | tojson` and `.items()` work."""
    d = m.to_template()
    for call in d.get("tool_calls", ()):
        try:
            args = json.loads(call["function"]["arguments"])
        except ValueError:
            continue
        if isinstance(args, dict):
            call["function"]["arguments"] = args
    return d


@dataclass
class Resolution:
    """Which template renders a chat, why (`rule`, `reason`), and for which tokenizer. The template
    is `template` (parts), `chat_template` (sandboxed Jinja) or `modelfile` (an Ollama Go template)."""

    rule: str
    reason: str
    name: str
    tokenizer: HFTokenizer = field(default=None, repr=False)  # None: a loaded file, not yet for a tokenizer
    template: Template | None = field(default=None, repr=False)
    chat_template: str | None = field(default=None, repr=False)
    modelfile: GoTemplate | None = field(default=None, repr=False)
    # The engine whose tokenizer adds the bos the template never writes: "ollama" (even when the
    # text already starts with one) or "lmdeploy" (its encode drops a doubled one).
    engine_bos: str | None = None
    tools_template: str | None = None  # the built-in the model store names for tool requests
    fmt: str = "builtin"  # the format it was written in: "builtin" or a name in TEMPLATE_FORMATS
    source: str | None = None  # the file it was read from
    notes: list[str] = field(default_factory=list)  # what its reader warned about

    @classmethod
    def builtin(cls, tokenizer: HFTokenizer | None, name: str, rule: str, reason: str) -> "Resolution":
        return cls(rule, reason, name, tokenizer, template=get_template(name))

    @cached_property
    def tool_format(self) -> ToolFormat | None:
        """How tools, calls and results are written and parsed (None: no format chatlab parses)."""
        if self.template is not None:
            return self.template.tool_format
        source = self.modelfile.template if self.modelfile is not None else self.chat_template
        return format_of_chat_template(source) if source else None

    @property
    def default_system(self) -> str | None:
        if self.modelfile is not None:
            return self.modelfile.system
        return self.template.default_system if self.template is not None else None

    @property
    def stop_words(self) -> list[str]:
        """The stop strings the template names ("eos" is implied by every engine)."""
        if self.modelfile is not None:
            return list(self.modelfile.stops)
        return self.template.stop_strings() if self.template is not None else []

    @property
    def label(self) -> str:
        """The template as an error names it."""
        if self.rule == "tokenizer-template":  # a folder by its name only: no machine path in errors
            who = tokenizer_name(self.tokenizer)
            if PurePath(who).is_absolute():
                who = PurePath(who).name
            return f"the chat_template of the tokenizer {who!r}"
        return f"template {self.name!r}"

    @property
    def writes_tools(self) -> bool:
        """Whether this template writes tool definitions (an Ollama template refuses them itself)."""
        if self.tool_format is not None or self.modelfile is not None:
            return True
        return self.chat_template is not None and "tools" in template_reads(self.chat_template)

    @property
    def encoder(self) -> Encoder:
        if self.tokenizer is None:
            raise ChatlabError(f"{self.label} was loaded without a tokenizer; render it through "
                               "resolve(tokenizer, template=...)")
        return encoder_for(self.tokenizer)

    def stops(self, tools: bool) -> tuple[list[str], list[int]]:
        enc = self.encoder
        if self.modelfile is not None:
            names = ["eos", *(w for w in self.modelfile.stops if w in enc.added or w in enc.extra_specials)]
            words = [w for w in self.modelfile.stops if w not in names]
        elif self.template is not None:
            fmt = self.template.tool_format
            words = list(self.template.stop_words) + (list(fmt.stop_words) if tools and fmt else [])
            names = list(self.template.stop_tokens)
        else:
            words, names = [], ["eos"] + [m for m in END_MARKERS if m in (self.chat_template or "")]
        found = (enc.eos_id if n == "eos" else enc.added.get(n, enc.extra_specials.get(n)) for n in names)
        return words, [i for i in dict.fromkeys(found) if i is not None]

    def render(self, messages: ChatMessages, tools: Sequence[ToolSpec] | Sequence[Mapping[str, Jsonable]] | None = None,
               add_generation_prompt: bool = True, **options: Jsonable) -> Rendered:
        """Ids for `messages` (and `tools`); plain OpenAI dicts are parsed once by chatlab.types."""
        if "functions" in options:  # would reach the Jinja context and be silently ignored
            raise ChatlabError("render() takes legacy `functions` as tools: pass "
                               "tools=chatlab.types.parse_tools(functions=...)")
        msgs, tool_list = as_messages(messages), as_tools(tools)
        self.check_tools(msgs, bool(tool_list))
        enc = self.encoder
        open_turn = False
        if self.modelfile is not None:
            pieces = self.modelfile.render(msgs, tool_list, add_generation_prompt, options)
        elif self.template is not None:
            composer = Composer(self.template, enc, msgs, tool_list, options)
            pieces = composer.render(add_generation_prompt)
            open_turn = composer.open
        else:
            pieces = jinja_pieces(self.chat_template or "", enc, [vllm_message(m) for m in msgs],
                                  [t.to_openai() for t in tool_list], add_generation_prompt, options)
        ids, text, slots = encode_pieces(enc, pieces)
        if self.engine_bos and enc.adds_bos and enc.bos_id is not None and (self.engine_bos == "ollama" or ids[:1] != [enc.bos_id]):
            ids, text, slots = encode_pieces(enc, [Piece("special", enc.bos_id, -1, "bos"), *pieces])
        words, stop_ids = self.stops(bool(tool_list))
        return Rendered(ids=ids, text=text, slot_map=slots, stop_words=words, stop_ids=stop_ids,
                        rule=self.rule, reason=self.reason, template=self.name, encoder=enc,
                        open_turn=open_turn)

    def check_tools(self, msgs: Sequence[Message], tools: bool) -> None:
        """Refuse, naming the template and what it lacks, a request whose tools or earlier calls
        it would leave out of the prompt (a template without a tool format refuses in Composer)."""
        if self.chat_template is None:
            return
        if tools and not self.writes_tools:
            raise ChatlabError(f"{self.label} has no tool section (it never reads `tools`), so the tools "
                               "would not reach the model; send the request without tools, or use a template "
                               f"that writes them (a file, or a built-in: {TOOL_TEMPLATES})", param="tools")
        calls = next((i for i, m in enumerate(msgs) if m.tool_calls), None)
        if calls is not None and "tool_calls" not in self.chat_template:
            raise ChatlabError(f"messages[{calls}] has tool calls, but {self.label} never writes "
                               "`tool_calls`, so they would vanish from the prompt; send them as content, or "
                               f"use a template that writes calls (a file, or a built-in: {TOOL_TEMPLATES})",
                               param=f"messages[{calls}].tool_calls")

    def render_request(self, messages: Jsonable, tools: Jsonable = None, add_generation_prompt: bool = True,
                       **options: Jsonable) -> tuple["Resolution", Rendered]:
        """The resolution used and its render, as the server and the CLI do it: a request with
        tools, calls or results goes to `for_tools`."""
        msgs, tool_list = as_messages(messages), as_tools(tools)
        used = self
        if tool_list or any(m.tool_calls or m.role == "tool" for m in msgs):
            used = self.for_tools()
        return used, used.render(msgs, tool_list or None, add_generation_prompt, **options)

    def explain(self) -> str:
        return f"{self.name} (rule {self.rule}): {self.reason}"

    def for_tokenizer(self, tokenizer: HFTokenizer) -> "Resolution":
        return replace(self, tokenizer=tokenizer)

    def for_tools(self) -> "Resolution":
        """This resolution, unless the model store names a built-in for tool requests because its
        chat_template has no tool section (SmolLM2's). Nothing else is ever substituted."""
        if self.tools_template is None or self.writes_tools:
            return self
        name = self.tools_template
        fmt = get_template(name).tool_format
        return Resolution.builtin(self.tokenizer, name, "tools-fallback",
                                  f"the {self.name!r} template has no tool section, and the model store names "
                                  f"the built-in {name!r} template for this model's tool requests "
                                  f"({fmt.name if fmt else 'no'} tool format)")


class Composer:
    def __init__(self, template: Template, encoder: Encoder, messages: Sequence[Message],
                 tools: Sequence[ToolSpec], options: dict[str, Jsonable]) -> None:
        if tools and not template.tool_format:
            raise ChatlabError(f"template {template.name!r} has no tool format (no way to write tool "
                               "definitions, calls or results), so the tools would not reach the model; "
                               "send the request without tools, or use a template with one (a file, or "
                               f"a built-in: {TOOL_TEMPLATES})", param="tools")
        self.t, self.enc, self.msgs, self.tools, self.options = template, encoder, messages, tools, options
        self.fmt = template.tool_format if tools else None  # how tool *definitions* are written
        self.call_fmt = template.tool_format  # earlier calls and results are written even without tools
        self.out: list[Piece] = []
        self.round = 0
        self.open = False

    def special(self, token_id: int | None, what: str) -> int:
        if token_id is None:
            raise ChatlabError(f"template {self.t.name} needs the tokenizer's {what} token, which it "
                               "does not define; choose another template (`chatlab templates`)")
        return token_id

    def parts(self, parts: Parts, msg: int, slot: str, body: Sequence[Piece] = (), meta: str = "") -> None:
        out = self.out
        for p in parts:
            k = p.kind
            if k == "content":
                out.extend(body)
            elif k == "text":
                out.append(Piece("text", p.value, msg, slot))
            elif k == "special":
                out.append(Piece("special", self.enc.special_id(p.value, self.t.name), msg, slot))
            elif k in ("bos", "eos"):
                out.append(Piece("special", self.special(getattr(self.enc, f"{k}_id"), k), msg, slot))
            elif k in ("break", "seam"):
                out.append(Piece("break", "", msg, slot))
            elif k == "round":
                out.append(Piece("text", str(self.round), msg, slot))
            elif k == "meta":
                out.append(Piece("content", meta, msg, "metadata"))

    def turn(self, role: str, msg: int, body: list[Piece], *, header: bool = True,
             footer: bool = True, meta: str = "", system: list[Piece] | None = None) -> None:
        if role == "user" and header:
            self.round += 1
        if header:
            self.parts(self.t.header(role), msg, "header", meta=meta)
        if system:
            self.parts(self.t.system_merge, system[0].message, "system", system)
        self.out.extend(body)
        if footer:
            self.parts(self.t.footer(role), msg, "end")

    def bits(self, bits: list[Bit], msg: int) -> list[Piece]:
        return [Piece(b.kind, b.value, msg, b.slot) for b in bits]

    def write(self, turns: list[Turn], msg: int) -> None:
        for t in turns:
            self.turn(t.role, msg, self.bits(t.bits, msg), header=t.header, footer=t.footer, meta=t.meta)

    def render(self, add_generation_prompt: bool) -> list[Piece]:
        t, msgs = self.t, self.msgs
        self.parts(t.prefix, -1, "prefix")
        start, pending_system = self.system()
        last_user = max((i for i, m in enumerate(msgs) if m.role == "user"), default=-1)
        is_result = self.call_fmt.is_result_text if self.call_fmt else (lambda _: False)
        self.last_query = max((i for i, m in enumerate(msgs) if m.role == "user" and not is_result(m.content)),
                              default=-1)
        for i in range(start, len(msgs)):
            m = msgs[i]
            prev = msgs[i - 1].role if i > 0 else None
            nxt = msgs[i + 1].role if i + 1 < len(msgs) else None
            if m.role == "user":
                body = [Piece("content", m.content, i, "content")]
                if self.fmt and i == last_user:
                    body = self.bits(self.fmt.user_prefix(self.tools), i) + body
                self.turn("user", i, body, system=pending_system)
                pending_system = None
            elif m.role == "system":
                self.turn("system", i, [Piece("content", m.content, i, "content")])
            elif m.role == "assistant":
                self.assistant(i, m, prev, nxt)
            else:
                self.tool(i, m, prev, nxt)
        if pending_system:  # a conversation with no user turn: the system text still counts
            self.parts(t.system_merge, pending_system[0].message, "system", pending_system)
        if add_generation_prompt and not self.open:
            self.parts(t.gen_prompt(), -1, "generation_prompt")
            if t.think and self.options.get("enable_thinking") is False:
                self.out.append(Piece("text", "<think>\n\n</think>\n\n", -1, "generation_prompt"))
        return self.out

    def system(self) -> tuple[int, list[Piece] | None]:
        """Render (or stash, for templates that fold it into the first user turn) the system."""
        t, first = self.t, self.msgs[0]
        has = first.role == "system"
        text, idx = (first.content, 0) if has else (t.default_system, -1)
        if t.empty_system_default and not text:
            text, idx = t.default_system or None, -1
        if self.fmt and text is None:
            text = self.fmt.default_system
        body = [] if text is None else [Piece("content", text, idx, "system" if idx < 0 else "content")]
        if self.fmt:
            body += self.bits(self.fmt.system_tools(self.tools, bool(body)), idx)
        if not body:
            return int(has), None
        if t.system_style == "turn":
            self.turn("system", idx, body)
        elif t.system_style == "first-user":
            return int(has), body
        else:
            self.parts(t.system_merge, idx, "system", body)
        return int(has), None

    def assistant(self, i: int, m: Message, prev: str | None, nxt: str | None) -> None:
        plain = (m.content, [Piece("content", m.content, i, "content")])
        content, body = self.think(i, m) if self.t.think else plain
        if m.tool_calls and not self.call_fmt:
            raise ChatlabError(f"messages[{i}] has tool calls, but template {self.t.name} has no "
                               "tool-call format; choose a template with one (`chatlab templates`)")
        if not self.call_fmt:
            return self.turn("assistant", i, body)
        body_bits = [Bit(p.kind, p.text, p.slot) for p in body]
        self.write(self.call_fmt.assistant_turns(i, content, body_bits, m.tool_calls, prev, nxt), i)
        return None

    def think(self, i: int, m: Message) -> tuple[str, list[Piece]]:
        """Qwen3: reasoning is kept only for turns after the last user query."""
        content, reasoning = m.content, m.reasoning
        if reasoning is None and "</think>" in content:
            reasoning = content.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
            content = content.split("</think>")[-1].lstrip("\n")
        reasoning = reasoning or ""
        if i > self.last_query and (i == len(self.msgs) - 1 or reasoning):
            return content, [Piece("text", "<think>\n", i, "reasoning"),
                             Piece("content", reasoning.strip("\n"), i, "reasoning"),
                             Piece("text", "\n</think>\n\n", i, "reasoning"),
                             Piece("content", content.lstrip("\n"), i, "content")]
        return content, [Piece("content", content, i, "content")]

    def tool(self, i: int, m: Message, prev: str | None, nxt: str | None) -> None:
        if not self.call_fmt:
            return self.turn("tool", i, [Piece("content", m.content, i, "content")])
        turns, self.open = self.call_fmt.result_turns(i, m.content, prev, nxt)
        self.write(turns, i)
        return None
