"""A tiny backend whose logits the tests control: a Markov chain over a few tokens.

The next-token logits depend on the last token and the position's parity. Every call is
counted (`passes`), and the ids it holds are visible (`ids`), so tests can check what a
speculative pass or a prefix reuse really fed.
"""
from __future__ import annotations

import numpy as np


class Chars:
    """A tokenizer whose token i is the letter chr(97 + i)."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(97 + i) for i in ids)


class MarkovChain:
    """The chain as a step backend only (prefill/step): it cannot roll back."""

    name = "markov"

    def __init__(self, table: np.ndarray, parity: np.ndarray | None = None) -> None:
        self.table = table.astype(np.float32)
        self.parity = np.zeros_like(self.table[0]) if parity is None else parity.astype(np.float32)
        self.vocab_size = self.table.shape[1]
        self.context_length, self.eos_ids, self.tokenizer = 10_000, [], Chars()
        self.ids: list[int] = []
        self.passes = 0

    def _row(self) -> np.ndarray:
        return self.table[self.ids[-1]] + (len(self.ids) % 2) * self.parity

    def prefill(self, ids):
        self.ids = list(ids)
        self.passes += 1
        return self._row()

    def step(self, token):
        self.ids.append(token)
        self.passes += 1
        return self._row()

    def reset(self):
        self.ids = []


class MarkovBackend(MarkovChain):
    """The chain with a cache that rolls back and copies out (speculation, prefix reuse)."""

    @property
    def length(self) -> int:
        return len(self.ids)

    def step(self, token):
        return self.extend([token])[-1]

    def extend(self, ids, keep=1):
        rows = []
        for t in ids:
            self.ids.append(t)
            rows.append(self._row())
        self.passes += 1
        return np.stack(rows[-keep:])

    def truncate(self, length):
        assert 0 <= length <= len(self.ids)
        del self.ids[length:]

    def snapshot(self):
        return list(self.ids), 8 * len(self.ids)

    def restore(self, snap, length):
        self.ids = list(snap[:length])
