"""ChatEngine: render → generate → parse, answered in OpenAI's shapes.

One engine wraps one backend (one model, one KV cache), so generations take a lock. `chat` and
`chat_stream` run the same event pipeline — the loop's text deltas go through the tool-call
parser, whose events become either a folded message or stream deltas — which is what makes a
streamed answer equal the non-streamed one, tool calls included.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator

from chatlab.engine import shapes
from chatlab.engine.prepare import Plan, plan_chat, sampling
from chatlab.engine.request import ChatRequest, CompletionRequest

StopFn = Callable[[], bool] | None


class ChatEngine:
    def __init__(self, backend: Any, model_name: str, template: str | None = None) -> None:
        from chatlab.render import resolve

        self.backend, self.model_name = backend, model_name
        self.tokenizer = backend.tokenizer
        self.resolution = resolve(self.tokenizer, model_name=model_name, template=template)
        self.context_length = int(backend.context_length)
        self.created = int(time.time())
        self._lock = threading.Lock()

    @classmethod
    def load(cls, model: str = "smollm2-135m-instruct", backend: str = "torch",
             weight_format: str = "fp32", template: str | None = None, **options: Any) -> "ChatEngine":
        from chatlab.backends import load_backend

        return cls(load_backend(model, backend, weight_format, **options), model, template)

    # -- validation before anything is queued ------------------------------------------------
    def check(self, req: ChatRequest | CompletionRequest) -> Any:
        """Raise ChatlabError for anything wrong with the request (the server's 400s).
        Stand-in for the lead's Plan: returns the request, which the run methods take."""
        if isinstance(req, ChatRequest):
            plan = plan_chat(self.resolution, req)
            sampling(req, plan.stop, plan.stop_ids, len(plan.prompt_ids), self.context_length)
        else:
            for prompt in self._prompts(req):
                sampling(req, [], [], len(prompt), self.context_length)
        return req

    def render(self, req: ChatRequest) -> dict[str, Any]:
        """RTP-LLM's debug view: what the model will see, and which rule chose the template."""
        plan = plan_chat(self.resolution, req)
        return {"model": self.model_name, **plan.rendered.to_json(),
                "tool_format": plan.tool_format, "prompt_tokens": len(plan.prompt_ids)}

    # -- the event pipeline ------------------------------------------------------------------
    def _events(self, plan: Plan, params: Any, should_stop: StopFn) -> Iterator[Any]:
        """Parser events for one choice; the generator's return value is the loop's Finished."""
        from chatlab.generate import Finished, generate
        from chatlab.tools import get_parser
        from chatlab.tools.events import ContentDelta

        processor = None
        if plan.constrained:
            from chatlab.tools.constrain import build_processor

            processor = build_processor(self.tokenizer, self.backend.vocab_size, tools=plan.tools,
                                        tool_choice=plan.tool_choice,
                                        response_format=plan.response_format, fmt=plan.tool_format,
                                        stop_ids=plan.stop_ids or None)
        parser = get_parser(plan.tool_format, plan.tools) if plan.tool_format and not plan.response_format else None
        finished = None
        with self._lock:
            for ev in generate(self.backend, plan.prompt_ids, params, processor, should_stop):
                if isinstance(ev, Finished):
                    finished = ev
                elif parser is not None:
                    yield from parser.feed(ev.text)
                elif ev.text:
                    yield ContentDelta(ev.text)
        if parser is not None:
            yield from parser.finish()
        return finished

    def _plans(self, req: ChatRequest) -> Iterator[tuple[int, Plan, Any]]:
        plan = plan_chat(self.resolution, req)
        for i in range(req.n):
            yield i, plan, sampling(req, plan.stop, plan.stop_ids, len(plan.prompt_ids),
                                    self.context_length, seed_offset=i)

    @staticmethod
    def _finish_reason(finished: Any, calls: list[Any], legacy: bool) -> str:
        if calls:
            return "function_call" if legacy else "tool_calls"
        return finished.finish_reason

    def chat(self, req: ChatRequest, should_stop: StopFn = None) -> dict[str, Any]:
        from chatlab.tools.events import fold

        choices, prompt_tokens, completion_tokens = [], 0, 0
        for i, plan, params in self._plans(req):
            events = self._events(plan, params, should_stop)
            collected = []
            while True:
                try:
                    collected.append(next(events))
                except StopIteration as stop:
                    finished = stop.value
                    break
            result = fold(collected)
            calls = result.tool_calls[:1] if plan.legacy else result.tool_calls
            choices.append({"index": i, "message": shapes.message(result.content, calls, plan.legacy),
                            "logprobs": None,
                            "finish_reason": self._finish_reason(finished, calls, plan.legacy)})
            prompt_tokens, completion_tokens = finished.prompt_tokens, completion_tokens + finished.completion_tokens
        return shapes.completion(shapes.new_id("chatcmpl"), self.model_name, choices,
                                 shapes.usage(prompt_tokens, completion_tokens))

    def chat_stream(self, req: ChatRequest, should_stop: StopFn = None) -> Iterator[dict[str, Any]]:
        from chatlab.tools.events import ContentDelta, ToolCallArgs, ToolCallError, ToolCallStart

        cid, model = shapes.new_id("chatcmpl"), self.model_name
        prompt_tokens = completion_tokens = 0
        for i, plan, params in self._plans(req):
            yield shapes.chunk(cid, model, i, {"role": "assistant", "content": ""})
            events, calls, finished = self._events(plan, params, should_stop), [], None
            while True:
                try:
                    ev = next(events)
                except StopIteration as stop:
                    finished = stop.value
                    break
                if isinstance(ev, ContentDelta | ToolCallError) and ev.text:
                    yield shapes.chunk(cid, model, i, {"content": ev.text})
                elif isinstance(ev, ToolCallStart) and not (plan.legacy and calls):
                    calls.append(ev)
                    yield shapes.chunk(cid, model, i, shapes.call_start_delta(ev.index, ev.id, ev.name, plan.legacy))
                elif isinstance(ev, ToolCallArgs) and (not plan.legacy or ev.index == calls[0].index):
                    yield shapes.chunk(cid, model, i, shapes.call_args_delta(ev.index, ev.fragment, plan.legacy))
                elif isinstance(ev, ToolCallError) and ev.index is not None:
                    calls = [c for c in calls if c.index != ev.index]
            yield shapes.chunk(cid, model, i, {}, self._finish_reason(finished, calls, plan.legacy))
            prompt_tokens, completion_tokens = finished.prompt_tokens, completion_tokens + finished.completion_tokens
        if req.include_usage:
            yield shapes.usage_chunk(cid, model, shapes.usage(prompt_tokens, completion_tokens))

    # -- /v1/completions: raw text in, text out, no template -------------------------------
    def _prompts(self, req: CompletionRequest) -> list[list[int]]:
        prompts = [req.prompt] if isinstance(req.prompt, str) else req.prompt
        return [list(self.tokenizer.encode(p, add_special_tokens=False)) for p in prompts]

    def _completion_events(self, req: CompletionRequest, should_stop: StopFn) -> Iterator[tuple[int, str, Any]]:
        """(choice index, prompt text, loop event) for every prompt × n."""
        from chatlab.generate import generate

        texts = [req.prompt] if isinstance(req.prompt, str) else list(req.prompt)
        for p, (text, prompt) in enumerate(zip(texts, self._prompts(req))):
            for k in range(req.n):
                params = sampling(req, [], [], len(prompt), self.context_length, seed_offset=k)
                with self._lock:
                    for ev in generate(self.backend, prompt, params, None, should_stop):
                        yield p * req.n + k, text, ev

    def completion_stream(self, req: CompletionRequest, should_stop: StopFn = None) -> Iterator[dict[str, Any]]:
        from chatlab.generate import Finished

        cid, used = shapes.new_id("cmpl"), [0, 0]
        for index, prompt, ev in self._completion_events(req, should_stop):
            if isinstance(ev, Finished):
                used[0] += ev.prompt_tokens
                used[1] += ev.completion_tokens
                choice = {"index": index, "text": "", "logprobs": None, "finish_reason": ev.finish_reason}
            elif ev.text:
                choice = {"index": index, "text": ev.text, "logprobs": None, "finish_reason": None}
            else:
                continue
            yield shapes.text_completion(cid, self.model_name, [choice], None)
        if req.include_usage:
            yield shapes.text_completion(cid, self.model_name, [], shapes.usage(*used))

    def completion(self, req: CompletionRequest, should_stop: StopFn = None) -> dict[str, Any]:
        from chatlab.generate import Finished

        choices, used = [], [0, 0]
        for index, prompt, ev in self._completion_events(req, should_stop):
            if isinstance(ev, Finished):
                used[0] += ev.prompt_tokens
                used[1] += ev.completion_tokens
                choices.append({"index": index, "text": (prompt if req.echo else "") + ev.text,
                                "logprobs": None, "finish_reason": ev.finish_reason})
        return shapes.text_completion(shapes.new_id("cmpl"), self.model_name, choices,
                                      shapes.usage(*used))
