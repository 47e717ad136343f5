"""The generation loop: prefill once, then sample → stop checks → stream → step, per token."""
from __future__ import annotations

import time
from typing import Callable, Iterator

import numpy as np

from chatlab.errors import ChatlabError
from chatlab.generate.assemble import Event, TextAssembler
from chatlab.generate.logprobs import Recorder
from chatlab.generate.sampling import Sampler, SamplingParams
from chatlab.generate.speculate import PromptLookup, Speculation, check_backend, prepare
from chatlab.protocols import (DecoderBackend, LogitsProcessor, ModelFacts, SpeculativeBackend, StepBackend,
                               TerminatingProcessor)

StopFn = Callable[[], bool]  # should_stop: True ends the reply (a client gone, a job cancelled)


def stop_ids_for(backend: ModelFacts, params: SamplingParams) -> set[int]:
    ids = set(params.stop_ids)
    if not params.ignore_eos:
        ids.update(backend.eos_ids)
    return ids


class _Picker:
    """One reply's per-token steps: grammar mask -> logit_bias -> (logprobs) -> sampling -> text."""

    def __init__(self, backend: StepBackend, prompt_ids: list[int], params: SamplingParams,
                 logits_processor: LogitsProcessor | None) -> None:
        self.params, self.processor = params, logits_processor
        self.sampler = Sampler(params)
        if params.repetition_penalty != 1.0:
            self.sampler.seen.extend(prompt_ids)
        decoder = backend.decoder if isinstance(backend, DecoderBackend) else backend.tokenizer
        self.recorder = Recorder(decoder, params.top_logprobs) if params.logprobs else None
        self.text = TextAssembler(decoder, params.stop, stop_ids_for(backend, params),
                                  len(prompt_ids), params.logprobs)

    def pick(self, logits: np.ndarray, draft: int | None = None) -> tuple[int, bool, Event | None]:
        """(token, whether it is the draft's guess, the delta it made showable)."""
        if self.processor is not None:
            masked = self.processor.mask(logits)
            logits = logits if masked is None else masked
        logits = self.sampler.bias(logits)
        if self.recorder is not None:
            self.recorder.observe(logits)  # before sampling: the penalty edits the row in place
        sampler = self.sampler
        token, accepted = (sampler(logits), False) if draft is None else sampler.check_draft(logits, draft)
        if self.processor is not None:
            self.processor.accept(token)
        lp = self.recorder.record(token, self.text.decoded) if self.recorder is not None else None
        self.sampler.accept(token)  # the penalties that look back at the reply
        return token, accepted, self.text.add(token, lp)


def generate(backend: StepBackend, prompt_ids: list[int], params: SamplingParams | None = None,
             logits_processor: LogitsProcessor | None = None,
             should_stop: StopFn | None = None,
             speculate: Speculation | None = None, padded: bool | None = None) -> Iterator[Event]:
    """TextDelta events, then one Finished. `padded` None: `prepare` the backend for `speculate` here."""
    params = params or SamplingParams()
    window, vocab = backend.context_length, backend.vocab_size
    if not params.checked(window, len(prompt_ids), vocab):  # a direct caller's: check it here
        params.validate(window, len(prompt_ids), vocab)
    if not prompt_ids:
        raise ChatlabError("the prompt is empty; render at least one message before generating")
    rolling: SpeculativeBackend | None = None  # the backend, checked for speculation
    lookup: PromptLookup | None = None
    if speculate is not None:
        rolling = check_backend(backend)
        fixed_width = prepare(backend, speculate) if padded is None else padded
        lookup = PromptLookup(speculate, prompt_ids, fixed_width)
    picker = _Picker(backend, prompt_ids, params, logits_processor)
    text = picker.text
    terminated = logits_processor.is_terminated if isinstance(logits_processor, TerminatingProcessor) else None

    def halted() -> bool:
        return (terminated is not None and terminated()) or (should_stop is not None and should_stop())

    t0 = time.perf_counter()
    rows, n, t_first = [backend.prefill(prompt_ids)], 0, 0.0
    draft: list[int] = []
    while True:
        kept = 0  # rows[i] follows the guess's first i tokens: read while every guess is kept
        for i, row in enumerate(rows):
            token, accepted, delta = picker.pick(row, draft[i] if i < len(draft) else None)
            if n == 0:
                t_first = time.perf_counter()
            n += 1
            if lookup is not None:
                lookup.add(token)
            if delta is not None:
                yield delta
            if text.done:
                break
            if halted():
                text.halt()
                break
            if n >= params.max_new_tokens or not accepted:
                break
            kept += 1
        if lookup is not None and draft:
            lookup.result(len(draft), kept)
        if text.done or n >= params.max_new_tokens:
            break  # no step after the last token: nobody reads it
        if rolling is not None and kept < len(draft):  # drop the rejected guesses from the cache
            rolling.truncate(rolling.length - (len(draft) - kept))
        # the guess stops one short of max_new_tokens: the row after the last token is never read
        draft = [] if lookup is None else lookup.draft(params.max_new_tokens - n - 1)
        if rolling is not None and draft:
            rows = list(rolling.extend([token] + draft, keep=len(draft) + 1))
        else:
            rows = [backend.step(token)]
    t_end = time.perf_counter()
    events = text.finish({"ttft_s": t_first - t0, "total_s": t_end - t0})
    if lookup is not None:
        events[-1].speculation = lookup.stats()  # type: ignore[union-attr]
    yield from events
