"""The built-in renderer: a Template plus messages (and tools) become pieces for `encode_pieces`.

Everything a message carries (content, tool names, arguments, results, tool definitions) goes in
as `content` pieces, encoded as plain text; only the template's own parts can be control ids.
The per-format rules (where tools go, how calls and results are written) follow
`tools_prompt.py`; `export.py` writes the same rules as Jinja, and tests prove the two agree.
"""
from __future__ import annotations

from typing import Any

from chatlab.errors import ChatlabError
from chatlab.render import tools_prompt as tp
from chatlab.render.encoder import Encoder
from chatlab.render.ids import Piece
from chatlab.render.messages import arguments_object
from chatlab.render.template import Parts, Template


class Composer:
    def __init__(self, template: Template, encoder: Encoder, messages: list[dict],
                 tools: list[dict], options: dict[str, Any]) -> None:
        if tools and not template.tool_format:
            from chatlab.render.builtin import TEMPLATES

            with_tools = [n for n, t in TEMPLATES.items() if t.tool_format]
            raise ChatlabError(f"template {template.name} has no tool-call format; use one of "
                               f"{', '.join(with_tools)} to send tools")
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

    def parts(self, parts: Parts, msg: int, slot: str, body: list[Piece] = (), meta: str = "") -> None:
        out = self.out
        for p in parts:
            k = p.kind
            if k == "content":
                out.extend(body)
            elif k == "text":
                out.append(Piece("text", p.value, msg, slot))
            elif k == "special":
                out.append(Piece("special", self.enc.special_id(p.value, self.t.name), msg, slot))
            elif k == "bos":
                out.append(Piece("special", self.special(self.enc.bos_id, "bos"), msg, slot))
            elif k == "eos":
                out.append(Piece("special", self.special(self.enc.eos_id, "eos"), msg, slot))
            elif k == "break":
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

    # -- the conversation ---------------------------------------------------------------
    def render(self, add_generation_prompt: bool) -> list[Piece]:
        t, msgs = self.t, self.msgs
        self.parts(t.prefix, -1, "prefix")
        start, pending_system = self.system()
        last_user = max((i for i, m in enumerate(msgs) if m["role"] == "user"), default=-1)
        self.last_query = max((i for i, m in enumerate(msgs) if m["role"] == "user" and not (
            m["content"].startswith("<tool_response>") and m["content"].endswith("</tool_response>"))),
            default=-1)
        for i in range(start, len(msgs)):
            m = msgs[i]
            prev = msgs[i - 1]["role"] if i > 0 else None
            nxt = msgs[i + 1]["role"] if i + 1 < len(msgs) else None
            role = m["role"]
            if role == "user":
                body = [self.content(m["content"], i)]
                if self.fmt == "react" and i == last_user:
                    body = [self.content(tp.react_instruction(self.tools), i, "tools"),
                            self.text("\n\nQuestion: ", i)] + body
                self.turn("user", i, body, system=pending_system)
                pending_system = None
            elif role == "system":
                self.turn("system", i, [self.content(m["content"], i)])
            elif role == "assistant":
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
        has = first["role"] == "system"
        text, idx = (first["content"], 0) if has else (t.default_system, -1)
        if self.fmt == "chatglm3" and text is None:
            text = tp.CHATGLM3_SYSTEM
        body = [] if text is None else [self.content(text, idx, "system" if idx < 0 else "content")]
        if self.fmt in ("hermes", "json"):
            if body:
                body.append(self.text("\n\n", idx))
            head, tail, sep, indent = ((tp.HERMES_HEAD, tp.HERMES_TAIL, "\n", None) if self.fmt == "hermes"
                                       else (tp.JSON_HEAD, "", "\n\n", 4))
            body.append(self.text(head, idx, "tools"))
            for tool in self.tools:
                body += [self.text(sep, idx, "tools"), self.content(tp.dumps(tool, indent), idx, "tools")]
            if tail:
                body.append(self.text(tail, idx, "tools"))
        elif self.fmt == "chatglm3":
            body += [self.text("\n", idx, "tools"),
                     self.content(tp.dumps(tp.function_defs(self.tools), 4), idx, "tools")]
        if not body:
            return int(has), None
        if t.system_style == "turn":
            self.turn("system", idx, body)
        elif t.system_style == "first-user":
            return int(has), body
        else:
            self.parts(t.system_merge, idx, "system", body)
        return int(has), None

    def assistant(self, i: int, m: dict, prev: str | None, nxt: str | None) -> None:
        content, calls = m["content"], m.get("tool_calls", [])
        body: list[Piece] = []
        if self.t.think:
            content, body = self.think(i, m)
        else:
            body = [self.content(content, i)]
        if calls and not self.call_fmt:
            raise ChatlabError(f"messages[{i}] has tool calls, but template {self.t.name} has no "
                               "tool-call format; choose a template with one (`chatlab templates`)")
        if self.call_fmt == "react":
            return self.react_assistant(i, content, calls, prev == "tool", nxt)
        if self.call_fmt == "chatglm3" and calls:
            if content:
                self.turn("assistant", i, body)
            for call in calls:
                fn = call["function"]
                text = tp.chatglm3_call(arguments_object(fn["arguments"]))
                self.turn("assistant", i, [self.content(text, i, "tool_call")], meta=fn["name"])
            return None
        for j, call in enumerate(calls):
            fn = call["function"]
            if self.call_fmt == "json":
                lead = ("; " if j else ("\n" if content else "")) + '{"name": "'
                body += [self.text(lead, i, "tool_call"), self.content(fn["name"], i, "tool_call"),
                         self.text('", "parameters": ', i, "tool_call"),
                         self.content(fn["arguments"], i, "tool_call"), self.text("}", i, "tool_call")]
            else:  # hermes
                lead = ("\n" if (j or content) else "") + '<tool_call>\n{"name": "'
                body += [self.text(lead, i, "tool_call"), self.content(fn["name"], i, "tool_call"),
                         self.text('", "arguments": ', i, "tool_call"),
                         self.content(fn["arguments"], i, "tool_call"),
                         self.text("}\n</tool_call>", i, "tool_call")]
        self.turn("assistant", i, body)
        return None

    def think(self, i: int, m: dict) -> tuple[str, list[Piece]]:
        """Qwen3: reasoning is kept only for turns after the last user query."""
        content, reasoning = m["content"], m.get("reasoning_content")
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

    def react_assistant(self, i: int, content: str, calls: list[dict], cont: bool, nxt: str | None) -> None:
        lead = "\n" if cont else ""
        if calls or cont:
            thought = "" if content.startswith("Thought:") else "Thought: "
            body = [self.text(lead + thought, i), self.content(content, i)]
        else:
            body = [self.content(content, i)]
        for call in calls:
            fn = call["function"]
            body += [self.text("\nAction: ", i, "tool_call"), self.content(fn["name"], i, "tool_call"),
                     self.text("\nAction Input: ", i, "tool_call"),
                     self.content(fn["arguments"], i, "tool_call")]
        self.turn("assistant", i, body, header=not cont, footer=nxt != "tool")

    def tool(self, i: int, m: dict, prev: str | None, nxt: str | None) -> None:
        if self.call_fmt == "react":
            if prev not in ("assistant", "tool"):
                raise ChatlabError(f"messages[{i}] is a tool result that follows no assistant tool "
                                   "call; put the assistant message with tool_calls before it")
            body = [self.text("\nObservation: ", i, "tool_result"), self.content(m["content"], i)]
            if nxt is None:
                body.append(self.text("\nThought:", i, "tool_result"))
                self.open = True
            self.turn("assistant", i, body, header=False, footer=nxt not in ("tool", "assistant", None))
        elif self.call_fmt == "hermes":
            body = [self.text("\n" if prev == "tool" else "", i, "tool_result"),
                    self.text("<tool_response>\n", i, "tool_result"), self.content(m["content"], i),
                    self.text("\n</tool_response>", i, "tool_result")]
            self.turn("user", i, body, header=prev != "tool", footer=nxt != "tool")
        else:
            self.turn("tool", i, [self.content(m["content"], i)])
