"""What the server needs from an engine (chatlab.engine.ChatEngine is one; the tests' fake
in tests/fake_engine.py is another): a few facts for the model card and the queue, `check` to
turn a request into a plan before queueing (every 400 is raised there), and the calls that run
a checked plan."""
from __future__ import annotations

from typing import Iterator, Protocol, overload

from chatlab._thirdparty import Jsonable
from chatlab.engine.plan import ChatPlan, CompletionPlan
from chatlab.engine.request import ChatRequest, CompletionRequest
from chatlab.generate import StopFn
from chatlab.types.responses import ChatCompletion, ChatCompletionChunk, TextCompletion, TextCompletionChunk


class Engine(Protocol):
    @property
    def model_name(self) -> str: ...
    @property
    def created(self) -> int: ...
    @property
    def context_length(self) -> int: ...
    @property
    def max_concurrency(self) -> int: ...  # sequences it runs at once: the queue's workers

    @overload
    def check(self, req: ChatRequest) -> ChatPlan: ...
    @overload
    def check(self, req: CompletionRequest) -> CompletionPlan: ...
    def check(self, req: ChatRequest | CompletionRequest) -> ChatPlan | CompletionPlan: ...

    def render(self, req: ChatRequest) -> dict[str, Jsonable]: ...
    def chat(self, plan: ChatPlan, should_stop: StopFn | None = None) -> ChatCompletion: ...
    def chat_stream(self, plan: ChatPlan, should_stop: StopFn | None = None) -> Iterator[ChatCompletionChunk]: ...
    def completion(self, plan: CompletionPlan, should_stop: StopFn | None = None) -> TextCompletion: ...
    def completion_stream(self, plan: CompletionPlan,
                          should_stop: StopFn | None = None) -> Iterator[TextCompletionChunk]: ...
