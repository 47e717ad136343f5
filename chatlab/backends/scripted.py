"""A backend that replays scripted replies: the engine, parsers and server without a model.

Like simonw/llm's mock model, it answers with text written by a test. Each `prefill` starts the
next reply of the script (the last one repeats); each call returns logits whose largest entry
is the reply's next token id, then the eos id. The logits are real rows through the real loop,
so sampling, stop strings, grammars, the parser and the accumulator all run as they do on a
model, and the ids are the tokenizer's own, so detokenization is real too.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from chatlab._thirdparty import HFTokenizer

PEAK = 30.0  # softmax mass on the scripted token: 1 - vocab * e^-30, i.e. 1 at any temperature


class ScriptedBackend:
    compute_notes: tuple[str, ...] = ()  # the load profile's notes (chatlab.backends.fast)

    name, precision, threads = "scripted", "f32", None

    def __init__(self, tokenizer: HFTokenizer, replies: Sequence[str | Sequence[int]],
                 context_length: int = 4096, eos_id: int | None = None) -> None:
        if not replies:
            raise ValueError("a script needs at least one reply")
        self.tokenizer = tokenizer
        self.vocab_size = max(len(tokenizer), int(getattr(tokenizer, "vocab_size", 0) or 0))
        self.context_length = context_length
        eos = tokenizer.eos_token_id if eos_id is None else eos_id
        self.eos_ids = [int(eos)]
        self.replies = [list(r) if not isinstance(r, str) else
                        list(tokenizer.encode(r, add_special_tokens=False)) for r in replies]
        self.calls = 0  # prefills so far: which reply is playing
        self.prompts: list[list[int]] = []  # every prompt seen, for tests to inspect
        self._ids: list[int] = []
        self._pos = 0

    def _row(self) -> np.ndarray:
        row = np.zeros(self.vocab_size, dtype=np.float32)
        nxt = self._ids[self._pos] if self._pos < len(self._ids) else self.eos_ids[0]
        row[nxt] = PEAK
        return row

    def prefill(self, ids: list[int]) -> np.ndarray:
        if not ids:
            raise ValueError("prefill needs at least one token")
        self.prompts.append(list(ids))
        self._ids = self.replies[min(self.calls, len(self.replies) - 1)]
        self.calls += 1
        self._pos = 0
        return self._row()

    def step(self, token_id: int) -> np.ndarray:
        # follow the script while the loop agrees with it; once a grammar or a bias made it
        # choose otherwise, the script is off its rails: end the reply
        if self._pos < len(self._ids) and token_id == self._ids[self._pos]:
            self._pos += 1
        else:
            self._pos = len(self._ids)
        return self._row()

    def reset(self) -> None:
        self._ids, self._pos = [], 0

    def __repr__(self) -> str:
        return f"<ScriptedBackend vocab={self.vocab_size} ctx={self.context_length}>"
