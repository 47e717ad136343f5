"""A tokenizer's own Jinja chat_template, rendered safely and turned into ids without injection.

Rendering happens in jinja2's ImmutableSandboxedEnvironment with what Hugging Face templates
expect. Client strings are first replaced by sentinels (jinja_marks.py), so what lies between
them was written by the template. A second render with the real strings checks that the
template did not branch on them; if it did, the client text is located in that real render
instead, and the result is refused if it holds any control token the template did not write.
"""
from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

from chatlab._thirdparty import Jsonable
from chatlab.errors import ChatlabError
from chatlab.render.encoder import Encoder
from chatlab.render.ids import Piece
from chatlab.render.jinja_marks import ACTIVE, Marks

if TYPE_CHECKING:
    import jinja2
    import jinja2.parser
    import jinja2.sandbox
    from jinja2 import nodes


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
    """The context variables a chat template reads (`messages`, `tools`, `bos_token`...), from
    its syntax tree: whether it has a tool section at all is whether it reads `tools`."""
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
