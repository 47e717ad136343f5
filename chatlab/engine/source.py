"""What an engine drains: a token source. ChatEngine plans a request and turns events into
OpenAI's shapes; the source is what produces the events for one sequence — chatlab's loop over
a step backend under a lease (LoopSource, here), or openvino-genai's batched pipeline
(chatlab.engine.batched.GenaiSource). The engine holds one (composition), so a new way of
producing tokens is a new source, not a subclass that overrides the engine's insides.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Protocol

from chatlab._thirdparty import HFTokenizer, Processor
from chatlab.protocols import ModelFacts, StepBackend
from chatlab.engine.lease import ModelGuard

if TYPE_CHECKING:
    from chatlab.engine.plan import ChatPlan, CompletionPlan
    from chatlab.engine.request import ChatRequest, CompletionRequest
    from chatlab.engine.prefix import PrefixCache
    from chatlab.generate import Event, SamplingParams, Speculation, StopFn



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


class LoopSource:
    """chatlab's own loop over a step backend, one sequence at a time under a lease
    (chatlab.engine.lease): a stream left unread is taken over, never deadlocked."""

    max_concurrency = 1

    def __init__(self, backend: StepBackend, vocab_size: int, tokenizer: HFTokenizer,
                 speculate: Speculation | None = None, reuse: PrefixCache | None = None) -> None:
        # speculate: a chatlab.generate.Speculation for every reply; reuse: a PrefixCache around
        # the backend (chatlab.engine.prefix), called under the lease's lock
        self.backend, self.guard = backend, ModelGuard(backend, reuse=reuse)
        self.vocab_size, self.tokenizer = vocab_size, tokenizer
        self.speculate = speculate

    def refuse(self, req: "ChatRequest | CompletionRequest") -> None:
        return None  # the loop does everything a request can ask

    def accept(self, plan: "ChatPlan | CompletionPlan") -> "ChatPlan | CompletionPlan":
        return plan  # the loop runs the compiled grammar the plan carries

    def constraint(self, plan: "ChatPlan") -> Processor:
        """The plan's compiled grammar as a fresh logits processor (it holds this run's matcher)."""
        from chatlab.tools.constrain import processor_for

        return processor_for(plan.constraint, self.vocab_size)

    def events(self, prompt_ids: tuple[int, ...], params: "SamplingParams", processor: Processor,
               should_stop: StopFn | None) -> Iterator["Event"]:
        """The loop's events under a lease, released when the generator ends or is closed."""
        from chatlab.generate import generate

        lease = self.guard.acquire()
        try:
            yield from generate(lease, list(prompt_ids), params, processor, should_stop,
                                speculate=self.speculate)
        finally:
            lease.release()
