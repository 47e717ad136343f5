"""A tokenizer's own Jinja chat_template, rendered in jinja2's sandbox and turned into ids without
injection: every client string becomes a sentinel of private-use characters, so what lies between
sentinels was written by the template. A second render with the real strings checks the template
did not branch on them; if it did, the client text is located in the real render."""
from __future__ import annotations

import json
import re
from collections import Counter
from contextvars import ContextVar
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.render.encoder import Encoder, Piece

if TYPE_CHECKING:
    import jinja2
    import jinja2.parser
    import jinja2.sandbox
    from jinja2 import nodes

IDENT_KEYS = {"name", "type", "required"}
# Protocol vocabulary (OpenAI's tool shape, JSON Schema's keywords): never marked, templates read them.
KEYWORDS = set("""type function name description parameters strict properties required items prefixItems
    enum const default title examples format pattern additionalProperties patternProperties propertyNames
    minimum maximum exclusiveMinimum exclusiveMaximum multipleOf minLength maxLength minItems maxItems
    uniqueItems contains minContains maxContains minProperties maxProperties dependentRequired
    dependentSchemas anyOf oneOf allOf not if then else $ref $defs definitions $schema $id $anchor $comment
    nullable deprecated readOnly writeOnly unevaluatedItems unevaluatedProperties contentEncoding
    contentMediaType""".split())
TYPE_NAMES = {"function", "object", "array", "string", "number", "integer", "boolean", "null"}

# The marks of the render in progress, read by the `tojson` filter (None: a plain render).
ACTIVE: ContextVar["Marks | None"] = ContextVar("chatlab_jinja_marks", default=None)


def _free_base(*values: Jsonable) -> int:
    """The first of four consecutive private-use code points that no input string contains."""
    seen = json.dumps(values, ensure_ascii=False, default=str)
    base = 0xE000
    while any(chr(base + k) in seen for k in range(4)):
        base += 4
    return base


class Marks:
    def __init__(self, encoder: Encoder, messages: list[dict], tools: list[dict] | None,
                 source: str) -> None:
        self.encoder = encoder
        base = _free_base(messages, tools, source)
        self.open, self.close, self.json_u, self.json_a = (chr(base + k) for k in range(4))
        self.pattern = re.compile(f"([{self.open}{self.json_u}{self.json_a}])(\\d+){self.close}")
        escaped = [json.dumps(c)[1:-1].replace("\\", "\\\\") for c in (self.open, self.close)]
        self.in_json = re.compile(f"(?:{self.open}|{escaped[0]})(\\d+)(?:{self.close}|{escaped[1]})")
        self.originals: list[tuple[str, int, str]] = []  # (text, message index, slot)
        self.shared: dict[str, int] = {}  # tool strings: one sentinel per distinct string
        self.messages = [self._message(i, m) for i, m in enumerate(messages)]
        self.tools = [self._tool(t) for t in tools] if tools else None

    def _new(self, text: str, message: int, slot: str) -> str:
        self.originals.append((text, message, slot))
        return f"{self.open}{len(self.originals) - 1}{self.close}"

    def text(self, text: str, message: int, slot: str) -> str:
        """Free text: always marked, unless empty (templates test truthiness)."""
        return self._new(text, message, slot) if text else text

    def ident(self, text: str, message: int, slot: str) -> str:
        return self._new(text, message, slot) if self.encoder.could_form_special(text) else text

    def _message(self, i: int, msg: dict) -> dict:
        out = dict(msg)
        out["content"] = self.text(msg["content"], i, "content")
        if isinstance(msg.get("reasoning_content"), str):
            out["reasoning_content"] = self.text(msg["reasoning_content"], i, "reasoning")
        for key in ("name", "tool_call_id"):
            if isinstance(msg.get(key), str):
                out[key] = self.ident(msg[key], i, key)
        if msg.get("tool_calls"):
            out["tool_calls"] = [self._call(i, call) for call in msg["tool_calls"]]
        return out

    def _call(self, i: int, call: dict) -> dict:
        fn = dict(call["function"])
        fn["name"] = self.ident(fn["name"], i, "tool_call")
        if isinstance(fn.get("arguments"), str):
            fn["arguments"] = self.text(fn["arguments"], i, "tool_call")
        else:  # an object (a caller that skipped normalization): its strings are tool-like data
            fn["arguments"] = self._tool(fn.get("arguments"))
        return {**call, "id": self.ident(call["id"], i, "tool_call") if isinstance(call.get("id"), str)
                else call.get("id"), "function": fn}

    def _share(self, text: str, ident: bool) -> str:
        if not text or (ident and not self.encoder.could_form_special(text)):
            return text  # (protocol words never get here: _tool keeps them as they are)
        if text not in self.shared:
            self.shared[text] = len(self.originals)
            self.originals.append((text, -1, "tools"))
        return f"{self.open}{self.shared[text]}{self.close}"

    def _tool(self, value: Jsonable, key: str | None = None) -> Jsonable:
        if isinstance(value, dict):
            return {self._share(k, True) if isinstance(k, str) and k not in KEYWORDS else k:
                    self._tool(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self._tool(v, key) for v in value]
        if isinstance(value, str):
            if (key == "type" and value in TYPE_NAMES) or (key == "required" and value in KEYWORDS):
                return value  # as its key is kept (a property called "name")
            return self._share(value, key in IDENT_KEYS)
        return value

    def original(self, text: str) -> str:
        m = self.pattern.fullmatch(text)
        return self.originals[int(m.group(2))][0] if m else text

    def tojson(self, value: Jsonable, ensure_ascii: bool, indent: int | str | None,
               separators: tuple[str, str] | None, sort_keys: bool) -> str:
        """json.dumps whose sentinels come back as JSON sentinels (sorted by the original keys)."""
        if sort_keys:
            value = self._sorted(value)
        text = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators)
        mark = self.json_a if ensure_ascii else self.json_u
        return self.in_json.sub(lambda m: f"{mark}{m.group(1)}{self.close}", text)

    def _sorted(self, value: Jsonable) -> Jsonable:
        if isinstance(value, dict):
            return {k: self._sorted(value[k]) for k in sorted(value, key=lambda k: self.original(k)
                                                             if isinstance(k, str) else k)}
        if isinstance(value, list):
            return [self._sorted(v) for v in value]
        return value

    def form(self, kind: str, index: int) -> tuple[str, int, str]:
        """(text as the real render has it, message, slot) of a sentinel found in the render."""
        text, message, slot = self.originals[index]
        if kind != self.open:
            text = json.dumps(text, ensure_ascii=kind == self.json_a)[1:-1]
        return text, message, slot


@lru_cache(maxsize=1)
def _environment() -> "jinja2.sandbox.ImmutableSandboxedEnvironment":
    """The sandbox every chat template runs in, with what Hugging Face templates expect."""
    import jinja2
    from jinja2 import nodes
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Generation(Extension):
        """`{% generation %}...{% endgeneration %}` marks assistant text for training; here a no-op."""
        tags = {"generation"}

        def parse(self, parser: "jinja2.parser.Parser") -> "nodes.Node":
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller: Callable[[], str]) -> str:
            return caller()

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Jsonable, ensure_ascii: bool = False, indent: int | None = None,
               separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
        marks = ACTIVE.get()  # a marked render: sentinels must come back JSON-escaped
        if marks is not None:
            return marks.tojson(x, ensure_ascii, indent, separators, sort_keys)
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


@lru_cache(maxsize=32)
def compile_template(source: str) -> "jinja2.Template":
    import jinja2

    try:
        return _environment().from_string(source)
    except jinja2.TemplateSyntaxError as err:
        raise ChatlabError(f"the chat template has a syntax error (line {err.lineno}: {err.message}); "
                           "fix it or pick a built-in template with --template") from None
    except RecursionError:
        raise ChatlabError("the chat template nests its blocks thousands deep, past what can be compiled; "
                           "real templates nest a few levels: fix it or pick a built-in template") from None


@lru_cache(maxsize=32)
def template_reads(source: str) -> frozenset[str]:
    """The context variables a chat template reads (`messages`, `tools`, ...), from its syntax tree."""
    from jinja2 import meta

    compile_template(source)  # a syntax error is reported as compile_template reports it
    return frozenset(meta.find_undeclared_variables(_environment().parse(source)))


def render_string(source: str, context: dict[str, Jsonable]) -> str:
    import jinja2
    from jinja2.sandbox import SecurityError

    template = compile_template(source)
    try:
        return template.render(**context)
    except SecurityError as err:
        raise ChatlabError(f"the chat template tried to leave the sandbox ({err}); it is refused. "
                           "Use a trusted template or a built-in one (--template)") from None
    except jinja2.TemplateError as err:
        raise ChatlabError(f"the chat template refused these messages: {err}") from None
    except RecursionError:
        raise ChatlabError("the chat template recursed without end on these messages (a macro calling "
                           "itself?); it is refused. Fix it or use --template") from None
    except (TypeError, AttributeError, KeyError, IndexError, ValueError) as err:
        raise ChatlabError(f"the chat template failed on these messages ({type(err).__name__}: {err}); "
                           "check the message shapes or use --template") from None


def _render_marked(source: str, context: dict[str, Jsonable], marks: Marks) -> str:
    token = ACTIVE.set(marks)
    try:
        return render_string(source, {**context, "messages": marks.messages, "tools": marks.tools})
    finally:
        ACTIVE.reset(token)


def jinja_pieces(source: str, encoder: Encoder, messages: list[dict], tools: list[dict] | None,
                 add_generation_prompt: bool, options: dict[str, Jsonable]) -> list[Piece]:
    context = {"bos_token": encoder.bos_token or "", "eos_token": encoder.eos_token or "",
               "add_generation_prompt": add_generation_prompt, **options}
    for attr in ("unk_token", "pad_token"):
        context.setdefault(attr, getattr(encoder.tokenizer, attr, None) or "")
    tools = tools or None
    marks = Marks(encoder, messages, tools, source)
    try:
        with_marks = _render_marked(source, context, marks)
    except ChatlabError:
        render_string(source, {**context, "messages": messages, "tools": tools})  # its own error first
        raise ChatlabError("the chat template fails once client strings are marked as data (it "
                           "inspects them, e.g. their length), so chatlab cannot keep them from "
                           "becoming control tokens; render with a built-in template (--template)") from None
    real = render_string(source, {**context, "messages": messages, "tools": tools})
    out: list[Piece] = []
    last, owner = 0, -1
    for m in marks.pattern.finditer(with_marks):
        text, index, slot = marks.form(m.group(1), int(m.group(2)))
        if m.start() > last:
            out.append(Piece("text", with_marks[last:m.start()], index, "template"))
        out.append(Piece("content", text, index, slot))
        last, owner = m.end(), index
    if last < len(with_marks):  # the last turn's end, or the generation prompt
        out.append(Piece("text", with_marks[last:], owner if not add_generation_prompt else -1, "template"))
    if "".join(p.text for p in out) == real:
        return out
    return _locate(real, out, encoder)


def _locate(real: str, marked: list[Piece], encoder: Encoder) -> list[Piece]:
    """The template branched on content: find each content string in the real render."""
    out: list[Piece] = []
    cursor = 0
    for piece in marked:
        if piece.kind != "content" or not piece.value:
            continue
        forms = dict.fromkeys((piece.text, json.dumps(piece.text, ensure_ascii=False)[1:-1],
                               json.dumps(piece.text)[1:-1]))
        for form in forms:
            pos = real.find(form, cursor)
            if pos >= 0:
                if pos > cursor:
                    out.append(Piece("text", real[cursor:pos], piece.message, "template"))
                out.append(Piece("content", form, piece.message, piece.slot))
                cursor = pos + len(form)
                break
    if cursor < len(real):
        out.append(Piece("text", real[cursor:], -1, "template"))
    wrote = [x for p in marked if p.kind == "text" for x in encoder.split_specials(p.text) if isinstance(x, int)]
    got = [x for p in out if p.kind == "text" for x in encoder.split_specials(p.text) if isinstance(x, int)]
    if Counter(got) - Counter(wrote):  # a control id the template itself did not write
        raise ChatlabError("the chat template rewrites message content in a way that chatlab cannot "
                           "separate from template text, so control tokens in content could not be "
                           "ruled out; render with a built-in template instead (--template)")
    return out
