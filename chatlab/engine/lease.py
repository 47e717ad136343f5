"""Who may drive the model now: a lease instead of a lock held across `yield`.

A backend holds one KV cache, so one generation runs at a time; but a half-read `chat_stream`
generator left in a notebook variable would hold a stream-long lock forever. Here the lock is
held only for each backend call. A new generation waits while the current one is being read,
but a lease left unread for `idle_s` seconds is taken over, and the abandoned generator, if ever
resumed, ends with a clear error instead of reading a cache that is no longer its own.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

import numpy as np

from chatlab._thirdparty import Decoder, HFTokenizer
from chatlab.errors import ChatlabError
from chatlab.protocols import DecoderBackend, RollbackBackend, StepBackend


_R = TypeVar("_R")


class Superseded(ChatlabError):
    """An unfinished generation whose model was taken over by a newer call."""


class Wrapper:
    """What wraps a step backend and reads its model facts through (a lease, a prefix cache):
    the loop reads the facts from what it drives."""

    backend: StepBackend

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def tokenizer(self) -> HFTokenizer:
        return self.backend.tokenizer

    @property
    def decoder(self) -> Decoder:
        backend = self.backend
        return backend.decoder if isinstance(backend, DecoderBackend) else backend.tokenizer

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


class Lease(Wrapper):
    """One generation's claim on the backend; quacks like a step backend for the loop."""

    def __init__(self, guard: "ModelGuard") -> None:
        self._guard, self.backend = guard, guard.backend
        self.touched = time.monotonic()
        self.done = self.superseded = False

    def reset(self) -> None:
        self.backend.reset()

    def _call(self, fn: Callable[..., _R], *args: int | list[int]) -> _R:
        with self._guard.cond:
            if self.superseded:
                raise Superseded("this generation sat unread and a newer call on the same engine "
                                 "took over the model; read a stream to its end (or close it) "
                                 "before starting another")
            out = fn(*args)
            self.touched = time.monotonic()
            return out

    def prefill(self, ids: list[int]) -> np.ndarray:
        return self._call(self._guard.target.prefill, ids)

    def step(self, token_id: int) -> np.ndarray:
        return self._call(self._guard.target.step, token_id)

    def release(self) -> None:
        with self._guard.cond:
            self.done = True
            self._guard.cond.notify_all()


class RollbackLease(Lease):
    """A lease on a backend that can roll back: the loop may speculate through it."""

    def __init__(self, guard: "ModelGuard", target: RollbackBackend) -> None:
        super().__init__(guard)
        self._target = target

    @property
    def length(self) -> int:
        return self._target.length

    def extend(self, ids: list[int], keep: int = 1) -> np.ndarray:
        return self._call(self._target.extend, ids, keep)

    def truncate(self, length: int) -> None:
        self._call(self._target.truncate, length)


class ModelGuard:
    def __init__(self, backend: StepBackend, idle_s: float = 2.0, reuse: StepBackend | None = None) -> None:
        self.backend, self.idle_s = backend, idle_s
        # What the model calls go to: the backend, or a PrefixCache around it
        # (chatlab.engine.prefix), so that its record of the cached ids changes under the lock.
        self.target: StepBackend = reuse if reuse is not None else backend
        self.rollback = self.target if isinstance(self.target, RollbackBackend) else None
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
            lease = Lease(self) if self.rollback is None else RollbackLease(self, self.rollback)
            self.current = lease
            return lease
