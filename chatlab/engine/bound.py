"""A prompt that cannot fit is refused before it is tokenized, from its length in characters
and in UTF-8 bytes: tokenizing a huge prompt builds work lists worth many times its text, and the
allocator keeps that high-water mark after the 400.

The bound is sound (it never refuses what would fit): no token covers more than
`max_token_chars` characters (or `max_token_bytes` bytes), so C characters (B bytes) become at
least C / max_token_chars (B / max_token_bytes) tokens. Bytes catch dense text such as emoji,
one character but four bytes. (It assumes the tokenizer does not delete characters before
splitting; the byte-level BPE and SentencePiece tokenizers of chat models do not.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from chatlab._thirdparty import HFTokenizer
from chatlab.errors import ContextLengthError

if TYPE_CHECKING:
    from tiktoken import Encoding


class ContextWindow(Protocol):
    """What the bound reads of an engine: its window, and its longest token in characters and
    in bytes (None: unknown, so no bound)."""

    @property
    def context_length(self) -> int: ...
    @property
    def max_token_chars(self) -> int | None: ...
    @property
    def max_token_bytes(self) -> int | None: ...


@runtime_checkable
class TiktokenBacked(Protocol):
    """A tokenizer over a tiktoken encoding (chatlab.models.qwen1's): raw byte tokens."""

    @property
    def enc(self) -> Encoding: ...


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


def _byte_alphabet() -> set[str]:
    """The 256 characters byte-level BPE writes bytes as (GPT-2's table): printable Latin-1
    bytes stand for themselves, the others for chr(256 + n)."""
    kept = [*range(33, 127), *range(161, 173), *range(174, 256)]
    return {*map(chr, kept), *(chr(256 + n) for n in range(256 - len(kept)))}


def max_token_bytes(tokenizer: HFTokenizer) -> int | None:
    """The most bytes of text one token decodes to (an upper bound), or None when unknown. A
    byte-level vocabulary writes one character per byte; any other token decodes to no more
    bytes than its own UTF-8 spelling (SentencePiece's '▁' is three bytes for one space)."""
    if isinstance(tokenizer, TiktokenBacked):  # raw byte tokens: max_token_chars counted bytes
        return max_token_chars(tokenizer)
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # a stand-in tokenizer without a vocabulary: no bound
        return None
    alphabet = _byte_alphabet()
    if all(set(piece) <= alphabet for piece in vocab):
        return max(map(len, vocab), default=0) or None
    return max((len(piece.encode("utf-8", "surrogatepass")) for piece in vocab), default=0) or None


def fits_before_tokenizing(engine: ContextWindow, chars: int, where: str, nbytes: int = 0) -> None:
    """ContextLengthError (param `where`) when `chars` characters, or `nbytes` UTF-8 bytes,
    cannot fit the context window."""
    window = engine.context_length
    for n, per_token, what in ((chars, engine.max_token_chars, "characters"),
                               (nbytes, engine.max_token_bytes, "bytes of UTF-8 text")):
        if per_token and n and -(-n // per_token) >= window:
            raise ContextLengthError(f"{where} has {n:,} {what}, at least {-(-n // per_token):,} "
                                     f"tokens, which cannot fit the context window of {window:,} "
                                     "tokens; send fewer or shorter messages", param=where)


def utf8_len(text: str) -> int:
    """The UTF-8 length of `text` (ASCII text is counted without encoding it)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))
