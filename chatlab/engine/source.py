"""What an engine drains: a token source, which produces the events for one sequence —
chatlab's loop over a step backend under a lease (LoopSource, here), or openvino-genai's batched
pipeline (chatlab.engine.batched.GenaiSource). The engine holds one (composition), so a new way
of producing tokens is a new source, not an engine subclass.
"""
from __future__ import annotations

from typing import Iterator, Protocol

from chatlab._thirdparty import Processor
from chatlab.engine.lease import ModelGuard
from chatlab.engine.plan import ChatPlan, CompletionPlan
from chatlab.engine.prefix import PrefixCache
from chatlab.engine.request import ChatRequest, CompletionRequest
from chatlab.errors import ChatlabError
from chatlab.generate import Event, SamplingParams, Speculation, StopFn, generate
from chatlab.generate.speculate import check_backend, prepare
from chatlab.protocols import ModelFacts, StepBackend
from chatlab.tools.constrain import processor_for


class TokenSource(Protocol):
    @property
    def backend(self) -> ModelFacts: ...

    # How many sequences it runs at once (the server runs that many jobs side by side).
    max_concurrency: int

    def refuse(self, req: "ChatRequest | CompletionRequest") -> None:
        """Raise ChatlabError for what this source cannot do (before planning: a 400)."""

    def accept(self, plan: "ChatPlan | CompletionPlan") -> "ChatPlan | CompletionPlan":
        """The plan as this source runs it (its constraint adapted once, in the source's kind);
        ChatlabError for a plan it cannot run (after planning, before queueing: a 400)."""

    def constraint(self, plan: "ChatPlan") -> Processor:
        """What `events` gets to enforce the plan's grammar, in this source's own kind."""

    def events(self, prompt_ids: tuple[int, ...], params: "SamplingParams", processor: Processor,
               should_stop: StopFn | None) -> Iterator["Event"]:
        """The loop's events (TextDelta..., then Finished) for one sequence."""


def refuse_loop_speedups(backend: str, speculate: Speculation | None, reuse_prefix: bool) -> None:
    """Speculation and prefix reuse are chatlab's loop's: refused for a backend that schedules
    its own tokens."""
    if speculate is not None or reuse_prefix:
        raise ChatlabError(f"speculate and reuse_prefix drive chatlab's own loop; the {backend} "
                           "backend batches and schedules its own tokens. Use --backend openvino "
                           "(or torch) for them, or leave them out (on genai, --reuse-prefix is "
                           "its own prefix caching: prefix_caching=True)")


class LoopSource:
    """chatlab's own loop over a step backend, one sequence at a time under a lease
    (chatlab.engine.lease). `speculate` turns on prompt-lookup speculative decoding for every
    reply; `reuse_prefix` keeps the KV cache of earlier turns (chatlab.engine.prefix). Both need
    a backend that can roll back, checked here, before any request."""

    max_concurrency = 1

    def __init__(self, backend: StepBackend, speculate: Speculation | None = None,
                 reuse_prefix: bool = False) -> None:
        self.padded: bool | None = None  # whether verify passes are padded (when speculating)
        if speculate is not None:
            check_backend(backend)
            self.padded = prepare(backend, speculate)  # now, not in the first request (OpenVINO: a compile)
        self.prefix: PrefixCache | None = None
        if reuse_prefix:
            self.prefix = PrefixCache(backend)
        self.backend, self.guard = backend, ModelGuard(backend, reuse=self.prefix)
        self.speculate = speculate

    def refuse(self, req: "ChatRequest | CompletionRequest") -> None:
        return None  # the loop does everything a request can ask

    def accept(self, plan: "ChatPlan | CompletionPlan") -> "ChatPlan | CompletionPlan":
        return plan  # the loop runs the compiled grammar the plan carries

    def constraint(self, plan: "ChatPlan") -> Processor:
        """The plan's compiled grammar as a fresh logits processor (it holds this run's matcher)."""
        return processor_for(plan.constraint, int(self.backend.vocab_size))

    def events(self, prompt_ids: tuple[int, ...], params: "SamplingParams", processor: Processor,
               should_stop: StopFn | None) -> Iterator["Event"]:
        """The loop's events under a lease, released when the generator ends or is closed."""
        lease = self.guard.acquire()
        try:
            yield from generate(lease, list(prompt_ids), params, processor, should_stop,
                                speculate=self.speculate, padded=self.padded)
        finally:
            lease.release()
