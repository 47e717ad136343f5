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
from chatlab.generate.logprobs import Recorder, TokenLogprob
from chatlab.generate.sampling import Sampler, SamplingParams
from chatlab.generate.stops import StopMatcher


@dataclass
class TextDelta:
    text: str
    # the tokens whose text starts within this delta (text may lag them: a token that is half a
    # character, or the start of a possible stop string, waits for the delta that shows it)
    token_ids: list[int]
    logprobs: list[TokenLogprob] | None = None  # one per token_ids entry, when params.logprobs


@dataclass
class Finished:
    finish_reason: str  # "stop" or "length"
    text: str  # the whole reply, stop string removed
    token_ids: list[int]  # every sampled token, the stop id included when one ended the reply
    prompt_tokens: int
    completion_tokens: int
    stop_reason: str | int | None = None  # the stop string or stop id that matched
    timings: dict[str, float] = field(default_factory=dict)
    # With params.logprobs: the tokens no TextDelta carried, i.e. the stop id, the tokens of a
    # removed stop string and tokens that decoded to nothing. OpenAI reports none of these for
    # the reply, so a server uses the deltas' entries; these complete the loop's own record
    # (all events' entries together: exactly one per token in `token_ids`).
    logprobs: list[TokenLogprob] | None = None


class _Pending:
    """Sampled tokens not yet attached to an event, each with where its text starts."""

    def __init__(self, with_logprobs: bool) -> None:
        self.with_logprobs = with_logprobs
        self.items: list[tuple[int, int, TokenLogprob | None]] = []

    def add(self, token: int, start: int, lp: TokenLogprob | None) -> None:
        self.items.append((token, start, lp))

    def take(self, shown: int | None = None) -> tuple[list[int], list[TokenLogprob] | None]:
        """The tokens whose text starts before character `shown` of the reply (all if None)."""
        cut = len(self.items) if shown is None else sum(1 for _, start, _ in self.items if start < shown)
        taken, self.items = self.items[:cut], self.items[cut:]
        lps = [lp for _, _, lp in taken if lp is not None] if self.with_logprobs else None
        return [t for t, _, _ in taken], lps


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
    """Stream TextDelta events, then exactly one Finished.

    Per token: grammar mask -> logit_bias -> (logprobs, when asked) -> penalty and sampling.
    """
    import time

    params = params or SamplingParams()
    params.validate(getattr(backend, "context_length", None), len(prompt_ids),
                    getattr(backend, "vocab_size", None))
    if not prompt_ids:
        from chatlab.errors import ChatlabError

        raise ChatlabError("the prompt is empty; render at least one message before generating")
    stop_ids = stop_ids_for(backend, params)
    sampler = Sampler(params)
    if params.repetition_penalty != 1.0:
        sampler.seen.extend(prompt_ids)
    # A backend may offer a lighter `decoder` than its chat tokenizer (OpenVINO: no torch).
    decoder = getattr(backend, "decoder", None) or backend.tokenizer
    detok = IncrementalDetokenizer(decoder)
    recorder = Recorder(decoder, params.top_logprobs) if params.logprobs else None
    stops = StopMatcher(params.stop)
    terminated = getattr(logits_processor, "is_terminated", None)

    out_ids: list[int] = []
    pieces: list[str] = []
    pending = _Pending(params.logprobs)
    decoded = shown = 0  # characters out of the detokenizer / shown in deltas so far
    stop_lp: list[TokenLogprob] = []  # the stop id's entry: never part of a delta
    reason, stop_reason = "length", None
    t0 = time.perf_counter()
    logits = backend.prefill(prompt_ids)
    t_first = 0.0
    for n in range(params.max_new_tokens):
        if logits_processor is not None:
            masked = logits_processor.mask(logits)
            logits = logits if masked is None else masked
        logits = sampler.bias(logits)
        if recorder is not None:
            recorder.observe(logits)  # before sampling: the penalty edits the row in place
        token = sampler(logits)
        if n == 0:
            t_first = time.perf_counter()
        if logits_processor is not None:
            logits_processor.accept(token)
        out_ids.append(token)
        lp = recorder.record(token, decoded) if recorder is not None else None
        if params.repetition_penalty != 1.0:
            sampler.seen.append(token)
        if token in stop_ids:
            reason, stop_reason = "stop", token
            stop_lp = [lp] if lp is not None else []
            break
        pending.add(token, decoded, lp)
        delta = detok.add(token)
        decoded += len(delta)
        result = stops.feed(delta)
        if result.text:
            pieces.append(result.text)
            shown += len(result.text)
            yield TextDelta(result.text, *pending.take(shown))
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
            shown += len(tail)
            yield TextDelta(tail, *pending.take(shown))
    _, rest = pending.take()  # tokens of a removed stop string, or that decoded to nothing
    t_end = time.perf_counter()
    yield Finished(reason, "".join(pieces), out_ids, len(prompt_ids), len(out_ids), stop_reason,
                   {"ttft_s": t_first - t0, "total_s": t_end - t0},
                   None if rest is None else rest + stop_lp)
