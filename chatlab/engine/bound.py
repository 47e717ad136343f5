"""A prompt that cannot fit is refused before it is tokenized: tokenizing a huge prompt builds
work lists worth many times its text, and the allocator keeps that high-water mark after the 400.

The bounds are lower bounds on the tokens of a text, so they never refuse what would fit:
- a byte-level vocabulary cuts the text into tokens at least between two adjacent bytes that no
  token holds side by side; a segment of L bytes between such cuts is at least L / max_bytes
  tokens. A byte without a token of its own is dropped (Hugging Face's BPE) or becomes the
  unknown token: leaving such bytes out first counts no more.
- any other vocabulary (SentencePiece's): C characters and B bytes are at least C / max_chars
  and B / max_bytes tokens (assuming the tokenizer deletes no character).
The text is read after the tokenizer's own normalizer, stripped at its ends (templates may trim
it); a content may share one token with the template text around it, which the cut bound
subtracts per content after the first.
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np
import numpy.typing as npt

from chatlab._thirdparty import HFTokenizer, tokenizer_kind
from chatlab.errors import ContextLengthError

CHUNK = 1 << 18  # bytes of text read at once by the forced-cut bound: its arrays stay small


@runtime_checkable
class WithAddedTokens(Protocol):
    """A Hugging Face tokenizer: its added tokens, matched in raw text, by their text."""

    @property
    def added_tokens_encoder(self) -> dict[str, int]: ...


class TokenBound:
    """A vocabulary's longest token in characters and bytes (None: no bound); for a byte-level
    one, which adjacent byte pairs some token holds (`joins[a * 256 + b]`) and which bytes have
    a token of their own (`kept`); and the tokenizer's normalizer."""

    def __init__(self, max_chars: int | None, max_bytes: int | None,
                 joins: npt.NDArray[np.bool_] | None = None, kept: npt.NDArray[np.bool_] | None = None,
                 normalize: Callable[[str], str] | None = None) -> None:
        self.max_chars, self.max_bytes = max_chars, max_bytes
        self.joins, self.kept, self.normalize = joins, kept, normalize

    @classmethod
    def of(cls, tokenizer: HFTokenizer) -> TokenBound:
        tokens = token_bytes(tokenizer)
        if not tokens:
            return cls(max_token_chars(tokenizer), _spelled_bytes(tokenizer))
        joined = np.frombuffer(b"".join(tokens), np.uint8).astype(np.uint16)
        inside = np.ones(len(joined) - 1, dtype=np.bool_)
        inside[np.cumsum([len(t) for t in tokens])[:-1] - 1] = False  # a token's last byte, the next one's first
        joins = np.zeros(1 << 16, dtype=np.bool_)
        joins[(joined[:-1] << 8 | joined[1:])[inside]] = True
        kept = np.zeros(256, dtype=np.bool_)
        kept[[t[0] for t in tokens if len(t) == 1]] = True
        normalizer = tokenizer.backend_tokenizer.normalizer if tokenizer_kind(tokenizer) == "fast" else None
        longest = max(map(len, tokens))  # in bytes, so in characters too
        return cls(longest, longest, joins, kept, normalizer.normalize_str if normalizer is not None else None)

    def tokens_at_least(self, texts: Sequence[str], enough: int | None = None) -> tuple[int, str]:
        """(a lower bound on the tokens `texts` become in one prompt, the size it was read
        from). With `enough`, texts of fewer bytes are not read: no bound could reach it."""
        if enough is not None and sum(map(utf8_len, texts)) < enough:
            return 0, ""
        if self.normalize is not None:
            texts = [self.normalize(t) for t in texts]
        texts = [s for s in (t.strip() for t in texts) if s]
        if not texts:
            return 0, ""
        nbytes = sum(map(utf8_len, texts))
        if self.joins is not None:  # its segments hold at least as much as the bytes bound
            return max(sum(map(self.cut_bound, texts)) - (len(texts) - 1), 0), f"{nbytes:,} bytes of UTF-8 text"
        best = (0, "")
        for n, per_token, what in ((sum(map(len, texts)), self.max_chars, "characters"),
                                   (nbytes, self.max_bytes, "bytes of UTF-8 text")):
            if per_token and -(-n // per_token) > best[0]:
                best = (-(-n // per_token), f"{n:,} {what}")
        return best

    def cut_bound(self, text: str) -> int:
        """The forced-cut bound of one text: the sum over its segments of L / max_bytes."""
        assert self.joins is not None and self.kept is not None and self.max_bytes
        data = text.encode("utf-8", "surrogatepass")
        longest, tokens = self.max_bytes, 0
        run, last = 0, np.empty(0, np.uint16)  # the open segment: its length, its last kept byte
        for at in range(0, len(data), CHUNK):
            chunk = np.frombuffer(data, np.uint8, min(CHUNK, len(data) - at), at)
            seq = np.concatenate((last, chunk[self.kept[chunk]])).astype(np.uint16, copy=False)
            if len(seq) == len(last):  # nothing in this chunk the tokenizer keeps
                continue
            # the segment ends at byte i of seq where no token holds the pair (i, i + 1)
            ends = np.flatnonzero(~self.joins[seq[:-1] << 8 | seq[1:]])
            if ends.size:
                lengths = np.diff(ends, prepend=len(last) - 1 - run)
                tokens += int(((lengths + longest - 1) // longest).sum())
                run = len(seq) - 1 - int(ends[-1])
            else:
                run += len(seq) - len(last)
            last = seq[-1:]
        return tokens + -(-run // longest)


def token_bytes(tokenizer: HFTokenizer) -> list[bytes] | None:
    """The bytes each token of a byte-level vocabulary stands for, or None where the vocabulary
    is not byte-level (SentencePiece's, a stand-in's). A Hugging Face vocabulary writes each
    byte as a character of GPT-2's table; its added tokens match raw text, so they stand for
    their text's UTF-8."""
    if tokenizer_kind(tokenizer) == "tiktoken":
        enc = tokenizer.enc
        return [*map(enc.decode_single_token_bytes, range(enc.n_vocab)),
                *(s.encode("utf-8") for s in enc.special_tokens_set)]
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # a stand-in tokenizer without a vocabulary: no bound
        return None
    added = set(tokenizer.added_tokens_encoder) if isinstance(tokenizer, WithAddedTokens) else set()
    # each character of the table to its byte, any other character below 256 out of Latin-1's
    # reach, so that encoding to Latin-1 fails for a piece that is not byte-level
    table = _byte_table()
    to_bytes = {ord(c): b for c, b in table.items()}
    to_bytes.update((b, 0xFFFF) for b in range(256) if chr(b) not in table)
    try:
        pieces = [piece.translate(to_bytes).encode("latin-1") for piece in vocab if piece not in added]
    except UnicodeEncodeError:
        return None
    return [*pieces, *(s.encode("utf-8") for s in added)]


def max_token_chars(tokenizer: HFTokenizer) -> int | None:
    """The longest token of the vocabulary in characters (an upper bound: for byte-level BPE
    the token's string has one character per byte), or None when the vocabulary is unreadable."""
    try:
        if tokenizer_kind(tokenizer) == "tiktoken":
            enc = tokenizer.enc
            longest = max(len(enc.decode_single_token_bytes(i)) for i in range(enc.n_vocab))
            return max([longest, *map(len, enc.special_tokens_set)])
        vocab = tokenizer.get_vocab()
    except Exception:  # a stand-in tokenizer without a vocabulary: no bound, tokenize as before
        return None
    return max(map(len, vocab), default=0) or None


def _byte_table() -> dict[str, int]:
    """GPT-2's table of the 256 characters byte-level BPE writes bytes as, each to its byte:
    printable Latin-1 bytes stand for themselves, the others for chr(256 + n)."""
    kept = [*range(33, 127), *range(161, 173), *range(174, 256)]
    others = [b for b in range(256) if b not in kept]
    return {**{chr(b): b for b in kept}, **{chr(256 + n): b for n, b in enumerate(others)}}


def _spelled_bytes(tokenizer: HFTokenizer) -> int | None:
    """The most bytes of text one token of a vocabulary that is not byte-level decodes to (an
    upper bound): no more than its own UTF-8 spelling (SentencePiece's '▁' is three bytes for
    one space); None when the vocabulary is unreadable."""
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # a stand-in tokenizer without a vocabulary: no bound
        return None
    return max((len(piece.encode("utf-8", "surrogatepass")) for piece in vocab), default=0) or None


class ContextWindow(Protocol):
    """What the bound reads of an engine: its window, and its vocabulary's TokenBound."""

    @property
    def context_length(self) -> int: ...
    @property
    def token_bound(self) -> TokenBound: ...


def fits_before_tokenizing(engine: ContextWindow, texts: Sequence[str], where: str) -> None:
    """ContextLengthError (param `where`) when `texts`, the contents one prompt writes
    verbatim, cannot fit the context window."""
    window = engine.context_length
    tokens, size = engine.token_bound.tokens_at_least(texts, window)
    if tokens >= window:
        raise ContextLengthError(f"{where} has {size}, at least {tokens:,} tokens, which cannot fit "
                                 f"the context window of {window:,} tokens; send fewer or shorter "
                                 "messages", param=where)


def utf8_len(text: str) -> int:
    """The UTF-8 length of `text` (ASCII text is counted without encoding it)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))
