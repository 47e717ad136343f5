"""From pieces to ids, with a map of which message and slot every id came from. A run of text
(template and content) is encoded in one call, so merges across the boundary happen as in the
rendered string, yet content never yields a control id; a `break` ends a run early."""
from __future__ import annotations

import json
import re
import weakref
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate
from typing import Callable, NamedTuple

from chatlab._thirdparty import Decoder, HFTokenizer, Jsonable, tokenizer_kind
from chatlab.errors import ChatlabError, MissingSpecialToken

_cache: "weakref.WeakKeyDictionary[HFTokenizer, Encoder]" = weakref.WeakKeyDictionary()


def encoder_for(tokenizer: HFTokenizer) -> "Encoder":
    """The (cached) Encoder of a tokenizer: building the plain twin of a fast one is slow."""
    try:
        enc = _cache.get(tokenizer)
    except TypeError:  # not weak-referenceable
        return Encoder(tokenizer)
    if enc is None:
        enc = _cache[tokenizer] = Encoder(tokenizer)
    return enc


def tokenizer_name(tokenizer: HFTokenizer) -> str:
    """The tokenizer as messages name it: its name or path, else its class."""
    return str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)


class Encoder:
    """One interface over the tokenizers chatlab renders for (HF fast and slow, ChatGLM3, Qwen-1)."""

    def __init__(self, tokenizer: HFTokenizer) -> None:
        self.tokenizer = tokenizer
        kind = tokenizer_kind(tokenizer)
        if kind is None:
            raise ChatlabError(f"cannot render for a {type(tokenizer).__name__}; pass a Hugging Face "
                               "tokenizer, a chatlab store tokenizer, or a model name from `chatlab models`")
        self.kind: str = kind
        if kind == "tiktoken":  # Qwen1Tokenizer: its specials are outside the tiktoken ranks
            self.added: dict[str, int] = dict(tokenizer.special_ids)
        else:
            added = getattr(tokenizer, "added_tokens_encoder", {})
            self.added = {str(k): int(v) for k, v in added.items()}
        # Role tokens kept outside the vocabulary (ChatGLM3) are reachable only by name.
        self.extra_specials: dict[str, int] = dict(getattr(getattr(tokenizer, "tokenizer", None),
                                                           "special_tokens", {}) or {})
        self.special_text = {i: t for t, i in {**self.extra_specials, **self.added}.items()}
        alternatives = sorted(self.added, key=len, reverse=True)
        self.added_re = re.compile("|".join(map(re.escape, alternatives))) if alternatives else None
        self.bos_id, self.eos_id, self.bos_token, self.eos_token = (
            getattr(tokenizer, a, None) for a in ("bos_token_id", "eos_token_id", "bos_token", "eos_token"))
        self._plain = self._plain_backend() if self.kind == "fast" else None

    def _plain_backend(self) -> Decoder:
        """A twin of the Rust tokenizer with no added tokens: it cannot match special text."""
        from tokenizers import Tokenizer

        spec = json.loads(self.tokenizer.backend_tokenizer.to_str())
        spec["added_tokens"] = []
        return Tokenizer.from_str(json.dumps(spec))

    @cached_property
    def adds_bos(self) -> bool:
        """Whether encoding a prompt with special tokens on puts the bos id first: what an engine
        that tokenizes the rendered text itself gets (LMDeploy, llama.cpp under Ollama)."""
        if self.bos_id is None:
            return False
        if self.kind in ("fast", "slow"):
            try:
                ids = self.tokenizer.encode("a", add_special_tokens=True)
                return bool(ids) and ids[0] == self.bos_id
            except Exception:  # noqa: BLE001 - an exotic tokenizer: fall back on its flag
                pass
        return bool(getattr(self.tokenizer, "add_bos_token", False))

    def special_id(self, token: str, template: str = "") -> int:
        """The single id of a special token, or a ChatlabError naming the fix."""
        found = self.added.get(token, self.extra_specials.get(token))
        if found is not None:
            return found
        ids = self.encode_plain(token)[0]
        if len(ids) == 1:  # an ordinary single piece ("sop" in a plain vocabulary)
            return ids[0]
        name = tokenizer_name(self.tokenizer)
        raise MissingSpecialToken(f"template {template or '?'} needs the special token {token!r}, which the "
                                  f"tokenizer {name} does not have; choose a template made for this "
                                  "tokenizer (`chatlab templates`) or add the token to the tokenizer", token)

    def split_specials(self, text: str) -> list[str | int]:
        """Template text cut where the tokenizer would match its own added tokens."""
        if self.added_re is None:
            return [text] if text else []
        out: list[str | int] = []
        last = 0
        for m in self.added_re.finditer(text):
            if m.start() > last:
                out.append(text[last:m.start()])
            out.append(self.added[m.group()])
            last = m.end()
        if last < len(text):
            out.append(text[last:])
        return out

    @cached_property
    def _fragments(self) -> tuple[str, set[str], set[str], int, re.Pattern[str] | None]:
        """Lower-cased special texts: all joined, their proper heads and tails, the longest, a regex."""
        texts = sorted({t.lower() for t in (*self.added, *self.extra_specials) if t}, key=len, reverse=True)
        heads = {t[:k] for t in texts for k in range(1, len(t))}
        tails = {t[k:] for t in texts for k in range(1, len(t))}
        pattern = re.compile("|".join(map(re.escape, texts))) if texts else None
        return "\x00".join(texts), heads, tails, max(map(len, texts), default=0), pattern

    def could_form_special(self, text: str) -> bool:
        """Whether `text`, written into template text, could be (part of) a special-token match:
        it holds or lies inside one, or could complete one with its neighbours. Checked
        case-insensitively and JSON-escaped too (templates may upper-case or `tojson` it)."""
        joined, heads, tails, longest, pattern = self._fragments
        if pattern is None or not text:
            return False
        for form in {text, json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1]}:
            s = form.lower()
            if pattern.search(s) or s in joined:
                return True
            for k in range(1, min(len(s), longest) + 1):
                if s[-k:] in heads or s[:k] in tails:
                    return True
        return False

    def encode_plain(self, text: str, offsets: bool = False) -> tuple[list[int], list[tuple[int, int]] | None]:
        """Content encoding: every character is text, never a control id. Char offsets if asked."""
        if not text:
            return [], [] if offsets else None
        if self._plain is not None:  # kind "fast"
            enc = self._plain.encode(text, add_special_tokens=False)
            return enc.ids, (enc.offsets if offsets else None)
        if self.kind == "tiktoken":
            ids = self.tokenizer.enc.encode(text, disallowed_special=())
            if not offsets:
                return ids, None
            _, starts = self.tokenizer.enc.decode_with_offsets(ids)
            return ids, list(zip(starts, starts[1:] + [len(text)]))
        if self.kind == "sentencepiece":
            sp = self.tokenizer.tokenizer.sp_model
            if not offsets:
                return sp.encode(text), None
            pieces = sp.encode(text, out_type=str)
            return [sp.piece_to_id(p) for p in pieces], _piece_offsets(pieces, len(text))
        ids = self.tokenizer.convert_tokens_to_ids(self.tokenizer._tokenize(text))
        if not offsets:
            return ids, None
        ends = [len(self.tokenizer.decode(ids[:k + 1])) for k in range(len(ids))]
        return ids, list(zip([0] + ends[:-1], ends))

    def encode_many(self, texts: list[str],
                    offsets: list[bool]) -> list[tuple[list[int], list[tuple[int, int]] | None]]:
        """encode_plain over several texts; one batched (multi-threaded) call for fast tokenizers."""
        if self._plain is not None and texts:  # kind "fast"
            batch = self._plain.encode_batch(texts, add_special_tokens=False)
            return [(e.ids, e.offsets if want else None) for e, want in zip(batch, offsets)]
        return [self.encode_plain(t, offsets=want) for t, want in zip(texts, offsets)]

    def tokens(self, ids: list[int]) -> list[str]:
        return list(self.tokenizer.convert_ids_to_tokens(list(ids)))

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(list(ids))


def _piece_offsets(pieces: list[str], length: int) -> list[tuple[int, int]]:
    """Char spans of SentencePiece pieces over the text (approximate where the model normalizes
    text; used only to attribute ids to slots)."""
    spans, pos, pending = [], -1, b""
    for piece in pieces:
        start = max(pos, 0)
        if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            pending += bytes([int(piece[3:5], 16)])
            try:
                pending.decode("utf-8")
                pos, pending = pos + 1 + (pos < 0), b""
            except UnicodeDecodeError:
                pass
        else:
            pos += len(piece) + (pos < 0 and not piece.startswith("\u2581"))
        spans.append((min(start, length), min(max(pos, 0), length)))
    return spans


class Piece(NamedTuple):
    kind: str  # "text" | "content" | "special" | "break"
    value: str | int  # str, or the id of a special
    message: int  # index into the messages; -1 for the prefix and the generation prompt
    slot: str  # "prefix", "header", "content", "end", "tools", "tool_call", ...

    @property
    def text(self) -> str:
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
        if run:
            items.append(run.copy())
            run.clear()

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
    """Consecutive template-text pieces cut at special-token text as ONE string (`<|` + `user` +
    `|>` from three Ollama nodes is the one id of `<|user|>`). Each part keeps the owner of the
    piece it starts in; text parts are also cut at piece bounds for the slot map."""
    if len(pieces) == 1:  # the common case: no boundary to look across
        p = pieces[0]
        return [(part, (p.message, p.slot)) for part in encoder.split_specials(p.text)]
    starts = list(accumulate((len(p.text) for p in pieces[:-1]), initial=0))
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
        ends = list(accumulate(len(text) for text, _, _ in item))
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
