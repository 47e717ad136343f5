"""The seams between a model and what drives it, as structural protocols (the optional ones: isinstance)."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from chatlab._thirdparty import Decoder, GenaiConfig, HFTokenizer, OVCompiled


class ModelFacts(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def tokenizer(self) -> HFTokenizer: ...
    @property
    def context_length(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def eos_ids(self) -> list[int]: ...
    @property
    def precision(self) -> str: ...
    @property
    def threads(self) -> int | None: ...


@runtime_checkable
class StepBackend(ModelFacts, Protocol):
    def prefill(self, ids: list[int]) -> np.ndarray: ...
    def step(self, token_id: int) -> np.ndarray: ...
    def reset(self) -> None: ...


@runtime_checkable
class DecoderBackend(Protocol):
    """A backend with a lighter decoder than its chat tokenizer (OpenVINO's: no torch)."""

    @property
    def decoder(self) -> Decoder: ...


@runtime_checkable
class RollbackBackend(Protocol):
    """A cache that rolls back (speculation, prefix reuse): `extend(ids, keep)` feeds several
    tokens in one pass and returns the last `keep` rows of logits; `truncate(n)` keeps n."""

    @property
    def length(self) -> int: ...
    def extend(self, ids: list[int], keep: int) -> np.ndarray: ...
    def truncate(self, length: int) -> None: ...


@runtime_checkable
class SpeculativeBackend(StepBackend, RollbackBackend, Protocol):
    """A step backend that can roll back: what chatlab's loop speculates on."""


@runtime_checkable
class PaddedVerifyBackend(Protocol):
    """Verify passes on a graph compiled for one width (`prepare_verify`)."""

    def prepare_verify(self, width: int) -> None: ...


@runtime_checkable
class SnapshotBackend(Protocol):
    def snapshot(self) -> tuple[object, int]: ...
    def restore(self, snap: object, length: int) -> None: ...


class LogitsProcessor(Protocol):
    """What chatlab's loop enforces a grammar with: `mask` sets forbidden tokens to -inf (the
    row, or None when it edited the given one), `accept` advances it."""

    def mask(self, logits: np.ndarray) -> np.ndarray | None: ...
    def accept(self, token: int) -> object: ...


@runtime_checkable
class TerminatingProcessor(LogitsProcessor, Protocol):
    """A logits processor that knows when its grammar is complete (the reply then ends)."""

    def is_terminated(self) -> bool: ...


class IdStream(Protocol):
    """One batched request's new ids: lists of ids per scheduler step, an error, or None at the end."""

    status: str | None

    def get(self, timeout: float) -> list[int] | BaseException | None: ...
    def cancel(self) -> None: ...


@runtime_checkable
class BatchedBackend(ModelFacts, Protocol):
    @property
    def decoder(self) -> Decoder: ...
    @property
    def max_seqs(self) -> int: ...
    def submit(self, ids: list[int], config: GenaiConfig) -> IdStream: ...
    def close(self) -> None: ...


@runtime_checkable
class ProfiledBackend(Protocol):
    """A backend with its load profile's notes (what `fast=True` could not turn on here)."""

    compute_notes: tuple[str, ...]


@runtime_checkable
class CompiledBackend(Protocol):
    compiled: OVCompiled


AnyBackend = StepBackend | BatchedBackend
