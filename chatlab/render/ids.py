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

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from chatlab.render.encoder import Encoder


class Piece(NamedTuple):
    kind: str  # "text" | "content" | "special" | "break"
    value: Any  # str, or the id of a special
    message: int  # index into the messages; -1 for the prefix and the generation prompt
    slot: str  # "prefix", "header", "content", "end", "tools", "tool_call", ...


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
    slots: list[SlotSpan]
    stop_words: list[str]
    stop_ids: list[int]
    rule: str = ""
    reason: str = ""
    template: str = ""
    encoder: Encoder | None = field(default=None, repr=False)
    open_turn: bool = False  # the prompt continues an assistant turn (ReAct after a tool result)

    @cached_property
    def tokens(self) -> list[str]:
        return self.encoder.tokens(self.ids) if self.encoder else []

    def to_json(self) -> dict[str, Any]:
        return {"ids": self.ids, "tokens": self.tokens, "text": self.text,
                "slots": [s.__dict__ for s in self.slots], "stop_words": self.stop_words,
                "stop_ids": self.stop_ids, "rule": self.rule, "reason": self.reason,
                "template": self.template}


def encode_pieces(encoder: Encoder, pieces: list[Piece]) -> tuple[list[int], str, list[SlotSpan]]:
    """ids, the equivalent rendered text, and the slot map."""
    ids: list[int] = []
    owners: list[tuple[int, str]] = []
    texts: list[str] = []
    run: list[tuple[str, int, str]] = []  # (text, message, slot) of the pending text run

    def flush() -> None:
        if not run:
            return
        joined = "".join(t for t, _, _ in run)
        mixed = len({(m, s) for _, m, s in run}) > 1
        new, offsets = encoder.encode_plain(joined, offsets=mixed)
        ids.extend(new)
        if not mixed:
            owners.extend([(run[0][1], run[0][2])] * len(new))
        else:
            bounds, pos = [], 0
            for text, m, s in run:
                pos += len(text)
                bounds.append((pos, m, s))
            for start, end in offsets or []:
                anchor = start if end > start else max(start - 1, 0)
                owner = next(((m, s) for b, m, s in bounds if anchor < b), bounds[-1][1:])
                owners.append(owner)
        run.clear()

    for piece in pieces:
        if piece.kind == "special":
            flush()
            ids.append(piece.value)
            owners.append((piece.message, piece.slot))
            texts.append(_special_text(encoder, piece.value))
        elif piece.kind == "break":
            flush()
        elif piece.kind == "text":
            for part in encoder.split_specials(piece.value):
                if isinstance(part, int):
                    flush()
                    ids.append(part)
                    owners.append((piece.message, piece.slot))
                    texts.append(_special_text(encoder, part))
                else:
                    run.append((part, piece.message, piece.slot))
                    texts.append(part)
        elif piece.value:
            run.append((piece.value, piece.message, piece.slot))
            texts.append(piece.value)
    flush()
    return ids, "".join(texts), _spans(owners)


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
