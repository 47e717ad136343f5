"""Render one chat with two templates and report where their ids differ, whose they are, and why.

    d = diff_templates(tokenizer, messages, "chatml", "data/templates/x.json")
    d.equal, d.index, print(d)   # "first difference at token 12", context, message/slot owners
    d.differences, d.groups()    # every difference (causes.py), so a bos cannot hide the real one

`a` and `b` are anything load_template accepts, or Resolutions. The report names, for each
side, the token at the difference with a few tokens around it, and the message index and slot
(header, content, end, system, ...) that token was rendered from (Rendered.slots).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from chatlab._thirdparty import HFTokenizer, Jsonable
from chatlab.render.ids import Rendered
from chatlab.render.io.causes import Difference, differences
from chatlab.render.io.causes import owner as owner_of
from chatlab.render.io.loaded import load_template
from chatlab.render.io.readers import LoadedTemplate
from chatlab.render.resolve import Resolution, of_loaded

CONTEXT = 4  # tokens shown before the difference (and as many after)


@dataclass
class TemplateDiff:
    equal: bool
    index: int | None  # the first differing token; None when equal
    a: Rendered
    b: Rendered
    names: tuple[str, str] = ("a", "b")

    differences: list[Difference] = field(default_factory=list)

    def groups(self) -> dict[str, list[Difference]]:
        """The differences by cause, in order of first appearance."""
        out: dict[str, list[Difference]] = {}
        for d in self.differences:
            out.setdefault(d.cause, []).append(d)
        return out

    def side(self, label: str, r: Rendered) -> list[str]:
        k = self.index or 0
        toks = r.tokens
        before = " ".join(repr(t) for t in toks[max(0, k - CONTEXT):k])
        at = repr(toks[k]) if k < len(toks) else "<end>"
        after = " ".join(repr(t) for t in toks[k + 1:k + 1 + CONTEXT])
        return [f"  {label} ({len(r.ids)} tokens): ... {before} [{at}] {after} ...",
                f"      token {k} is from {owner_of(r, k)}" + (f", id {r.ids[k]}" if k < len(r.ids) else "")]

    def __str__(self) -> str:
        a, b = self.names
        if self.equal:
            return f"{a} and {b} give the same {len(self.a.ids)} ids"
        lines = [f"first difference at token {self.index} ({a} vs {b})", *self.side(a, self.a), *self.side(b, self.b)]
        if self.differences:
            lines.append(f"all differences ({len(self.differences)}), by cause:")
            for cause, diffs in self.groups().items():
                lines.append(f"  {cause}: {len(diffs)}")
                lines.extend(f"    {d.line(self.names)}" for d in diffs[:8])
        return "\n".join(lines)


def _resolution(x: "str | Path | LoadedTemplate | Resolution", tokenizer: HFTokenizer) -> tuple["Resolution", str]:
    if isinstance(x, Resolution):
        return x, x.name
    loaded = load_template(x)
    return of_loaded(loaded, tokenizer), loaded.source or loaded.name


def diff_templates(tokenizer: HFTokenizer, messages: Jsonable, a: "str | Path | LoadedTemplate | Resolution",
                   b: "str | Path | LoadedTemplate | Resolution",
                   tools: Jsonable = None,
                   add_generation_prompt: bool = True) -> TemplateDiff:
    (ra, na), (rb, nb) = _resolution(a, tokenizer), _resolution(b, tokenizer)
    if na == nb:
        na, nb = f"a:{na}", f"b:{nb}"
    x = ra.render(messages, tools=tools, add_generation_prompt=add_generation_prompt)
    y = rb.render(messages, tools=tools, add_generation_prompt=add_generation_prompt)
    k = next((i for i, (p, q) in enumerate(zip(x.ids, y.ids)) if p != q), None)
    if k is None and len(x.ids) != len(y.ids):
        k = min(len(x.ids), len(y.ids))  # one is a prefix of the other
    return TemplateDiff(k is None, k, x, y, (na, nb), differences(x, y) if k is not None else [])
