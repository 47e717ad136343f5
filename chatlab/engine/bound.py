"""A prompt that cannot fit is refused before it is tokenized, from its length in characters.

Tokenizing a 2 MB prompt builds ids, offsets and merge work lists worth many times its text, and
the allocator keeps that high-water mark after the 400: a few such requests took a server from
2.0 to 2.8 GB. The bound is sound (it never refuses what would fit): no token of the vocabulary
covers more than `max_token_chars` characters, so a text of C characters becomes at least
C / max_token_chars tokens. (It assumes the tokenizer does not delete characters before
splitting; the byte-level BPE and SentencePiece tokenizers of chat models do not.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from chatlab._thirdparty import HFTokenizer
from chatlab.errors import ChatlabError

if TYPE_CHECKING:
    from tiktoken import Encoding


class ContextWindow(Protocol):
    """What the bound reads of an engine: its window, and its longest token in characters
    (None: unknown, so no bound)."""

    @property
    def context_length(self) -> int: ...
    @property
    def max_token_chars(self) -> int | None: ...


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


def fits_before_tokenizing(engine: ContextWindow, chars: int, where: str) -> None:
    """ChatlabError (param `where`) when `chars` characters cannot fit the context window."""
    per_token = engine.max_token_chars
    if not per_token:
        return
    at_least = -(-chars // per_token)
    if at_least >= engine.context_length:
        raise ChatlabError(f"{where} has {chars:,} characters, at least {at_least:,} tokens, which "
                           f"cannot fit the context window of {engine.context_length:,} tokens; "
                           "send fewer or shorter messages", param=where)
