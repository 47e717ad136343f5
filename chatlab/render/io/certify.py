"""`certify`: one template, a fixed set of conversations, every engine's semantics, one verdict.

The template (a built-in, or a file in any format) is the reference. For each engine chatlab
models, the template is written in that engine's format (export_template) and read back, so the
render follows that engine's rules (Jinja as vLLM/transformers call it; LMDeploy's config rules
and its own bos; Ollama's collate, Go semantics and its own bos); a template already in an
engine's format is that engine's. Each engine x conversation is id-equal, refused (the reason),
or its differences with their causes (causes.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from chatlab._thirdparty import HFTokenizer, Jsonable
from chatlab.errors import ChatlabError
from chatlab.render.io.causes import Difference, differences
from chatlab.render.io.exporting import export_template
from chatlab.render.io.loaded import LoadedTemplate, load_template
from chatlab.render.io.registry import TARGETS

if TYPE_CHECKING:
    from chatlab.render.ids import Rendered

ENGINES = {"jinja": "vLLM / transformers (Jinja)", "lmdeploy": "LMDeploy", "ollama": "Ollama"}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
CONVERSATIONS: dict[str, tuple[list[dict], list[dict] | None]] = {
    "no system": ([{"role": "user", "content": "Hello"}], None),
    "system": ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}], None),
    "multi-turn": ([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi! How can I help?"},
                    {"role": "user", "content": "What is 2+2?"}], None),
    "tools": ([{"role": "user", "content": "Weather in Paris?"}], TOOLS),
    "tool call + result": ([{"role": "user", "content": "Weather in Paris?"},
                            {"role": "assistant", "content": "", "tool_calls": [CALL]},
                            {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees"}], TOOLS),
    "unicode": ([{"role": "user", "content": "你好 — ünïcode 🎉"}], None),
    "empty content": ([{"role": "user", "content": ""}], None),
}


@dataclass
class Cell:
    verdict: str  # "equal" | "refused" | "different" | "not rendered"
    reason: str = ""
    diffs: list[Difference] = field(default_factory=list)

    def short(self) -> str:
        if self.verdict == "equal":
            return "id-equal"
        if self.verdict == "different":
            d = self.diffs[0]
            return f"differs at {d.a_at} ({', '.join(dict.fromkeys(x.cause for x in self.diffs))})"
        return f"{self.verdict}: {self.reason}"


@dataclass
class Certificate:
    template: str
    cells: dict[str, dict[str, Cell]]  # engine -> conversation -> cell

    @property
    def ok(self) -> bool:
        return all(c.verdict in ("equal", "not rendered") for row in self.cells.values() for c in row.values())

    def format(self) -> str:
        lines = [f"certificate for {self.template!r}: " + ("every engine id-equal" if self.ok else "DIFFERENCES")]
        for engine, row in self.cells.items():
            lines.append(f"{ENGINES.get(engine, engine)}:")
            lines.extend(f"  {conv:20s} {cell.short()}" for conv, cell in row.items())
        return "\n".join(lines)

    def to_json(self) -> dict[str, Jsonable]:
        return {"template": self.template, "ok": self.ok,
                "cells": {e: {c: {"verdict": x.verdict, "reason": x.reason,
                                  "differences": [d.to_json() for d in x.diffs]} for c, x in row.items()}
                          for e, row in self.cells.items()}}


def _render(loaded: LoadedTemplate, tokenizer: HFTokenizer, msgs: list[dict],
            tools: list[dict] | None) -> "Rendered":
    return loaded.resolve(tokenizer).render(msgs, tools=tools)


def certify(tokenizer: HFTokenizer, template: "str | Path | LoadedTemplate",
            conversations: dict | None = None) -> Certificate:
    source = load_template(template)
    convs = conversations or CONVERSATIONS
    cells: dict[str, dict[str, Cell]] = {}
    for engine in TARGETS:
        row: dict[str, Cell] = {}
        as_engine, chat_only, tools_refused = None, None, ""
        try:
            as_engine = source if source.fmt == engine else load_template(export_template(source, engine), engine)
        except ChatlabError as err:  # tools the format cannot write: certify the chat layout alone
            tools_refused = f"export: {str(err)[:160]}"
            try:
                chat_only = load_template(export_template(source, engine, drop_tools=True), engine)
            except ChatlabError as err2:
                cells[engine] = {c: Cell("refused", tools_refused if tools and str(err2) != str(err) else
                                         f"export: {str(err2)[:160]}") for c, (_, tools) in convs.items()}
                continue
        for conv, (msgs, tools) in convs.items():
            uses_tools = bool(tools) or any(m.get("tool_calls") or m.get("role") == "tool" for m in msgs)
            if as_engine is None and uses_tools:
                row[conv] = Cell("refused", tools_refused)
                continue
            try:
                want = _render(source, tokenizer, msgs, tools)
            except ChatlabError as err:  # the template itself cannot render it: nothing to certify
                row[conv] = Cell("not rendered", str(err)[:160])
                continue
            try:
                target = as_engine or chat_only
                assert target is not None  # one of the two loaded above, or the engine was skipped
                got = _render(target, tokenizer, msgs, tools)
            except ChatlabError as err:
                row[conv] = Cell("refused", str(err)[:160])
                continue
            diffs = differences(want, got)
            token_diffs = [d for d in diffs if d.cause != "stop words"]
            row[conv] = Cell("equal") if not token_diffs else Cell("different", diffs=diffs)
        cells[engine] = row
    return Certificate(source.source or source.name, cells)
