"""The one fake engine the server tests share (chatlab.serve.app.Engine without a model).

It answers with a fixed script of words and controls time: `gate` holds every non-streamed
run until set, `hold` keeps each run going (up to that many seconds, or until `release` is set)
while watching `should_stop`, and `check_seconds` stands for rendering and grammar compilation.
It records what the server did with it: `runs`, `stopped` (a run saw should_stop() become
true), and `streamed` (how many words each stream got out before it ended).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator, TypeVar

from chatlab.engine import shapes
from chatlab.errors import ChatlabError
from chatlab.types.responses import (ChatCompletion, ChatCompletionChunk, TextCompletion,
                                     TextCompletionChunk)

StopFn = Callable[[], bool]
T = TypeVar("T")


class FakeEngine:
    created, max_concurrency = 0, 1

    def __init__(self, words: list[str] | None = None, model_name: str = "scripted",
                 context_length: int = 64, delay: float = 0.0, hold: float = 0.0,
                 check_seconds: float = 0.0) -> None:
        self.words = ["done"] if words is None else words
        self.model_name, self.context_length = model_name, context_length
        self.delay, self.hold, self.check_seconds = delay, hold, check_seconds
        self.gate = threading.Event()
        self.gate.set()
        self.release = threading.Event()  # ends every held run now, as a finished generation would
        self.stopped = threading.Event()
        self.streamed: list[int] = []
        self.runs = 0

    def check(self, req: Any) -> Any:
        """The real engine's contract: the request arrives parsed (chat domain included, by
        chatlab.types inside parse_request); what depends on the model raises with its param.
        The request stands in for its plan."""
        time.sleep(self.check_seconds)
        if (req.max_new_tokens or 0) > self.context_length:
            raise ChatlabError(f"max_tokens={req.max_new_tokens} exceeds the context window of "
                               f"{self.context_length}", param="max_tokens")
        return req

    def render(self, req: Any) -> dict[str, Any]:
        return {"model": self.model_name, "text": "rendered", "ids": [1, 2], "rule": "explicit"}

    def _hold(self, should_stop: StopFn | None) -> None:
        self.runs += 1
        deadline = time.monotonic() + self.hold
        while time.monotonic() < deadline and not self.release.is_set():
            if should_stop is not None and should_stop():
                self.stopped.set()
                return
            time.sleep(0.01)

    def _answer(self, plan: Any, should_stop: StopFn | None) -> str:
        self.gate.wait(10)
        if plan.user == "boom":
            raise RuntimeError("secret internal detail")
        self._hold(should_stop)
        return " ".join(self.words)

    def _stream(self, should_stop: StopFn | None, piece: Callable[[str], T]) -> Iterator[T]:
        """One piece per word, as the words come; then the hold."""
        n = 0
        try:
            for word in self.words:
                if should_stop is not None and should_stop():
                    break
                time.sleep(self.delay)
                n += 1
                yield piece(word)
        finally:  # also when the server closes the stream early
            self.streamed.append(n)
        self._hold(should_stop)

    def chat(self, plan: Any, should_stop: StopFn | None = None) -> ChatCompletion:
        text = self._answer(plan, should_stop)
        return shapes.completion("chatcmpl-1", self.model_name,
                                 [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                                   "logprobs": None, "finish_reason": "stop"}],
                                 shapes.usage(3, len(self.words)))

    def chat_stream(self, plan: Any, should_stop: StopFn | None = None) -> Iterator[ChatCompletionChunk]:
        yield shapes.chunk("c", self.model_name, 0, {"role": "assistant", "content": ""})
        yield from self._stream(should_stop, lambda word: shapes.chunk("c", self.model_name, 0, {"content": word}))
        yield shapes.chunk("c", self.model_name, 0, {}, "stop")

    def completion(self, plan: Any, should_stop: StopFn | None = None) -> TextCompletion:
        text = self._answer(plan, should_stop)
        return {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": self.model_name,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}],
                "usage": shapes.usage(3, len(self.words))}

    def completion_stream(self, plan: Any, should_stop: StopFn | None = None) -> Iterator[TextCompletionChunk]:
        yield from self._stream(should_stop, lambda word: shapes.text_completion(
            "c", self.model_name, [{"index": 0, "text": word, "logprobs": None, "finish_reason": None}], None))
        yield shapes.text_completion("c", self.model_name,
                                     [{"index": 0, "text": "", "logprobs": None, "finish_reason": "stop"}], None)
