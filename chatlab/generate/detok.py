"""Incremental detokenization: token ids in, printable text deltas out.

Decoding each token on its own is wrong in two ways. A character can span tokens: byte-level
BPE splits "é" or an emoji into byte tokens, and decoding one half gives U+FFFD ("�"). And
tokenizers drop or add spaces depending on context (SentencePiece's leading "▁"). So the
detokenizer decodes a short window of recent tokens twice — without and with the new ones — and
emits the difference, and it waits (emits nothing) while the new text ends in U+FFFD, i.e. while
a character is still incomplete. The window slides forward once text has been emitted, so the
cost per token stays constant however long the reply gets.
"""
from __future__ import annotations

from chatlab._thirdparty import Decoder

REPLACEMENT = "\ufffd"
# Tokens of left context kept in the window; enough for any tokenizer's spacing decisions.
CONTEXT_IDS = 5


class IncrementalDetokenizer:
    def __init__(self, tokenizer: Decoder) -> None:
        self.tokenizer = tokenizer
        self.ids: list[int] = []
        self.prefix = 0  # window start: context tokens already shown
        self.read = 0  # tokens up to here are shown as text

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def add(self, token_id: int) -> str:
        """Append one token; return the text that is now complete (possibly "")."""
        self.ids.append(token_id)
        shown = self._decode(self.ids[self.prefix:self.read])
        full = self._decode(self.ids[self.prefix:])
        if full.endswith(REPLACEMENT) or len(full) <= len(shown):
            # An incomplete character (or a token that decodes to nothing yet): wait.
            return ""
        # With a stable prefix, `full` starts with `shown`; if a tokenizer rewrote the context
        # (rare normalization effects) fall back to the common prefix so nothing is repeated.
        if not full.startswith(shown):
            n = 0
            while n < min(len(shown), len(full)) and shown[n] == full[n]:
                n += 1
            shown = shown[:n]
        delta = full[len(shown):]
        self.prefix = max(0, len(self.ids) - CONTEXT_IDS)
        self.read = len(self.ids)
        return delta

    def flush(self) -> str:
        """At the end: whatever is still pending, replacement characters included."""
        shown = self._decode(self.ids[self.prefix:self.read])
        full = self._decode(self.ids[self.prefix:])
        self.prefix = self.read = len(self.ids)
        return full[len(shown):] if full.startswith(shown) else ""
