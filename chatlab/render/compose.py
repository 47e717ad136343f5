"""The built-in renderer: a Template plus messages (and tools) become pieces for `encode_pieces`.

Everything a message carries (content, tool names, arguments, results, tool definitions) goes in
as `content` pieces, encoded as plain text; only the template's own parts can be control ids.
Where tools go and how calls and results are written is the template's tool format's business
(chatlab.tools): it hands back `Bit`s and `Turn`s, which this class lays out in the
template's turns. io/jinja_writer.py writes the same rules as Jinja; tests prove the two agree.
"""
from __future__ import annotations

from typing import Sequence

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.render.builtin import TEMPLATES
from chatlab.render.encoder import Encoder
from chatlab.render.ids import Piece
from chatlab.render.template import Parts, Template
from chatlab.tools.format import Bit, Turn
from chatlab.types import Message, ToolSpec


class Composer:
    def __init__(self, template: Template, encoder: Encoder, messages: Sequence[Message],
                 tools: Sequence[ToolSpec], options: dict[str, Jsonable]) -> None:
        if tools and not template.tool_format:
            with_tools = [n for n, t in TEMPLATES.items() if t.tool_format]
            raise ChatlabError(f"template {template.name!r} has no tool format (no way to write tool "
                               "definitions, calls or results), so the tools would not reach the model; "
                               "send the request without tools, or use a template with one (a file, or "
                               f"a built-in: {', '.join(with_tools)})", param="tools")
        self.t, self.enc, self.msgs, self.tools, self.options = template, encoder, messages, tools, options
        self.fmt = template.tool_format if tools else None  # how tool *definitions* are written
        self.call_fmt = template.tool_format  # earlier calls and results are written even without tools
        self.out: list[Piece] = []
        self.round = 0
        self.open = False

    # -- pieces -------------------------------------------------------------------------
    def content(self, text: str, msg: int, slot: str = "content") -> Piece:
        return Piece("content", text, msg, slot)

    def text(self, text: str, msg: int, slot: str = "content") -> Piece:
        return Piece("text", text, msg, slot)

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

    # -- the conversation ---------------------------------------------------------------
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
                body = [self.content(m.content, i)]
                if self.fmt and i == last_user:
                    body = self.bits(self.fmt.user_prefix(self.tools), i) + body
                self.turn("user", i, body, system=pending_system)
                pending_system = None
            elif m.role == "system":
                self.turn("system", i, [self.content(m.content, i)])
            elif m.role == "assistant":
                self.assistant(i, m, prev, nxt)
            else:
                self.tool(i, m, prev, nxt)
        if pending_system:  # a conversation with no user turn: the system text still counts
            self.parts(t.system_merge, pending_system[0].message, "system", pending_system)
        if add_generation_prompt and not self.open:
            self.parts(t.gen_prompt(), -1, "generation_prompt")
            if t.think and self.options.get("enable_thinking") is False:
                self.out.append(self.text("<think>\n\n</think>\n\n", -1, "generation_prompt"))
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
        body = [] if text is None else [self.content(text, idx, "system" if idx < 0 else "content")]
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
        content, body = self.think(i, m) if self.t.think else (m.content, [self.content(m.content, i)])
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
            return content, [self.text("<think>\n", i, "reasoning"),
                             self.content(reasoning.strip("\n"), i, "reasoning"),
                             self.text("\n</think>\n\n", i, "reasoning"),
                             self.content(content.lstrip("\n"), i)]
        return content, [self.content(content, i)]

    def tool(self, i: int, m: Message, prev: str | None, nxt: str | None) -> None:
        if not self.call_fmt:
            return self.turn("tool", i, [self.content(m.content, i)])
        turns, self.open = self.call_fmt.result_turns(i, m.content, prev, nxt)
        self.write(turns, i)
        return None
