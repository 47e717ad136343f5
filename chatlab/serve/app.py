"""The OpenAI-compatible HTTP surface: routes, auth, limits, the OpenAPI document. A bad request is
a 400 before it queues; any model name is answered by the one served (RTP-LLM's rule)."""
from __future__ import annotations

import json
import secrets
from typing import Iterator, Protocol, TypedDict, TypeVar, overload

from fastapi import Depends, FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from pydantic.json_schema import models_json_schema
from starlette.concurrency import run_in_threadpool

from chatlab._thirdparty import Jsonable
from chatlab.engine.plan import ChatPlan, CompletionPlan
from chatlab.engine.request import ChatRequest, CompletionRequest, SamplingFields, parse_request
from chatlab.generate import StopFn
from chatlab.serve.errors import APIError, BodyLimit, CatchAll, install_handlers
from chatlab.serve.queue import FairQueue, run
from chatlab.types.responses import ChatCompletion, ChatCompletionChunk, TextCompletion, TextCompletionChunk

_R = TypeVar("_R", bound=SamplingFields)
REF = "#/components/schemas/{model}"


class Engine(Protocol):
    """What the routes need from an engine: its facts, `check` (every 400), and the runs."""

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


class AppOptions(TypedDict, total=False):  # create_app's keywords, as start_server passes them
    api_key: str | None
    max_waiting: int
    max_messages: int
    max_body_bytes: int
    strict_model_name: bool


def read_request(raw: bytes, cls: type[_R]) -> _R:
    """JSON text to a validated request (on a worker thread: a 2 MB body takes a while)."""
    try:
        data = json.loads(raw)
    except RecursionError:
        raise APIError(400, "the request body is nested too deeply to parse; flatten it") from None
    except ValueError:  # also bad UTF-8 and integers over 4,300 digits
        raise APIError(400, "the request body is not valid JSON; send a JSON object") from None
    return parse_request(data, cls)


def body_doc(cls: type) -> dict[str, Jsonable]:
    """The request model in the document (the route reads its body itself)."""
    schema = {"$ref": REF.format(model=cls.__name__)}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def openapi_schema(app: FastAPI) -> dict[str, Jsonable]:
    if app.openapi_schema is None:
        doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
        _, defs = models_json_schema([(ChatRequest, "validation"), (CompletionRequest, "validation")],
                                     ref_template=REF)
        doc.setdefault("components", {}).setdefault("schemas", {}).update(defs.get("$defs", {}))
        app.openapi_schema = doc
    return app.openapi_schema


def create_app(engine: Engine, *, api_key: str | None = None, max_waiting: int = 32,
               max_messages: int = 256, max_body_bytes: int = 2_000_000,
               strict_model_name: bool = False) -> FastAPI:
    app = FastAPI(title="chatlab", docs_url=None, redoc_url=None, openapi_url=None)
    install_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    app.add_middleware(CatchAll)  # outermost: whatever escapes below ends here
    queue = FairQueue(max_waiting=max_waiting, workers=int(engine.max_concurrency))
    app.state.queue, app.state.engine = queue, engine
    app.router.on_shutdown.append(queue.close)
    # routes read the engine from app.state (FastAPI's caches would keep a closure's model alive)
    app.router.on_shutdown.append(lambda: setattr(app.state, "engine", None))

    def served() -> Engine:
        current: Engine | None = app.state.engine
        if current is None:  # only reachable in the instant between shutdown and the socket closing
            raise APIError(503, "this server has stopped; start a new one (chatlab.serve.start_server)",
                           code="server_stopped")
        return current

    def auth(request: Request) -> None:
        if api_key is None:
            return
        # RFC 7235: the scheme is case-insensitive ("bearer KEY" is "Bearer KEY")
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        right_key = secrets.compare_digest(token.lstrip(" ").encode(), api_key.encode())
        if scheme.lower() != "bearer" or not right_key:
            raise APIError(401, "missing or wrong API key; send the header "
                           "'Authorization: Bearer <key>' with the key the server was started with",
                           code="invalid_api_key")

    def not_served(name: str | None) -> APIError:
        return APIError(404, f"the model {(name or '')[:80]!r} is not served here; use "
                        f"{served().model_name!r} (see GET /v1/models)", "model", "model_not_found")

    def serves(name: str | None) -> bool:
        """The one model-name rule, for requests and GET /v1/models/{id} alike."""
        return not strict_model_name or name in (None, "", served().model_name)

    async def accept(request: Request, cls: type[_R]) -> _R:
        req = await run_in_threadpool(read_request, await request.body(), cls)
        if not serves(req.model):
            raise not_served(req.model)
        if isinstance(req, ChatRequest) and len(req.messages) > max_messages:
            raise APIError(400, f"{len(req.messages)} messages is over the limit of {max_messages}; "
                           "drop or summarise earlier turns", "messages")
        return req

    def card() -> dict[str, Jsonable]:
        engine = served()
        return {"id": engine.model_name, "object": "model", "created": engine.created,
                "owned_by": "chatlab", "max_model_len": engine.context_length}

    @app.get("/health")
    async def health() -> dict[str, Jsonable]:
        return {"status": "ok", "model": served().model_name, "waiting": queue.waiting}

    @app.get("/openapi.json", dependencies=[Depends(auth)], include_in_schema=False)
    async def openapi() -> dict[str, Jsonable]:
        return openapi_schema(app)

    @app.get("/v1/models", dependencies=[Depends(auth)])
    async def models() -> dict[str, Jsonable]:
        return {"object": "list", "data": [card()]}

    @app.get("/v1/models/{model_id:path}", dependencies=[Depends(auth)])
    async def model(model_id: str) -> dict[str, Jsonable]:
        if not serves(model_id):  # the card says which model answers, as a response's `model`
            raise not_served(model_id)
        return card()

    @app.post("/v1/chat/completions", dependencies=[Depends(auth)], openapi_extra=body_doc(ChatRequest))
    async def chat(request: Request) -> Response:
        req, engine = await accept(request, ChatRequest), served()
        plan = await run_in_threadpool(engine.check, req)
        work = engine.chat_stream if req.stream else engine.chat
        return await run(request, queue, req, lambda stop: work(plan, stop))

    @app.post("/v1/completions", dependencies=[Depends(auth)], openapi_extra=body_doc(CompletionRequest))
    async def completions(request: Request) -> Response:
        req, engine = await accept(request, CompletionRequest), served()
        plan = await run_in_threadpool(lambda: engine.check(req))  # (a lambda: check is overloaded)
        work = engine.completion_stream if req.stream else engine.completion
        return await run(request, queue, req, lambda stop: work(plan, stop))

    @app.post("/v1/chat/render", dependencies=[Depends(auth)], openapi_extra=body_doc(ChatRequest))
    async def render(request: Request) -> dict[str, Jsonable]:
        req = await accept(request, ChatRequest)
        return await run_in_threadpool(served().render, req)

    return app
