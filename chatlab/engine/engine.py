"""ChatEngine: a Plan in, OpenAI's shapes out.

`check(request)` builds the Plan (parse, render, validate: everything before the queue). The
chat path then runs one pipeline — the loop's text deltas go through the format's streaming
parser, whose events the Accumulator turns into deltas — and `chat` is literally the merge of
`chat_stream`'s chunks, so the two cannot disagree. The model is driven under a lease
(chatlab.engine.lease), never a lock held across `yield`.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from chatlab.engine import shapes
from chatlab.engine.bound import max_token_chars
from chatlab.engine.accumulate import Accumulator, merge_chunks, merge_text_chunks
from chatlab.engine.lease import ModelGuard
from chatlab.engine.plan import ChatPlan, CompletionPlan, plan_chat, plan_completion
from chatlab.engine.request import ChatRequest, CompletionRequest

StopFn = Callable[[], bool] | None


class ChatEngine:
    def __init__(self, backend: Any, model_name: str, template: str | None = None) -> None:
        from chatlab.render import resolve

        self.backend, self.model_name = backend, model_name
        self.tokenizer = backend.tokenizer
        self.vocab_size = int(backend.vocab_size)
        self.resolution = resolve(self.tokenizer, model_name=model_name, template=template)
        self.context_length = int(backend.context_length)
        self.created = int(time.time())
        self.guard = ModelGuard(backend)
        # the longest token in characters: bounds a prompt's tokens before tokenizing it
        self.max_token_chars = max_token_chars(self.tokenizer)

    @classmethod
    def load(cls, model: str = "smollm2-135m-instruct", backend: str = "torch",
             weight_format: str | None = None, template: str | None = None, **options: Any) -> "ChatEngine":
        from chatlab.backends import load_backend

        return cls(load_backend(model, backend, weight_format, **options), model, template)

    # -- before the queue ---------------------------------------------------------------------
    def check(self, req: ChatRequest | CompletionRequest) -> ChatPlan | CompletionPlan:
        """The request's Plan; ChatlabError for anything wrong with it (the server's 400s)."""
        if isinstance(req, ChatRequest):
            return plan_chat(self, req)
        return plan_completion(self, req)

    def render(self, req: ChatRequest) -> dict[str, Any]:
        """RTP-LLM's debug view: what the model will see, and which rule chose the template."""
        plan = plan_chat(self, req)
        fmt = plan.tool_format
        return {"model": self.model_name, **plan.rendered.to_json(),
                "tool_format": getattr(fmt, "name", fmt), "prompt_tokens": len(plan.prompt_ids)}

    # -- running a plan -----------------------------------------------------------------------
    def _generate(self, prompt_ids: tuple[int, ...], params: Any, processor: Any,
                  should_stop: StopFn) -> Iterator[Any]:
        """The loop's events under a lease, released when the generator ends or is closed."""
        from chatlab.generate import generate

        lease = self.guard.acquire()
        try:
            yield from generate(lease, list(prompt_ids), params, processor, should_stop)
        finally:
            lease.release()

    def _constraint(self, plan: ChatPlan) -> Any:
        """What `_generate` gets to enforce the plan's constraint (a subclass with another token
        source hands over its own adaptation, `plan.adapted`; chatlab's loop takes a logits
        processor over the compiled grammar the plan carries)."""
        return _processor(self, plan)

    def _choice_events(self, plan: ChatPlan, params: Any, should_stop: StopFn) -> Iterator[Any]:
        """Parser events for one choice, with two more kinds among them: the tokens' logprobs
        (a list, when asked for), and the loop's Finished, which comes before the parser's
        final events so that the accumulator knows whether the reply was cut short."""
        from chatlab.generate import Finished
        from chatlab.tools.events import ContentDelta

        processor = self._constraint(plan) if plan.constrained else None
        parser = _parser(plan) if plan.tool_format is not None else None
        for ev in self._generate(plan.prompt_ids, params, processor, should_stop):
            if isinstance(ev, Finished):
                yield ev
                continue
            if ev.logprobs:
                yield list(ev.logprobs)
            if parser is not None:
                yield from parser.feed(ev.text)
            elif ev.text:
                yield ContentDelta(ev.text)
        if parser is not None:
            yield from parser.finish()

    def _chunks(self, plan: ChatPlan, should_stop: StopFn, usage: bool) -> Iterator[dict[str, Any]]:
        from chatlab.generate import Finished

        cid, model = shapes.new_id("chatcmpl"), self.model_name
        prompt_tokens = completion_tokens = 0
        for i, params in enumerate(plan.params):
            yield shapes.chunk(cid, model, i, {"role": "assistant", "content": ""})
            acc, finished, tokens = Accumulator(plan.legacy), None, []
            for ev in self._choice_events(plan, params, should_stop):
                if isinstance(ev, Finished):
                    finished = acc.finished = ev
                elif isinstance(ev, list):
                    tokens += ev  # travel with the next chunk (a parser may hold their text)
                else:
                    for delta in acc.feed(ev):
                        yield shapes.chunk(cid, model, i, delta, logprobs=_take(tokens))
            assert finished is not None  # the loop always ends with one
            yield shapes.chunk(cid, model, i, {}, acc.finish_reason(finished.finish_reason),
                               logprobs=_take(tokens))
            prompt_tokens = finished.prompt_tokens
            completion_tokens += finished.completion_tokens
        if usage:
            yield shapes.usage_chunk(cid, model, shapes.usage(prompt_tokens, completion_tokens))

    def chat_stream(self, plan: ChatPlan | ChatRequest, should_stop: StopFn = None) -> Iterator[dict[str, Any]]:
        plan = plan if isinstance(plan, ChatPlan) else plan_chat(self, plan)
        return self._chunks(plan, should_stop, plan.include_usage)

    def chat(self, plan: ChatPlan | ChatRequest, should_stop: StopFn = None) -> dict[str, Any]:
        """The non-streamed answer: by construction, the merge of the streamed chunks."""
        plan = plan if isinstance(plan, ChatPlan) else plan_chat(self, plan)
        return merge_chunks(list(self._chunks(plan, should_stop, usage=True)))

    # -- /v1/completions: raw text in, text out, no template ----------------------------------
    def completion_stream(self, plan: CompletionPlan | CompletionRequest,
                          should_stop: StopFn = None) -> Iterator[dict[str, Any]]:
        from chatlab.generate import Finished, completion_logprobs

        plan = plan if isinstance(plan, CompletionPlan) else plan_completion(self, plan)
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

    def completion(self, plan: CompletionPlan | CompletionRequest, should_stop: StopFn = None) -> dict[str, Any]:
        plan = plan if isinstance(plan, CompletionPlan) else plan_completion(self, plan)
        full = CompletionPlan(plan.prompts, plan.params, plan.echo, False, True, plan.user)
        return merge_text_chunks(list(self.completion_stream(full, should_stop)))


def _text_choice(index: int, text: str, finish_reason: str | None = None,
                 logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}


def _take(tokens: list[Any]) -> dict[str, Any] | None:
    """The chat logprobs of the tokens gathered so far (emptying the list), or None."""
    from chatlab.generate import chat_logprobs

    if not tokens:
        return None
    out = chat_logprobs(tokens)
    tokens.clear()
    return out


def _parser(plan: ChatPlan) -> Any:
    return plan.tool_format.parser(plan.tools)


def _processor(engine: ChatEngine, plan: ChatPlan) -> Any:
    """The plan's compiled grammar as a fresh logits processor (it holds this run's matcher)."""
    from chatlab.tools.constrain import processor_for

    return processor_for(plan.constraint, engine.vocab_size)
