"""Who may drive the model now: a lease instead of a lock held across `yield`.

A backend holds one KV cache, so one generation runs at a time. Holding a lock for a whole
stream looks right but fails in a notebook: a half-read `chat_stream` generator left in a
variable keeps the lock forever, and the next call hangs (or, with a re-entrant lock, both
write into the same cache). Here the lock is held only for each backend call. A generation
takes a *lease*; a new generation waits while the current one is being read, but a lease left
unread for `idle_s` seconds is taken over: the new call resets the cache with its own prefill,
and the abandoned generator, if ever resumed, ends with a clear error instead of reading a
cache that is no longer its own.
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from chatlab._thirdparty import HFTokenizer
from chatlab.errors import ChatlabError
from chatlab.protocols import StepBackend

if TYPE_CHECKING:
    from chatlab.engine.prefix import PrefixCache


class Superseded(ChatlabError):
    """An unfinished generation whose model was taken over by a newer call."""


class Lease:
    """One generation's claim on the backend; quacks like the backend for the loop."""

    def __init__(self, guard: "ModelGuard") -> None:
        self._guard, self.backend = guard, guard.backend
        self.touched = time.monotonic()
        self.done = self.superseded = False

    # The model's facts, read through to the backend (the loop reads them from what it drives)
    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def tokenizer(self) -> HFTokenizer:
        return self.backend.tokenizer

    @property
    def context_length(self) -> int:
        return self.backend.context_length

    @property
    def vocab_size(self) -> int:
        return self.backend.vocab_size

    @property
    def eos_ids(self) -> list[int]:
        return self.backend.eos_ids

    @property
    def precision(self) -> str:
        return self.backend.precision

    @property
    def threads(self) -> int | None:
        return self.backend.threads

    def reset(self) -> None:
        self.backend.reset()

    def __getattr__(self, name: str) -> object:  # what only some backends have (length, ...)
        return getattr(self.backend, name)

    def _call(self, fn: str, *args: int | list[int]) -> object:
        with self._guard.cond:
            if self.superseded:
                raise Superseded("this generation sat unread and a newer call on the same engine "
                                 "took over the model; read a stream to its end (or close it) "
                                 "before starting another")
            out = getattr(self._guard.target, fn)(*args)
            self.touched = time.monotonic()
            return out

    def prefill(self, ids: list[int]) -> np.ndarray:
        return _logits(self._call("prefill", ids))

    def step(self, token_id: int) -> np.ndarray:
        return _logits(self._call("step", token_id))

    def extend(self, ids: list[int], keep: int = 1) -> np.ndarray:
        return _logits(self._call("extend", ids, keep))

    def truncate(self, length: int) -> None:
        self._call("truncate", length)

    def release(self) -> None:
        with self._guard.cond:
            self.done = True
            self._guard.cond.notify_all()


def _logits(out: object) -> np.ndarray:
    assert isinstance(out, np.ndarray), f"a backend returned {type(out).__name__}, not logits"
    return out


class ModelGuard:
    def __init__(self, backend: StepBackend, idle_s: float = 2.0, reuse: "PrefixCache | None" = None) -> None:
        self.backend, self.idle_s = backend, idle_s
        # What the model calls go to: the backend, or a PrefixCache around it
        # (chatlab.engine.prefix), so that its record of the cached ids changes under the lock.
        self.target = reuse if reuse is not None else backend
        self.cond = threading.Condition()
        self.current: Lease | None = None

    def acquire(self) -> Lease:
        """Wait while the current generation is being read; take over one left idle."""
        with self.cond:
            while (cur := self.current) is not None and not cur.done:
                idle = time.monotonic() - cur.touched
                if idle >= self.idle_s:
                    cur.superseded = True
                    break
                self.cond.wait(timeout=self.idle_s - idle)
            lease = self.current = Lease(self)
            return lease
