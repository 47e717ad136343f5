"""From pieces to ids, with a map of which message and slot every id came from.

Both renderers (built-in templates and the sandboxed Jinja path) produce a list of `Piece`s:
template text, message content, resolved special ids and encoding breaks. Encoding then works
like Hugging Face encoding a rendered string, minus the injection: template text is cut at the
tokenizer's own special tokens; consecutive text (template and content together) is encoded in
one call, so token merges across the boundary happen as they would in the rendered string; but
that call can never produce a control id, so a user who types `<|im_end|>` gets those
characters. A `break` piece ends a run early (ChatGLM3 encodes role line and content apart).
"""
from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, NamedTuple

from chatlab._thirdparty import Jsonable
from chatlab.render.encoder import Encoder


class Piece(NamedTuple):
    kind: str  # "text" | "content" | "special" | "break"
    value: str | int  # str, or the id of a special
    message: int  # index into the messages; -1 for the prefix and the generation prompt
    slot: str  # "prefix", "header", "content", "end", "tools", "tool_call", ...

    @property
    def text(self) -> str:
        """The value of a text, content or break piece."""
        assert isinstance(self.value, str), f"a {self.kind} piece holds an id, not text"
        return self.value

    @property
    def special_id(self) -> int:
        assert isinstance(self.value, int), f"a {self.kind} piece holds text, not an id"
        return self.value


@dataclass(frozen=True)
class SlotSpan:
    start: int  # token positions [start, end)
    end: int
    message_index: int
    slot: str


@dataclass
class Rendered:
    ids: list[int]
    text: str
    slot_map: Callable[[], list[SlotSpan]] = field(repr=False)
    stop_words: list[str]
    stop_ids: list[int]
    rule: str = ""
    reason: str = ""
    template: str = ""
    encoder: Encoder | None = field(default=None, repr=False)
    open_turn: bool = False  # the prompt continues an assistant turn (ReAct after a tool result)

    @cached_property
    def slots(self) -> list[SlotSpan]:
        return self.slot_map()

    @cached_property
    def tokens(self) -> list[str]:
        return self.encoder.tokens(self.ids) if self.encoder else []

    def to_json(self) -> dict[str, Jsonable]:
        return {"ids": self.ids, "tokens": self.tokens, "text": self.text,
                "slots": [s.__dict__ for s in self.slots], "stop_words": self.stop_words,
                "stop_ids": self.stop_ids, "rule": self.rule, "reason": self.reason,
                "template": self.template}


def encode_pieces(encoder: Encoder, pieces: list[Piece]) -> tuple[list[int], str, Callable[[], list[SlotSpan]]]:
    """ids, the equivalent rendered text, and a function that computes the slot map."""
    items: list[tuple[int, int, str] | list[tuple[str, int, str]]] = []  # an id, or a text run
    texts: list[str] = []
    run: list[tuple[str, int, str]] = []

    def close() -> None:
        nonlocal run
        if run:
            items.append(run)
            run = []

    pending: list[Piece] = []  # consecutive template text, matched for specials as one string

    def flush() -> None:
        for part, owner in _split_across(encoder, pending):
            if isinstance(part, int):
                close()
                items.append((part, *owner))
                texts.append(_special_text(encoder, part))
            else:
                run.append((part, *owner))
                texts.append(part)
        pending.clear()

    for piece in pieces:
        kind = piece.kind
        if kind == "text":
            pending.append(piece)
            continue
        flush()
        if kind == "special":
            close()
            items.append((piece.special_id, piece.message, piece.slot))
            texts.append(_special_text(encoder, piece.special_id))
        elif kind == "break":
            close()
        elif piece.value:
            run.append((piece.text, piece.message, piece.slot))
            texts.append(piece.text)
    flush()
    close()
    runs = [item for item in items if isinstance(item, list)]
    mixed = [len({(m, s) for _, m, s in r}) > 1 for r in runs]
    encoded = encoder.encode_many(["".join(t for t, _, _ in r) for r in runs], mixed)
    ids: list[int] = []
    k = 0
    for item in items:
        if isinstance(item, tuple):
            ids.append(item[0])
        else:
            ids.extend(encoded[k][0])
            k += 1
    return ids, "".join(texts), lambda: _slot_map(items, encoded)


def _split_across(encoder: Encoder, pieces: list[Piece]) -> list[tuple[str | int, tuple[int, str]]]:
    """Consecutive template-text pieces cut at special-token text as ONE string, the way a
    rendered prompt is tokenized: `<|` + `user` + `|>` from three template nodes (Ollama's
    `<|{{ .Role }}|>`) is the one id of `<|user|>`, not five pieces. Each output part keeps the
    owner (message, slot) of the piece it starts in; text parts are also cut at piece bounds so
    the slot map still tells template text of different owners apart."""
    if len(pieces) == 1:  # the common case: no boundary to look across
        p = pieces[0]
        return [(part, (p.message, p.slot)) for part in encoder.split_specials(p.text)]
    starts, pos = [], 0
    for p in pieces:
        starts.append(pos)
        pos += len(p.text)
    joined = "".join(p.text for p in pieces)
    out: list[tuple[str | int, tuple[int, str]]] = []

    def owner(at: int) -> tuple[int, str]:
        p = pieces[bisect_right(starts, at) - 1]
        return p.message, p.slot

    def plain(pos: int, end: int) -> None:  # text, cut where a new piece begins
        while pos < end:
            k = bisect_right(starts, pos) - 1
            stop = min(end, starts[k] + len(pieces[k].text))
            out.append((joined[pos:stop], owner(pos)))
            pos = stop

    last = 0
    for m in encoder.added_re.finditer(joined) if encoder.added_re is not None else ():
        plain(last, m.start())
        out.append((encoder.added[m.group()], owner(m.start())))
        last = m.end()
    plain(last, len(joined))
    return out


def _slot_map(items: list, encoded: list) -> list[SlotSpan]:
    """Who owns each id; computed only when asked for (the hot path needs only the ids)."""
    owners: list[tuple[int, str]] = []
    runs = iter(encoded)
    for item in items:
        if isinstance(item, tuple):
            owners.append(item[1:])
            continue
        new, offsets = next(runs)
        if offsets is None:
            owners.extend([(item[0][1], item[0][2])] * len(new))
            continue
        ends, pos = [], 0
        for text, _, _ in item:
            pos += len(text)
            ends.append(pos)
        for start, end in offsets:  # the piece holding the token's last character owns it, so
            # a token merged across a boundary (" hi" after "[INST]") counts as the content's
            j = bisect_right(ends, end - 1 if end > start else max(start - 1, 0))
            owners.append(item[min(j, len(item) - 1)][1:])
    return _spans(owners)


def _special_text(encoder: Encoder, token_id: int) -> str:
    return encoder.special_text.get(token_id) or encoder.tokens([token_id])[0]


def _spans(owners: list[tuple[int, str]]) -> list[SlotSpan]:
    spans: list[SlotSpan] = []
    start = 0
    for i in range(1, len(owners) + 1):
        if i == len(owners) or owners[i] != owners[start]:
            spans.append(SlotSpan(start, i, owners[start][0], owners[start][1]))
            start = i
    return spans
