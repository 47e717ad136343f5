"""Log-probabilities of generated tokens and their wire shapes: `log_softmax` of the row after the
grammar mask and logit_bias, before penalties and sampling (vLLM's "raw" logprobs)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple, Sequence

import numpy as np

from chatlab._thirdparty import Decoder, piece_spelling

if TYPE_CHECKING:
    from chatlab.types.responses import ChatLogprobs, TextLogprobs

MAX_TOP_LOGPROBS = 20  # OpenAI's limit for chat `top_logprobs`
# JSON has no -inf; OpenAI and vLLM send this floor for impossible tokens.
WIRE_FLOOR = -9999.0


class TopLogprob(NamedTuple):
    token_id: int
    text: str
    logprob: float
    bytes: list[int]


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token: its logprob, and the `top` most likely alternatives (best first)."""

    token_id: int
    text: str
    logprob: float
    bytes: list[int]
    top: list[TopLogprob]
    text_offset: int = 0  # where this token's text starts in the reply (legacy completions)


GROUPS = 64  # top_ids splits the row into this many strided groups


def top_ids(row: np.ndarray, n: int) -> np.ndarray:
    """The n largest entries' ids, best first (ties: lower id first): only the strided groups
    whose maximum reaches the n-th best group maximum can hold one of the n best."""
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    size = row.shape[0]
    cols = -(-size // GROUPS)
    if cols <= 4 * n:  # a small row: search all of it
        ids = np.arange(size)
    else:
        padded = row  # real vocabularies are usually a multiple of 64: no copy then
        if size != GROUPS * cols:
            padded = np.full(GROUPS * cols, -np.inf, dtype=row.dtype)
            padded[:size] = row
        maxima = padded.reshape(GROUPS, cols).max(axis=0)
        m = np.partition(maxima, -n)[-n]
        chosen = np.flatnonzero(maxima >= m)
        ids = (np.arange(GROUPS)[:, None] * cols + chosen).ravel()
        ids = ids[ids < size]
    values = row[ids]
    if len(ids) > n:  # keep the n best (and any ties with the n-th) before the exact sort
        keep = values >= np.partition(values, -n)[-n]
        ids, values = ids[keep], values[keep]
    return ids[np.lexsort((ids, -values))][:n]


class TokenTexts:
    """token id -> (text, bytes), cached, from the vocabulary's spelling (byte-level stand-ins,
    SentencePiece's "▁" and "<0xE2>"), else from decoding the id alone."""

    def __init__(self, tokenizer: Decoder) -> None:
        self.tokenizer = tokenizer
        raw = getattr(tokenizer, "backend_tokenizer", None) or tokenizer  # HF fast, or `tokenizers`
        self.piece = getattr(raw, "id_to_token", None) or getattr(tokenizer, "convert_ids_to_tokens", None)
        self.mode = piece_spelling(tokenizer)
        self._cache: dict[int, tuple[str, list[int]]] = {}

    def __call__(self, token_id: int) -> tuple[str, list[int]]:
        hit = self._cache.get(token_id)
        if hit is None:
            raw = self._bytes(token_id)
            hit = self._cache[token_id] = (token_text(raw), list(raw))
        return hit

    def _bytes(self, token_id: int) -> bytes:
        piece = self.piece(token_id) if self.piece is not None and self.mode != "decode" else None
        if isinstance(piece, str):
            if self.mode == "bytelevel":
                decoder = byte_table()
                if all(ch in decoder for ch in piece):
                    return bytes(decoder[ch] for ch in piece)
            elif self.mode == "sentencepiece":
                byte = re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece)
                return bytes([int(byte.group(1), 16)]) if byte else piece.replace("\u2581", " ").encode()
            return piece.encode()  # an added/special token written out as it is
        return self.tokenizer.decode([token_id], skip_special_tokens=False).encode()


def token_text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in raw)


@lru_cache(maxsize=1)
def byte_table() -> dict[str, int]:
    """GPT-2's byte-level table, character to byte (non-printable bytes are chr(256 + n))."""
    kept = [*range(33, 127), *range(161, 173), *range(174, 256)]
    others = [b for b in range(256) if b not in kept]
    return {**{chr(b): b for b in kept}, **{chr(256 + n): b for n, b in enumerate(others)}}


class Recorder:
    """`observe` the row a token is drawn from (a copy), then `record` the token."""

    def __init__(self, tokenizer: Decoder, top_n: int) -> None:
        self.texts = TokenTexts(tokenizer)
        self.top_n = top_n
        self.shifted: np.ndarray | None = None
        self.log_z = 0.0
        self.best = np.empty(0, dtype=np.int64)  # the row's top_n ids, best first

    def observe(self, logits: np.ndarray) -> None:
        peak = float(np.max(logits))
        self.shifted = logits - np.float32(peak) if math.isfinite(peak) else logits.copy()
        self.log_z = float(np.log(np.sum(np.exp(self.shifted))))  # >= 1: the peak adds exp(0)
        self.best = top_ids(self.shifted, self.top_n)

    def record(self, token_id: int, text_offset: int) -> TokenLogprob:
        shifted = self.shifted
        assert shifted is not None, "observe() the logits row before record()"
        text, raw = self.texts(token_id)
        top = []
        lps = (shifted[self.best] - self.log_z).tolist()  # one vectorized pass
        for t, lp in zip(self.best.tolist(), lps):
            t_text, t_raw = self.texts(t)
            top.append(TopLogprob(t, t_text, lp, t_raw))
        logprob = float(shifted[token_id]) - self.log_z
        return TokenLogprob(token_id, text, logprob, raw, top, text_offset)


def _wire(logprob: float) -> float:
    return logprob if logprob > WIRE_FLOOR else WIRE_FLOOR


def chat_logprobs(entries: Sequence[TokenLogprob]) -> ChatLogprobs:
    """Chat completions' `choice.logprobs` (or one chunk's): {"content": [...], "refusal": None}."""
    return {"content": [
        {"token": e.text, "logprob": _wire(e.logprob), "bytes": list(e.bytes),
         "top_logprobs": [{"token": t.text, "logprob": _wire(t.logprob), "bytes": list(t.bytes)}
                          for t in e.top]}
        for e in entries], "refusal": None}


def completion_logprobs(entries: Sequence[TokenLogprob], offset: int = 0) -> TextLogprobs:
    """Legacy completions' `choice.logprobs` (each `top_logprobs` also holds the chosen token)."""
    tops = []
    for e in entries:
        top = {t.text: _wire(t.logprob) for t in e.top}
        top.setdefault(e.text, _wire(e.logprob))
        tops.append(top)
    return {"tokens": [e.text for e in entries], "token_logprobs": [_wire(e.logprob) for e in entries],
            "top_logprobs": tops, "text_offset": [e.text_offset + offset for e in entries]}
