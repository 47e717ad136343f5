"""Multi-turn prefix reuse: the next turn prefills only the tokens the last one did not have.

Rendered at the id level, turn N+1's prompt is turn N's prompt + its reply + the new user
message, token for token, so the KV cache from turn N is already right for the first part.
`PrefixCache` sits between the loop and a backend that can roll back: it remembers which ids the
cache holds and, on the next `prefill`, keeps the longest common prefix and feeds only the rest.
Safety comes from comparing ids, never from trusting a conversation id: a changed template, an
edited message or another client's prompt simply matches less (down to a full prefill).

When a prompt leaves the live sequence behind (another client's conversation under the same
system prompt, an edited message), the live one is first copied out (`snapshot`) into a small
LRU bounded by `max_bytes`, and a later prompt extending it brings it back (`restore`).

The record is only true while every call to the backend goes through the PrefixCache.
"""
from __future__ import annotations

from collections import OrderedDict
import numpy as np

from chatlab.engine.lease import Wrapper
from chatlab.errors import ChatlabError
from chatlab.protocols import RollbackBackend, SnapshotBackend, SpeculativeBackend, StepBackend

MIN_REUSE = 16  # below this many shared tokens a full prefill is as cheap as the bookkeeping


def common_prefix(a: list[int] | tuple[int, ...], b: list[int]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
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
            # Not only when nothing is shared: two clients under one default system prompt
            # share its ~30 ids, and cutting back to them would lose the other's whole turn.
            self._save_live()
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
