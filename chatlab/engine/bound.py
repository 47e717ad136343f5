"""A prompt that cannot fit is refused before it is tokenized (tokenizing a huge prompt leaves a
high-water mark in the allocator). The bounds are lower bounds, so they never refuse what fits:
byte-level vocabularies by where no token can join two bytes, others by the longest token. Texts
are read normalized and stripped; each content after the first may share a token with the template."""
from __future__ import annotations

from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np
import numpy.typing as npt

from chatlab._thirdparty import HFTokenizer, tokenizer_kind
from chatlab.errors import ContextLengthError
from chatlab.generate.logprobs import byte_table

CHUNK = 1 << 18  # bytes of text read at once by the forced-cut bound: its arrays stay small


@runtime_checkable
class WithAddedTokens(Protocol):
    """A Hugging Face tokenizer: its added tokens, matched in raw text, by their text."""

    @property
    def added_tokens_encoder(self) -> dict[str, int]: ...


class TokenBound:
    """A vocabulary's longest token in characters and bytes (None: no bound); for a byte-level
    one, the byte pairs some token holds (`joins[a * 256 + b]`) and the bytes it keeps."""

    def __init__(self, max_chars: int | None, max_bytes: int | None,
                 joins: npt.NDArray[np.bool_] | None = None, kept: npt.NDArray[np.bool_] | None = None,
                 normalize: Callable[[str], str] | None = None) -> None:
        self.max_chars, self.max_bytes = max_chars, max_bytes
        self.joins, self.kept, self.normalize = joins, kept, normalize

    @classmethod
    def of(cls, tokenizer: HFTokenizer) -> TokenBound:
        tokens = token_bytes(tokenizer)
        if not tokens:
            return cls(*_longest_token(tokenizer))
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
    """The bytes each token of a byte-level vocabulary stands for (None: not byte-level)."""
    if tokenizer_kind(tokenizer) == "tiktoken":
        enc = tokenizer.enc
        return [*map(enc.decode_single_token_bytes, range(enc.n_vocab)),
                *(s.encode("utf-8") for s in enc.special_tokens_set)]
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # a stand-in tokenizer without a vocabulary: no bound
        return None
    added = set(tokenizer.added_tokens_encoder) if isinstance(tokenizer, WithAddedTokens) else set()
    # any character outside the table maps past Latin-1, so a piece that is not byte-level fails
    table = byte_table()
    to_bytes = {ord(c): b for c, b in table.items()}
    to_bytes.update((b, 0xFFFF) for b in range(256) if chr(b) not in table)
    try:
        pieces = [piece.translate(to_bytes).encode("latin-1") for piece in vocab if piece not in added]
    except UnicodeEncodeError:
        return None
    return [*pieces, *(s.encode("utf-8") for s in added)]


def _longest_token(tokenizer: HFTokenizer) -> tuple[int | None, int | None]:
    """The longest token in characters and in bytes of its UTF-8 spelling (None: unreadable)."""
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # a stand-in tokenizer without a vocabulary: no bound
        return None, None
    return (max(map(len, vocab), default=0) or None,
            max((len(piece.encode("utf-8", "surrogatepass")) for piece in vocab), default=0) or None)


class ContextWindow(Protocol):
    """What the bound reads of an engine: its window, and its vocabulary's TokenBound."""

    @property
    def context_length(self) -> int: ...
    @property
    def token_bound(self) -> TokenBound: ...


def fits_before_tokenizing(engine: ContextWindow, texts: Sequence[str], where: str) -> None:
    """ContextLengthError (param `where`) when the contents of one prompt cannot fit the window."""
    window = engine.context_length
    tokens, size = engine.token_bound.tokens_at_least(texts, window)
    if tokens >= window:
        raise ContextLengthError(f"{where} has {size}, at least {tokens:,} tokens, which cannot fit "
                                 f"the context window of {window:,} tokens; send fewer or shorter "
                                 "messages", param=where)


def utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
