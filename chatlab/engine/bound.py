"""A prompt that cannot fit is refused before it is tokenized: tokenizing a huge prompt builds
work lists worth many times its text, and the allocator keeps that high-water mark after the 400.

Three lower bounds on the tokens of a text, each sound (it never refuses what would fit):
- characters: no token covers more than `max_chars` characters, so C characters become at least
  C / max_chars tokens;
- bytes: no token decodes to more than `max_bytes` bytes, so B bytes of UTF-8 become at least
  B / max_bytes tokens (dense text such as emoji: one character, four bytes);
- forced cuts, for byte-level vocabularies (GPT-2's, SmolLM2's, Qwen's, tiktoken's): every
  tokenization cuts the text's bytes into tokens of the vocabulary, so between two adjacent
  bytes that no token holds side by side (no token holds a letter and the space after it)
  there is a token boundary, whatever the tokenizer's pre-tokenizer and merges do. Cut there,
  the text falls into segments; a segment of L bytes is at least L / max_bytes tokens.

They read the text as the tokenizer does, after its own normalizer (Qwen's NFC composes
characters); they assume the template writes a message's content verbatim, less whitespace at
its ends (Jinja templates may trim it, so the bounds read the stripped text). A content sits
inside template text, and its first or last segment may share a token with a neighbouring
content through the template text between them: at most one token lost per content after the
first, which the forced-cut bound subtracts.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol, Sequence, runtime_checkable

import numpy as np
import numpy.typing as npt

from chatlab._thirdparty import HFTokenizer
from chatlab.errors import ContextLengthError

if TYPE_CHECKING:
    from tiktoken import Encoding
    from tokenizers import Tokenizer

CHUNK = 1 << 18  # bytes of text read at once by the forced-cut bound: its arrays stay small


@runtime_checkable
class TiktokenBacked(Protocol):
    """A tokenizer over a tiktoken encoding (chatlab.models.qwen1's): raw byte tokens."""

    @property
    def enc(self) -> Encoding: ...


@runtime_checkable
class RustBacked(Protocol):
    """A Hugging Face fast tokenizer, over the `tokenizers` library's Rust tokenizer."""

    @property
    def backend_tokenizer(self) -> Tokenizer: ...


@runtime_checkable
class WithAddedTokens(Protocol):
    """A Hugging Face tokenizer: its added tokens, matched in raw text, by their text."""

    @property
    def added_tokens_encoder(self) -> dict[str, int]: ...


class TokenBound:
    """What a tokenizer's vocabulary says about a text's tokens before the text is tokenized:
    the longest token in characters and in bytes (None: unknown, no bound), and for a byte-level
    vocabulary which pairs of adjacent bytes some token holds (`joins[a * 256 + b]`)."""

    def __init__(self, max_chars: int | None, max_bytes: int | None,
                 joins: npt.NDArray[np.bool_] | None = None,
                 normalize: Callable[[str], str] | None = None) -> None:
        self.max_chars, self.max_bytes, self.joins, self.normalize = max_chars, max_bytes, joins, normalize

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
        normalizer = tokenizer.backend_tokenizer.normalizer if isinstance(tokenizer, RustBacked) else None
        return cls(max_token_chars(tokenizer), max(map(len, tokens)), joins,
                   normalizer.normalize_str if normalizer is not None else None)

    def tokens_at_least(self, texts: Sequence[str], enough: int | None = None) -> tuple[int, str]:
        """(a lower bound on the tokens `texts` become in one prompt, the size it was read from):
        the largest of the three bounds, or the first that reaches `enough`. With `enough`,
        texts of fewer bytes are not read: no bound can reach it (a token holds a byte at least)."""
        if enough is not None and sum(map(utf8_len, texts)) < enough:
            return 0, ""
        if self.normalize is not None:
            texts = [self.normalize(t) for t in texts]
        texts = [s for s in (t.strip() for t in texts) if s]
        chars, nbytes = sum(map(len, texts)), sum(map(utf8_len, texts))
        best = (0, "")
        for n, per_token, what in ((chars, self.max_chars, "characters"),
                                   (nbytes, self.max_bytes, "bytes of UTF-8 text")):
            if per_token and n and -(-n // per_token) > best[0]:
                best = (-(-n // per_token), f"{n:,} {what}")
                if enough is not None and best[0] >= enough:
                    return best
        if self.joins is not None and self.max_bytes and (enough is None or nbytes >= enough):
            cut = sum(map(self.segments, texts)) - (len(texts) - 1)
            if cut > best[0]:
                best = (cut, f"{nbytes:,} bytes of UTF-8 text")
        return best

    def segments(self, text: str) -> int:
        """The forced-cut bound of one text: the sum over its segments of L / max_bytes."""
        assert self.joins is not None and self.max_bytes
        data = text.encode("utf-8", "surrogatepass")
        longest, tokens, start = self.max_bytes, 0, 0  # `start`: first byte of the open segment
        for at in range(0, len(data) - 1, CHUNK):
            chunk = np.frombuffer(data, np.uint8, min(CHUNK, len(data) - 1 - at) + 1, at).astype(np.uint16)
            # byte i of the text ends a segment where the pair (i, i + 1) is in no token
            ends = at + np.flatnonzero(~self.joins[chunk[:-1] << 8 | chunk[1:]])
            if ends.size:
                lengths = np.diff(ends, prepend=start - 1)
                tokens += int(((lengths + longest - 1) // longest).sum())
                start = int(ends[-1]) + 1
        return tokens + -(-(len(data) - start) // longest)


def token_bytes(tokenizer: HFTokenizer) -> list[bytes] | None:
    """The bytes each token of a byte-level vocabulary stands for, or None where the vocabulary
    is not byte-level (SentencePiece's, a stand-in's). A Hugging Face vocabulary writes each
    byte as a character of GPT-2's table; its added tokens match raw text, so they stand for
    their text's UTF-8."""
    if isinstance(tokenizer, TiktokenBacked):
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
    to_bytes = {ord(c): b for c, b in _byte_table().items()}
    to_bytes.update((b, 0xFFFF) for b in range(256) if chr(b) not in _byte_table())
    try:
        pieces = [piece.translate(to_bytes).encode("latin-1") for piece in vocab if piece not in added]
    except UnicodeEncodeError:
        return None
    return [*pieces, *(s.encode("utf-8") for s in added)]


def max_token_chars(tokenizer: HFTokenizer) -> int | None:
    """The longest token of the vocabulary in characters (an upper bound: for byte-level BPE
    the token's string has one character per byte), or None when the vocabulary is unreadable."""
    try:
        if isinstance(tokenizer, TiktokenBacked):
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
