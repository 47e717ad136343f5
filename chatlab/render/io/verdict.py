"""A certificate's verdicts: one per cell (an engine x a conversation), one per engine, one overall.

- "id-equal": the engine's ids are the template's, token for token, with the same stops;
- "differs": they are not; the first difference is named (token position, both sides' tokens,
  its cause from causes.py: bos, special token split, stop words...);
- "cannot express": the engine's format has no way to write a construct of the template (the
  construct and the format are named): nothing was compared, nothing is known to be wrong;
- "not rendered": the template itself does not render the conversation (tools for a template
  without a tool format): there is nothing to compare.

Exit codes (`chatlab certify`, and `export-template --model`'s check): 0 when at least one cell
rendered and none differs, nor cannot be expressed; 1 when any cell differs; 3 when nothing
differs but some cell cannot be expressed, or no cell rendered at all (nothing was certified):
the code `export-template` exits with when its format cannot express the template
(CannotExpress.exit_code); 2 is bad input (the CLI's code for a ChatlabError).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from chatlab._thirdparty import Jsonable
from chatlab.errors import CannotExpress
from chatlab.render.io.causes import Difference

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
    """The verdict over cells: any difference wins; then anything not expressible; then id-equal
    if any cell rendered; else not rendered."""
    seen = {c.verdict for c in cells}
    for verdict in (DIFFERS, CANNOT, EQUAL):
        if verdict in seen:
            return verdict
    return NOT_RENDERED

