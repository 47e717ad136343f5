"""The generation loop: prefill once, then sample → stop checks → stream → step, per token.

This is the whole of what `model.generate()` or an engine does for one chat reply, written out
so that each decision is visible: which ids end the reply (the template's stop ids merged with
the model's eos), when text may be shown (after the detokenizer has a whole character and the
stop matcher knows it is not the start of a stop string), and what is counted.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from chatlab.protocols import ModelFacts, StepBackend
from chatlab.generate.assemble import Finished, TextAssembler, TextDelta
from chatlab.generate.logprobs import Recorder
from chatlab.generate.sampling import Sampler, SamplingParams

Event = TextDelta | Finished  # re-exported: the loop's events are the assembler's


def stop_ids_for(backend: ModelFacts, params: SamplingParams) -> set[int]:
    """The template's stop ids plus the model's own eos ids (unless `ignore_eos`)."""
    ids = set(params.stop_ids)
    if not params.ignore_eos:
        ids.update(getattr(backend, "eos_ids", []) or [])
    return ids


def generate(backend: StepBackend, prompt_ids: list[int], params: SamplingParams | None = None,
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
    recorder = Recorder(decoder, params.top_logprobs) if params.logprobs else None
    text = TextAssembler(decoder, params.stop, stop_ids, len(prompt_ids), params.logprobs)
    terminated = getattr(logits_processor, "is_terminated", None)

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
        lp = recorder.record(token, text.decoded) if recorder is not None else None
        sampler.accept(token)
        delta = text.add(token, lp)
        if delta is not None:
            yield delta
        if text.done:
            break
        if (terminated is not None and terminated()) or (should_stop is not None and should_stop()):
            text.halt()
            break
        if n + 1 < params.max_new_tokens:  # no step after the last token: nobody reads it
            logits = backend.step(token)
    t_end = time.perf_counter()
    yield from text.finish({"ttft_s": t_first - t0, "total_s": t_end - t0})
