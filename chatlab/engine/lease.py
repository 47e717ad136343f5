"""Who may drive the model now (a Lease locks per call; one left unread for `idle_s` is taken
over), and what its KV cache holds (PrefixCache feeds only what follows the cached prefix)."""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Callable, TypeVar

import numpy as np

from chatlab._thirdparty import Decoder, HFTokenizer
from chatlab.errors import ChatlabError
from chatlab.protocols import (DecoderBackend, RollbackBackend, SnapshotBackend, SpeculativeBackend,
                               StepBackend)

_R = TypeVar("_R")


class Superseded(ChatlabError):
    """An unfinished generation whose model was taken over by a newer call."""


class Wrapper:
    """A step backend's wrapper (a lease, a prefix cache) that reads its model facts through."""

    backend: StepBackend

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def tokenizer(self) -> HFTokenizer:
        return self.backend.tokenizer

    @property
    def decoder(self) -> Decoder:
        return self.backend.decoder if isinstance(self.backend, DecoderBackend) else self.backend.tokenizer

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
        # the backend, or a PrefixCache around it (its record then changes under the lock)
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


MIN_REUSE = 16  # below this many shared tokens a full prefill is as cheap as the bookkeeping


def common_prefix(a: list[int] | tuple[int, ...], b: list[int]) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0]) if diff.size else n


class PrefixCache(Wrapper):
    """Wraps `backend`'s prefill/step/extend/truncate and keeps track of the ids it caches."""

    def __init__(self, backend: StepBackend, max_entries: int = 4, max_bytes: int = 256 << 20) -> None:
        if not isinstance(backend, RollbackBackend):
            raise ChatlabError(f"prefix reuse needs a backend that can roll its KV cache back; "
                               f"{backend.name} cannot. Use --backend torch, or openvino with its "
                               "default paged attention, or turn prefix reuse off")
        self.backend: SpeculativeBackend = backend
        self.live: list[int] = []  # the ids whose keys and values the backend holds now
        self.saved: OrderedDict[tuple[int, ...], tuple[object, int]] = OrderedDict()  # backend's copies
        self.sizes: dict[tuple[int, ...], int] = {}  # bytes of each saved copy
        self.max_entries, self.max_bytes = max_entries, max_bytes
        # where the live sequence is copied before another prompt replaces it (None: nowhere)
        self.snapshots = backend if isinstance(backend, SnapshotBackend) and max_entries > 0 else None
        self.reused = 0  # tokens the last prefill did not compute (tests, the TTFT script)

    @property
    def length(self) -> int:
        return self.backend.length

    def prefill(self, ids: list[int]) -> np.ndarray:
        keep = common_prefix(self.live, ids)
        best_saved = max(self.saved, key=lambda k: common_prefix(k, ids), default=None)
        saved_keep = common_prefix(best_saved, ids) if best_saved is not None else 0
        if saved_keep > keep and saved_keep >= MIN_REUSE:
            snap, length = self.saved.pop(best_saved)  # type: ignore[arg-type]
            self.sizes.pop(best_saved, None)  # type: ignore[arg-type]
            self._save_live()  # after taking the saved one out: saving may evict
            assert self.snapshots is not None  # it made the copy
            self.snapshots.restore(snap, length)
            self.live, keep = list(best_saved), saved_keep  # type: ignore[arg-type]
        elif keep < MIN_REUSE or len(self.live) - keep >= MIN_REUSE:
            self._save_live()  # two clients sharing a system prompt keep each other's turns
        # At least the last prompt token is fed again: its logits are what the loop samples from.
        keep = min(keep, len(ids) - 1)
        if keep < MIN_REUSE:
            self.reused, self.live = 0, list(ids)
            return self.backend.prefill(ids)
        self.backend.truncate(keep)
        self.reused = keep
        logits = self.backend.extend(ids[keep:], keep=1)[-1]
        self.live = list(ids)
        return logits

    def step(self, token_id: int) -> np.ndarray:
        out = self.backend.step(token_id)
        self.live.append(token_id)
        return out

    def extend(self, ids: list[int], keep: int = 1) -> np.ndarray:
        out = self.backend.extend(ids, keep)
        self.live.extend(ids)
        return out

    def truncate(self, length: int) -> None:
        self.backend.truncate(length)
        del self.live[length:]

    def reset(self) -> None:
        self.backend.reset()
        self.live = []

    def forget(self) -> None:
        """Drop the live sequence and every saved copy: the next prompt reuses nothing."""
        self.reset()
        self.saved.clear()
        self.sizes.clear()

    def _save_live(self) -> None:
        """Copy the live sequence into the LRU before a prompt that does not extend it."""
        if self.snapshots is None or len(self.live) < MIN_REUSE:
            return
        key = tuple(self.live)
        snap, nbytes = self.snapshots.snapshot()
        if nbytes > self.max_bytes:
            return
        self.saved[key] = (snap, len(key))
        self.saved.move_to_end(key)
        self.sizes[key] = nbytes
        while len(self.saved) > self.max_entries or sum(self.sizes.values()) > self.max_bytes:
            old, _ = self.saved.popitem(last=False)  # the least recently used goes first
            self.sizes.pop(old, None)
