"""ChatEngine: a Plan in, OpenAI's shapes out, over a token source (chatlab's loop over a step
backend, or a batched pipeline). `chat` is the merge of `chat_stream`'s chunks."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Iterator, Protocol, overload

from chatlab._thirdparty import Jsonable, LoaderOption, Processor
from chatlab.backends.registry import DEFAULT_BACKEND, check_choice, load_backend, speculation_options
from chatlab.engine import shapes
from chatlab.engine.batched import GenaiSource
from chatlab.engine.bound import TokenBound
from chatlab.engine.lease import ModelGuard, PrefixCache
from chatlab.engine.plan import ChatPlan, CompletionPlan, plan_chat, plan_completion
from chatlab.engine.request import ChatRequest, CompletionRequest
from chatlab.errors import ChatlabError
from chatlab.generate import (Event, Finished, SamplingParams, Speculation, StopFn, TokenLogprob, chat_logprobs,
                              completion_logprobs, generate)
from chatlab.generate.speculate import check_backend, prepare
from chatlab.protocols import AnyBackend, BatchedBackend, ModelFacts, StepBackend
from chatlab.render.resolve import TemplateChoice, resolve
from chatlab.tools.constrain import processor_for
from chatlab.tools.stream import ContentDelta, ParserEvent
from chatlab.types.responses import (ChatCompletion, ChatCompletionChunk, ChatLogprobs, TextChoice,
                                     TextCompletion, TextCompletionChunk, TextLogprobs)

if TYPE_CHECKING:
    # what one choice yields to the accumulator: parser events, a token's logprobs, the end
    ChoiceEvent = ParserEvent | list[TokenLogprob] | Finished


class TokenSource(Protocol):
    """What an engine drains: the events of one sequence at a time."""

    @property
    def backend(self) -> ModelFacts: ...

    max_concurrency: int  # sequences it runs at once: the server's jobs side by side

    def refuse(self, req: "ChatRequest | CompletionRequest") -> None:
        """Raise ChatlabError for what this source cannot do (before planning: a 400)."""

    def accept(self, plan: "ChatPlan | CompletionPlan") -> "ChatPlan | CompletionPlan":
        """The plan with its constraint adapted once to this source; ChatlabError (a 400) if it cannot run."""

    def constraint(self, plan: "ChatPlan") -> Processor:
        """What `events` gets to enforce the plan's grammar, in this source's own kind."""

    def events(self, prompt_ids: tuple[int, ...], params: "SamplingParams", processor: Processor,
               should_stop: StopFn | None) -> Iterator["Event"]:
        """The loop's events (TextDelta..., then Finished) for one sequence."""


def refuse_loop_speedups(backend: str, speculate: Speculation | None, reuse_prefix: bool) -> None:
    """Speculation and prefix reuse belong to chatlab's loop: refused for a batched backend."""
    if speculate is not None or reuse_prefix:
        raise ChatlabError(f"speculate and reuse_prefix drive chatlab's own loop; the {backend} "
                           "backend batches and schedules its own tokens. Use --backend openvino "
                           "(or torch) for them, or leave them out (on genai, --reuse-prefix is "
                           "its own prefix caching: prefix_caching=True)")


class LoopSource:
    """chatlab's own loop over a step backend, one sequence at a time under a lease."""

    max_concurrency = 1

    def __init__(self, backend: StepBackend, speculate: Speculation | None = None,
                 reuse_prefix: bool = False) -> None:
        self.padded: bool | None = None  # whether verify passes are padded (when speculating)
        if speculate is not None:
            check_backend(backend)
            self.padded = prepare(backend, speculate)  # now, not in the first request (OpenVINO: a compile)
        self.prefix = PrefixCache(backend) if reuse_prefix else None
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


class ChatEngine:
    """A backend's engine; `speculate` and `reuse_prefix` are the loop's (LoopSource)."""

    def __init__(self, backend: AnyBackend, model_name: str, template: "TemplateChoice" = None,
                 speculate: Speculation | None = None, reuse_prefix: bool = False) -> None:
        self.source: TokenSource = source_for(backend, speculate, reuse_prefix)
        loop = self.source if isinstance(self.source, LoopSource) else None
        self.prefix: PrefixCache | None = loop.prefix if loop is not None else None
        self.guard: ModelGuard | None = loop.guard if loop is not None else None
        self.backend, self.model_name = backend, model_name
        self.tokenizer = backend.tokenizer
        self.vocab_size = int(backend.vocab_size)
        self.resolution = resolve(self.tokenizer, model_name=model_name, template=template)
        self.context_length = int(backend.context_length)
        self.created = int(time.time())
        self.token_bound = TokenBound.of(self.tokenizer)
        self.max_concurrency = self.source.max_concurrency

    @overload
    def check(self, req: ChatRequest) -> ChatPlan: ...
    @overload
    def check(self, req: CompletionRequest) -> CompletionPlan: ...
    @overload
    def check(self, req: ChatRequest | CompletionRequest) -> ChatPlan | CompletionPlan: ...

    def check(self, req: ChatRequest | CompletionRequest) -> ChatPlan | CompletionPlan:
        """The request's Plan; ChatlabError for anything wrong with it (the server's 400s)."""
        self.source.refuse(req)
        plan: ChatPlan | CompletionPlan = plan_chat(self, req) if isinstance(req, ChatRequest) \
            else plan_completion(self, req)
        return self.source.accept(plan)

    def render(self, req: ChatRequest) -> dict[str, Jsonable]:
        """RTP-LLM's debug view: what the model will see, and which rule chose the template."""
        plan = plan_chat(self, req)
        fmt = plan.tool_format
        assert plan.rendered is not None  # plan_chat keeps its render
        return {"model": self.model_name, **plan.rendered.to_json(),
                "tool_format": fmt.name if fmt is not None else None, "prompt_tokens": len(plan.prompt_ids)}

    def _generate(self, prompt_ids: tuple[int, ...], params: SamplingParams, processor: Processor,
                  should_stop: StopFn | None) -> Iterator[Event]:
        return self.source.events(prompt_ids, params, processor, should_stop)

    def _constraint(self, plan: ChatPlan) -> Processor:
        return self.source.constraint(plan) if plan.constrained else None

    def events(self, plan: ChatPlan, choice: int = 0, should_stop: StopFn | None = None) -> Iterator[Event]:
        """The token source's events (TextDelta..., then Finished) for one choice of a plan."""
        processor = self._constraint(plan)
        return self._generate(plan.prompt_ids, plan.params[choice], processor, should_stop)

    def _choice_events(self, plan: ChatPlan, params: SamplingParams,
                       should_stop: StopFn | None) -> Iterator[ChoiceEvent]:
        """Parser events for one choice, with token logprobs (lists) and the loop's Finished,
        which comes before the parser's final events so the accumulator knows of a cut."""
        fmt = plan.tool_format
        parser = fmt.parser(plan.tools) if fmt is not None else None
        cut = False  # the length limit ended the reply: a call whose name is complete stays one
        for ev in self._generate(plan.prompt_ids, params, self._constraint(plan), should_stop):
            if isinstance(ev, Finished):
                cut = ev.finish_reason == "length"
                yield ev
                continue
            if ev.logprobs:
                yield list(ev.logprobs)
            if parser is not None:
                yield from parser.feed(ev.text)
            elif ev.text:
                yield ContentDelta(ev.text)
        if parser is not None:
            yield from parser.finish(cut)

    def _chunks(self, plan: ChatPlan, should_stop: StopFn | None, usage: bool) -> Iterator[ChatCompletionChunk]:
        cid, model = shapes.new_id("chatcmpl"), self.model_name
        prompt_tokens = completion_tokens = 0
        # a forced call (tool_choice "required" or named) that its parser reads
        forced = plan.tool_format is not None and bool(plan.tools) and plan.choice.mode in (
            "named", "required")
        for i, params in enumerate(plan.params):
            yield shapes.chunk(cid, model, i, {"role": "assistant", "content": ""})
            acc, finished, tokens = shapes.Accumulator(plan.legacy), None, []
            for ev in self._choice_events(plan, params, should_stop):
                if isinstance(ev, Finished):
                    finished = acc.finished = ev
                elif isinstance(ev, list):
                    tokens += ev  # travel with the next chunk (a parser may hold their text)
                else:
                    for delta in acc.feed(ev):
                        yield shapes.chunk(cid, model, i, delta, logprobs=_take(tokens))
            assert finished is not None  # the loop always ends with one
            if forced and finished.finish_reason == "length" and not acc.wire:
                raise ChatlabError(
                    f"max_tokens={params.max_new_tokens} ended the reply before the forced tool "
                    "call's name was complete, so there is no call to return; raise max_tokens "
                    "(or max_completion_tokens) to leave room for the whole call", param="max_tokens")
            yield shapes.chunk(cid, model, i, {}, acc.finish_reason(finished.finish_reason),
                               logprobs=_take(tokens))
            prompt_tokens = finished.prompt_tokens
            completion_tokens += finished.completion_tokens
        if usage:
            yield shapes.usage_chunk(cid, model, shapes.usage(prompt_tokens, completion_tokens))

    def chat_stream(self, plan: ChatPlan, should_stop: StopFn | None = None) -> Iterator[ChatCompletionChunk]:
        """The streamed answer to a plan from `check` (which applied every refusal)."""
        return self._chunks(plan, should_stop, plan.include_usage)

    def chat(self, plan: ChatPlan, should_stop: StopFn | None = None) -> ChatCompletion:
        """The non-streamed answer: by construction, the merge of the streamed chunks."""
        return shapes.merge_chunks(list(self._chunks(plan, should_stop, usage=True)))

    def completion_stream(self, plan: CompletionPlan,
                          should_stop: StopFn | None = None) -> Iterator[TextCompletionChunk]:
        cid, used = shapes.new_id("cmpl"), [0, 0]
        n = len(plan.params[0])
        for p, ((text, ids), per_choice) in enumerate(zip(plan.prompts, plan.params)):
            for k, params in enumerate(per_choice):
                index = p * n + k
                if plan.echo:
                    yield shapes.text_completion(cid, self.model_name, [_text_choice(index, text)], None)
                for ev in self._generate(ids, params, None, should_stop):
                    if isinstance(ev, Finished):
                        used[0] += ev.prompt_tokens
                        used[1] += ev.completion_tokens
                        choice = _text_choice(index, "", ev.finish_reason)
                    elif ev.text or ev.logprobs:
                        lp = completion_logprobs(ev.logprobs) if ev.logprobs else None
                        choice = _text_choice(index, ev.text, None, lp)
                    else:
                        continue
                    yield shapes.text_completion(cid, self.model_name, [choice], None)
        if plan.include_usage:
            yield shapes.text_completion(cid, self.model_name, [], shapes.usage(*used))

    def completion(self, plan: CompletionPlan, should_stop: StopFn | None = None) -> TextCompletion:
        full = CompletionPlan(plan.prompts, plan.params, plan.echo, False, True, plan.user)
        return shapes.merge_text_chunks(list(self.completion_stream(full, should_stop)))


def source_for(backend: AnyBackend, speculate: Speculation | None = None,
               reuse_prefix: bool = False) -> TokenSource:
    """chatlab's loop for a step backend, the backend's own batching for a batched one."""
    if isinstance(backend, StepBackend):
        return LoopSource(backend, speculate, reuse_prefix)
    if isinstance(backend, BatchedBackend):
        refuse_loop_speedups(backend.name, speculate, reuse_prefix)
        return GenaiSource(backend)
    raise ChatlabError(f"{backend!r} has no prefill/step for chatlab's loop, nor submit/close for "
                       "a batched pipeline; give the engine a backend from chatlab.backends.load_backend")


def _text_choice(index: int, text: str, finish_reason: str | None = None,
                 logprobs: TextLogprobs | None = None) -> TextChoice:
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}


def _take(tokens: list[TokenLogprob]) -> ChatLogprobs | None:
    """The chat logprobs of the tokens gathered so far (emptying the list), or None."""
    if not tokens:
        return None
    out = chat_logprobs(tokens)
    tokens.clear()
    return out


def load_engine(model: str = "smollm2-135m-instruct", backend: str = DEFAULT_BACKEND,
                weight_format: str | None = None, template: "TemplateChoice" = None,
                precision: str | None = None, speculate: "Speculation | None" = None,
                reuse_prefix: bool = False, **options: LoaderOption) -> ChatEngine:
    """A ready engine for `model` on `backend`, every name and option checked before loading."""
    if speculate is not None:
        options = speculation_options(backend, options)
    spec, weight_format = check_choice(backend, weight_format, options)
    if spec.source == "batched":
        refuse_loop_speedups(backend, speculate, reuse_prefix)  # before a slow load
    loaded = load_backend(model, backend, weight_format, precision, **options)
    return ChatEngine(loaded, model, template, speculate=speculate, reuse_prefix=reuse_prefix)
