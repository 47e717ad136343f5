"""`certify`: one template, a fixed set of conversations, every engine's semantics, one verdict.
The template is exported to each engine's format and read back; each engine x conversation cell
is id-equal, differs, cannot express (nothing compared), or not rendered."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from chatlab._thirdparty import HFTokenizer, Jsonable
from chatlab.errors import CannotExpress, ChatlabError, MissingSpecialToken
from chatlab.render.compose import Resolution
from chatlab.render.encoder import Rendered, encoder_for, tokenizer_name
from chatlab.render.io.diff import Difference, differences
from chatlab.render.io.formats import EXPORT_TARGETS, export_template, load_template

EQUAL, DIFFERS, CANNOT, NOT_RENDERED = "id-equal", "differs", "cannot express", "not rendered"
EXIT_CODES = {EQUAL: 0, DIFFERS: 1, CANNOT: CannotExpress.exit_code, NOT_RENDERED: 3}
SHOWN = 3  # tokens of each side shown for a difference


def _tokens(tokens: list[str]) -> str:
    shown = " ".join(map(repr, tokens[:SHOWN])) + (" ..." if len(tokens) > SHOWN else "")
    return shown or "(nothing)"


def explain(d: Difference, engine: str = "the engine") -> str:
    """One difference in words: where, both sides' tokens, the cause."""
    if d.cause == "stop words":
        return (f"stop words differ (template: {_tokens(d.a_tokens)}; {engine}: {_tokens(d.b_tokens)}), "
                f"so generation ends elsewhere")
    why = d.cause
    if d.cause == "bos":
        why = f"bos: {engine} adds one the template does not write" if d.b_tokens and not d.a_tokens \
            else f"bos: {engine} lacks the one the template writes"
    return f"token {d.a_at}: template {_tokens(d.a_tokens)} | {engine} {_tokens(d.b_tokens)} [{why}]"


@dataclass
class Cell:
    verdict: str  # EQUAL | DIFFERS | CANNOT | NOT_RENDERED
    reason: str = ""  # CANNOT / NOT_RENDERED: why, in the converter's or renderer's words
    construct: str = ""  # CANNOT: the construct the format has no way to write
    target: str = ""  # CANNOT: that format
    diffs: list[Difference] = field(default_factory=list)  # DIFFERS: every difference, in order

    @property
    def first(self) -> Difference | None:
        return self.diffs[0] if self.diffs else None

    def short(self, engine: str = "the engine") -> str:
        if self.verdict == EQUAL:
            return EQUAL
        if self.verdict == DIFFERS:
            assert self.first is not None  # a DIFFERS cell holds its differences
            more = len(self.diffs) - 1
            return f"differs at {explain(self.first, engine)}" + (f" (+{more} more)" if more else "")
        if self.verdict == CANNOT:
            return f"cannot express {self.construct} in {self.target}"
        return f"not rendered: {self.reason}"

    def to_json(self) -> dict[str, Jsonable]:
        first = self.first
        return {"verdict": self.verdict, "reason": self.reason, "construct": self.construct, "target": self.target,
                "first_difference": None if first is None else
                {"position": first.a_at, "engine_position": first.b_at, "template_tokens": list(first.a_tokens),
                 "engine_tokens": list(first.b_tokens), "cause": first.cause},
                "differences": [d.to_json() for d in self.diffs]}


def overall(cells: Iterable[Cell]) -> str:
    """The verdict over cells: any difference wins, then anything not expressible, then id-equal."""
    seen = {c.verdict for c in cells}
    return next((verdict for verdict in (DIFFERS, CANNOT, EQUAL) if verdict in seen), NOT_RENDERED)


TEMPLATE_ENGINES = {"jinja": "vLLM / transformers (Jinja)", "lmdeploy": "LMDeploy", "ollama": "Ollama"}
Conversations = dict[str, tuple[list[dict], list[dict] | None]]  # name -> (messages, tools)
_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
_CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
CONVERSATIONS: Conversations = {
    "no system": ([{"role": "user", "content": "Hello"}], None),
    "system": ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}], None),
    "multi-turn": ([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi! How can I help?"},
                    {"role": "user", "content": "What is 2+2?"}], None),
    "tools": ([{"role": "user", "content": "Weather in Paris?"}], _TOOLS),
    "tool call + result": ([{"role": "user", "content": "Weather in Paris?"},
                            {"role": "assistant", "content": "", "tool_calls": [_CALL]},
                            {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees"}], _TOOLS),
    # a result without its call, and without tool_call_id, as LMDeploy's messages take it
    "tool result": ([{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "Checking."},
                     {"role": "tool", "content": "18 degrees"}], None),
    "unicode": ([{"role": "user", "content": "你好 — ünïcode 🎉"}], None),
    "empty content": ([{"role": "user", "content": ""}], None),
}


@dataclass
class Certificate:
    template: str
    cells: dict[str, dict[str, Cell]]  # engine -> conversation -> cell
    notes: list[str] = field(default_factory=list)  # what the template's reader warned about

    @property
    def verdict(self) -> str:
        return overall(c for row in self.cells.values() for c in row.values())

    def engine_verdict(self, engine: str) -> str:
        return overall(self.cells[engine].values())

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def ok(self) -> bool:
        """Exit 0: something rendered, and every cell that did is id-equal in every engine."""
        return self.verdict == EQUAL

    def first_difference(self) -> tuple[str, str, Cell] | None:
        """(engine, conversation, cell) of the first cell that differs, or None."""
        return next(((e, c, x) for e, row in self.cells.items() for c, x in row.items() if x.verdict == DIFFERS), None)

    def headline(self) -> str:
        counts = {v: sum(x.verdict == v for row in self.cells.values() for x in row.values())
                  for v in (DIFFERS, CANNOT)}
        verdict = self.verdict
        if verdict == EQUAL:
            return "id-equal: every conversation that rendered gives the template's ids in every engine"
        if verdict == DIFFERS:
            found = self.first_difference()
            assert found is not None  # the verdict says one differs
            engine, conv, cell = found
            first = cell.first
            assert first is not None  # a cell that differs holds its differences
            return f"DIFFERS in {counts[DIFFERS]} cell(s); first: {name(engine)} / {conv}, {explain(first, name(engine))}"
        if verdict == CANNOT:
            where = ", ".join(name(e) for e in self.cells if CANNOT in {x.verdict for x in self.cells[e].values()})
            return (f"CANNOT EXPRESS in {counts[CANNOT]} cell(s) ({where}); nothing that rendered differs, "
                    "but those cells were not compared")
        return "NOT RENDERED: the template rendered none of the conversations; nothing was certified"

    def format(self) -> str:
        lines = [f"certificate for {self.template!r}: {self.headline()} (exit {self.exit_code})",
                 *(f"note: {n}" for n in self.notes)]
        for engine, row in self.cells.items():
            lines.append(f"{TEMPLATE_ENGINES.get(engine, engine)}: {self.engine_verdict(engine)}")
            lines.extend(f"  {conv:20s} {cell.short(name(engine))}" for conv, cell in row.items())
        return "\n".join(lines)

    def to_json(self) -> dict[str, Jsonable]:
        return {"template": self.template, "verdict": self.verdict, "exit_code": self.exit_code, "ok": self.ok,
                "notes": list(self.notes), "engines": {e: self.engine_verdict(e) for e in self.cells},
                "cells": {e: {c: x.to_json() for c, x in row.items()} for e, row in self.cells.items()}}


def name(engine: str) -> str:
    """The engine's short name for a verdict line ("LMDeploy", "vLLM / transformers")."""
    return TEMPLATE_ENGINES.get(engine, engine).split(" (")[0]


def _render(loaded: Resolution, tokenizer: HFTokenizer, msgs: list[dict],
            tools: list[dict] | None) -> "Rendered":
    """The render `chatlab render --template` and the server send for this conversation."""
    return loaded.for_tokenizer(tokenizer).render_request(msgs, tools)[1]


def _uses_tools(msgs: list[dict], tools: list[dict] | None) -> bool:
    return bool(tools) or any(m.get("tool_calls") or m.get("role") == "tool" for m in msgs)


References = dict[str, "Rendered | str"]  # conversation -> the template's render, or why not


def _references(tokenizer: HFTokenizer, template: "str | Path | Resolution",
                conversations: dict | None) -> tuple[Resolution, Conversations, References]:
    """The template, the conversations, and the template's own render of each (or why not)."""
    source = load_template(template)
    convs = CONVERSATIONS if conversations is None else conversations
    if not convs:
        raise ChatlabError("a certificate needs at least one conversation, and none was given; pass "
                           "conversations={name: (messages, tools)} or leave it out for the standard set")
    out: References = {}
    for conv, (msgs, tools) in convs.items():
        try:
            out[conv] = _render(source, tokenizer, msgs, tools)
        except MissingSpecialToken as err:
            missing = [err.token]
            if source.template is not None:
                enc = encoder_for(tokenizer)
                for token in source.template.special_tokens():
                    try:
                        enc.special_id(token, source.name)
                    except MissingSpecialToken:
                        missing.append(token)
            who = tokenizer_name(tokenizer)
            raise MissingSpecialToken(
                f"the tokenizer {who} has no special token {', '.join(map(repr, dict.fromkeys(missing)))}, which "
                f"template {source.name!r} writes, so it renders nothing that template's model was trained on and "
                "nothing can be certified; pass the model's own tokenizer (--model), or add the token(s) to it",
                err.token) from None
        except ChatlabError as err:  # the template itself cannot render it: nothing to certify
            out[conv] = str(err)[:160]
    return source, convs, out


def _row(tokenizer: HFTokenizer, engine: str, refs: References,
         convs: Conversations, target: Resolution | None,
         refusal: CannotExpress | None = None, tools_refusal: CannotExpress | None = None) -> dict[str, Cell]:
    """One engine's cells. `target`: the template as that engine reads it (None: `refusal` says
    why not); `tools_refusal`: why it was written without its tools."""
    row: dict[str, Cell] = {}
    for conv, (msgs, tools) in convs.items():
        want = refs[conv]
        if isinstance(want, str):
            row[conv] = Cell(NOT_RENDERED, want)
            continue
        why = tools_refusal if tools_refusal is not None and _uses_tools(msgs, tools) else refusal
        if why is not None:
            row[conv] = Cell(CANNOT, str(why)[:200], why.construct, TEMPLATE_ENGINES.get(engine, engine))
            continue
        assert target is not None  # without a refusal, the template was written for the engine
        try:
            got = _render(target, tokenizer, msgs, tools)
        except MissingSpecialToken:
            raise
        except ChatlabError as err:  # the engine refuses this conversation with the written template
            row[conv] = Cell(CANNOT, str(err)[:200], "this conversation", TEMPLATE_ENGINES.get(engine, engine))
            continue
        diffs = differences(want, got)
        row[conv] = Cell(DIFFERS, diffs=diffs) if diffs else Cell(EQUAL)
    return row


def certify(tokenizer: HFTokenizer, template: "str | Path | Resolution",
            conversations: dict | None = None) -> Certificate:
    """Every engine's cells for `template` over `conversations` (default CONVERSATIONS)."""
    source, convs, refs = _references(tokenizer, template, conversations)
    cells: dict[str, dict[str, Cell]] = {}
    for engine in EXPORT_TARGETS:
        target: Resolution | None = source  # the template as that engine reads it
        refusal: CannotExpress | None = None
        tools_refusal: CannotExpress | None = None
        if source.fmt != engine:
            try:
                target = load_template(export_template(source, engine), engine)
            except CannotExpress as err:  # e.g. tools the format cannot write: certify the chat layout alone
                tools_refusal = err
                try:
                    target = load_template(export_template(source, engine, drop_tools=True), engine)
                except CannotExpress as err2:
                    target, refusal = None, err2
        cells[engine] = _row(tokenizer, engine, refs, convs, target, refusal, tools_refusal)
    return Certificate(source.source or source.name, cells, list(source.notes))


def certify_export(tokenizer: HFTokenizer, template: "str | Path | Resolution", engine: str, text: str,
                   drop_tools: bool = False, conversations: dict | None = None) -> Certificate:
    """One engine's cells for `text`, the export of `template` to `engine`."""
    source, convs, refs = _references(tokenizer, template, conversations)
    written = load_template(text, engine)
    has_tools = source.template is not None and source.template.tool_format is not None
    dropped = CannotExpress("exported with --drop-tools: tool definitions, calls and results are left out",
                            "tools (dropped on export)", engine) if drop_tools and has_tools else None
    row = _row(tokenizer, engine, refs, convs, written, tools_refusal=dropped)
    return Certificate(source.source or source.name, {engine: row}, list(source.notes))
