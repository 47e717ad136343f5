"""Where two renders of one chat differ, whose tokens they are, and why: the ids are aligned
(difflib) and each unequal block gets a cause; stop words and ids are compared too."""
from __future__ import annotations

from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path

from chatlab._thirdparty import HFTokenizer, Jsonable
from chatlab.render.compose import Resolution
from chatlab.render.encoder import Rendered
from chatlab.render.io.formats import load_template

CONTEXT = 4  # tokens shown before the difference (and as many after)


@dataclass
class Difference:
    cause: str
    a_at: int  # token positions where the block starts on each side
    b_at: int
    a_tokens: list[str] = field(default_factory=list)
    b_tokens: list[str] = field(default_factory=list)
    a_owner: str = ""
    b_owner: str = ""

    def line(self, names: tuple[str, str]) -> str:
        a = " ".join(map(repr, self.a_tokens)) or "(nothing)"
        b = " ".join(map(repr, self.b_tokens)) or "(nothing)"
        return (f"[{self.cause}] {names[0]} token {self.a_at}: {a} ({self.a_owner}) | "
                f"{names[1]} token {self.b_at}: {b} ({self.b_owner})")

    def to_json(self) -> dict[str, Jsonable]:
        return dict(self.__dict__)


def owner(r: Rendered, k: int) -> str:
    """Who wrote token k: a message's slot, the template, or a default system prompt."""
    if k >= len(r.ids):
        return "past the end"
    span = next((s for s in r.slots if s.start <= k < s.end), None)
    if span is None:
        return "?"
    if span.message_index < 0:  # prefix, default system prompt, generation prompt, engine bos
        if span.slot == "system":
            return "the default system prompt"
        return "the engine's bos" if span.slot == "bos" else f"the template / {span.slot}"
    return f"message {span.message_index} / {span.slot}"


def _messages(r: Rendered, start: int, end: int) -> set[int]:
    """The message indices that wrote tokens start..end (-1: the template's own parts)."""
    return {s.message_index for s in r.slots if s.start < end and start < s.end}


def _merged(a: Rendered, b: Rendered, i1: int, i2: int, j1: int, j2: int) -> bool:
    """One side's block lies inside message m and it wrote no message m+1, while the other's
    belongs to messages m and m+1 (Ollama's collate)."""
    for (x, x1, x2), (y, y1, y2) in (((a, i1, i2), (b, j1, j2)), ((b, j1, j2), (a, i1, i2))):
        inside = _messages(x, x1, x2) if x2 > x1 else _messages(x, x1 - 1, x1) & _messages(x, x1, x1 + 1)
        if len(inside) != 1 or (m := next(iter(inside))) < 0:
            continue
        if _messages(y, y1, y2) <= {m, m + 1} and m + 1 in _messages(y, 0, len(y.ids)) \
                and m + 1 not in _messages(x, 0, len(x.ids)):
            return True
    return False


def _cause(a: Rendered, b: Rendered, i1: int, i2: int, j1: int, j2: int) -> str:
    ea, eb = a.encoder, b.encoder
    xa, xb = a.ids[i1:i2], b.ids[j1:j2]
    bos = {e.bos_id for e in (ea, eb) if e is not None and e.bos_id is not None}
    if (not xa and xb and set(xb) <= bos) or (not xb and xa and set(xa) <= bos):
        return "bos"
    owners = {owner(a, k) for k in range(i1, i2)} | {owner(b, k) for k in range(j1, j2)}
    if "the default system prompt" in owners:
        return "default system prompt"
    if any("tool_call" in o or "/ tools" in o for o in owners) and (not xa or not xb):
        return "dropped tool call"
    if _merged(a, b, i1, i2, j1, j2):
        return "merged consecutive turns"
    ta, tb = ea.decode(xa) if ea else "", eb.decode(xb) if eb else ""
    if ta == tb:
        specials = [len([i for i in x if i in e.special_text]) for x, e in ((xa, ea), (xb, eb)) if e is not None]
        return "special token split" if len(set(specials)) > 1 else "same text, other tokens"
    if "".join(ta.split()) == "".join(tb.split()):
        return "whitespace/newline"
    return "text"


def differences(a: Rendered, b: Rendered) -> list[Difference]:
    """All unequal blocks of the two id lists, in order, each with its cause."""
    out: list[Difference] = []
    ops = SequenceMatcher(None, a.ids, b.ids, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            continue
        out.append(Difference(_cause(a, b, i1, i2, j1, j2), i1, j1, a.tokens[i1:i2], b.tokens[j1:j2],
                              owner(a, i1) if i2 > i1 else f"after {owner(a, max(i1 - 1, 0))}",
                              owner(b, j1) if j2 > j1 else f"after {owner(b, max(j1 - 1, 0))}"))
    if set(a.stop_ids) != set(b.stop_ids) or set(a.stop_words) != set(b.stop_words):
        out.append(Difference("stop words", len(a.ids), len(b.ids),
                              [*a.stop_words, *map(str, sorted(a.stop_ids))],
                              [*b.stop_words, *map(str, sorted(b.stop_ids))], "stop words / ids", "stop words / ids"))
    return out


@dataclass
class TemplateDiff:
    equal: bool
    index: int | None  # the first differing token; None when equal
    a: Rendered
    b: Rendered
    names: tuple[str, str] = ("a", "b")
    differences: list[Difference] = field(default_factory=list)

    def groups(self) -> dict[str, list[Difference]]:
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
                f"      token {k} is from {owner(r, k)}" + (f", id {r.ids[k]}" if k < len(r.ids) else "")]

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


def _resolution(x: "str | Path | Resolution", tokenizer: HFTokenizer) -> tuple[Resolution, str]:
    if isinstance(x, Resolution) and x.tokenizer is not None:
        return x, x.name
    loaded = load_template(x)
    return loaded.for_tokenizer(tokenizer), loaded.source or loaded.name


def diff_templates(tokenizer: HFTokenizer, messages: Jsonable, a: "str | Path | Resolution",
                   b: "str | Path | Resolution", tools: Jsonable = None,
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
