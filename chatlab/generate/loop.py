"""The generation loop: prefill once, then sample → stop checks → stream → step, per token.

This is the whole of what `model.generate()` or an engine does for one chat reply, written out
so that each decision is visible: which ids end the reply (the template's stop ids merged with
the model's eos), when text may be shown (after the detokenizer has a whole character and the
stop matcher knows it is not the start of a stop string), and what is counted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from chatlab.generate.detok import IncrementalDetokenizer
from chatlab.generate.sampling import Sampler, SamplingParams
from chatlab.generate.stops import StopMatcher


@dataclass
class TextDelta:
    text: str
    token_ids: list[int]  # the tokens sampled since the previous delta (text may lag them)


@dataclass
class Finished:
    finish_reason: str  # "stop" or "length"
    text: str  # the whole reply, stop string removed
    token_ids: list[int]  # every sampled token, the stop id included when one ended the reply
    prompt_tokens: int
    completion_tokens: int
    stop_reason: str | int | None = None  # the stop string or stop id that matched
    timings: dict[str, float] = field(default_factory=dict)


Event = TextDelta | Finished


def stop_ids_for(backend: Any, params: SamplingParams) -> set[int]:
    """The template's stop ids plus the model's own eos ids (unless `ignore_eos`)."""
    ids = set(params.stop_ids)
    if not params.ignore_eos:
        ids.update(getattr(backend, "eos_ids", []) or [])
    return ids


def generate(backend: Any, prompt_ids: list[int], params: SamplingParams | None = None,
             logits_processor: Any = None,
             should_stop: Callable[[], bool] | None = None) -> Iterator[Event]:
    """Stream TextDelta events, then exactly one Finished."""
    import time

    params = params or SamplingParams()
    params.validate(getattr(backend, "context_length", None), len(prompt_ids))
    if not prompt_ids:
        from chatlab.errors import ChatlabError

        raise ChatlabError("the prompt is empty; render at least one message before generating")
    stop_ids = stop_ids_for(backend, params)
    sampler = Sampler(params)
    if params.repetition_penalty != 1.0:
        sampler.seen.extend(prompt_ids)
    # A backend may offer a lighter `decoder` than its chat tokenizer (OpenVINO: no torch).
    detok = IncrementalDetokenizer(getattr(backend, "decoder", None) or backend.tokenizer)
    stops = StopMatcher(params.stop)
    terminated = getattr(logits_processor, "is_terminated", None)

    out_ids: list[int] = []
    pieces: list[str] = []
    pending: list[int] = []  # tokens not yet attached to a delta
    reason, stop_reason = "length", None
    t0 = time.perf_counter()
    logits = backend.prefill(prompt_ids)
    t_first = 0.0
    for n in range(params.max_new_tokens):
        if logits_processor is not None:
            masked = logits_processor.mask(logits)
            logits = logits if masked is None else masked
        token = sampler(logits)
        if n == 0:
            t_first = time.perf_counter()
        if logits_processor is not None:
            logits_processor.accept(token)
        out_ids.append(token)
        if params.repetition_penalty != 1.0:
            sampler.seen.append(token)
        if token in stop_ids:
            reason, stop_reason = "stop", token
            break
        pending.append(token)
        result = stops.feed(detok.add(token))
        if result.text:
            pieces.append(result.text)
            yield TextDelta(result.text, pending)
            pending = []
        if result.stop is not None:
            reason, stop_reason = "stop", result.stop
            break
        if (terminated is not None and terminated()) or (should_stop is not None and should_stop()):
            reason = "stop"
            break
        if n + 1 < params.max_new_tokens:  # no step after the last token: nobody reads it
            logits = backend.step(token)
    if not isinstance(stop_reason, str):
        # Ended by length, a stop id or the processor: pending characters and held-back text are
        # ordinary output now, unless the tail completes a stop string after all.
        result = stops.feed(detok.flush())
        tail = result.text if result.stop is not None else result.text + stops.flush()
        if result.stop is not None:
            reason, stop_reason = "stop", result.stop
        if tail:
            pieces.append(tail)
            yield TextDelta(tail, pending)
    t_end = time.perf_counter()
    yield Finished(reason, "".join(pieces), out_ids, len(prompt_ids), len(out_ids), stop_reason,
                   {"ttft_s": t_first - t0, "total_s": t_end - t0})
