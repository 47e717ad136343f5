"""The OpenAI-compatible HTTP surface: routes, auth, limits. Generation is the engine's job.

Every route validates first (so bad input is a 4xx before anything is queued), then hands the
work to the fair queue. Streams are Server-Sent Events through sse-starlette, one
`chat.completion.chunk` per event and a final `data: [DONE]`, as the openai client expects.
"""
from __future__ import annotations

import json
import secrets
from typing import Any, AsyncIterator, Callable, Iterator

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from sse_starlette.sse import EventSourceResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chatlab.errors import ChatlabError
from chatlab.engine.request import ChatRequest, CompletionRequest
from chatlab.serve.errors import APIError, error_response, install_handlers
from chatlab.serve.queue import FairQueue


class BodyLimit:
    """ASGI middleware: refuse bodies over `max_bytes` with 413, counted as they arrive."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or {}).get(b"content-length")
        too_big = error_response(413, f"request body over {self.max_bytes:,} bytes; send fewer or "
                                 "shorter messages (the limit is set with --max-body-bytes)")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await too_big(scope, receive, send)
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise APIError(413, "request body too large")
            return message

        try:
            await self.app(scope, counted, send)
        except APIError:
            await too_big(scope, receive, send)


def create_app(engine: Any, *, api_key: str | None = None, max_waiting: int = 32,
               max_messages: int = 256, max_body_bytes: int = 2_000_000) -> FastAPI:
    app = FastAPI(title="chatlab", docs_url=None, redoc_url=None)
    install_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    queue = FairQueue(max_waiting=max_waiting)
    app.state.queue, app.state.engine = queue, engine
    app.router.on_shutdown.append(queue.close)

    def auth(request: Request) -> None:
        if api_key is None:
            return
        given = request.headers.get("authorization", "")
        if not secrets.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
            raise APIError(401, "missing or wrong API key; send the header "
                           "'Authorization: Bearer <key>' with the key the server was started with",
                           code="invalid_api_key")

    def check_model(name: str | None) -> None:
        if name not in (None, "", engine.model_name):
            raise APIError(404, f"the model {name!r} is not served here; use "
                           f"{engine.model_name!r} (see GET /v1/models)", "model", "model_not_found")

    def client_of(request: Request, user: str | None) -> str:
        return user or (request.client.host if request.client else "anonymous")

    async def run(request: Request, req: Any, work: Callable[..., Iterator[dict] | dict]) -> Any:
        job = queue.submit(lambda emit, cancelled: _drive(work, emit, cancelled),
                           client_of(request, req.user))
        if not req.stream:
            async for item in job:
                return JSONResponse(item)
            raise APIError(500, "generation produced no response")

        async def events() -> AsyncIterator[str]:
            try:
                async for chunk in job:
                    yield json.dumps(chunk, ensure_ascii=False)
            except Exception as err:  # noqa: BLE001 - mid-stream: an error event, not a crash
                body = {"message": str(err) if isinstance(err, ChatlabError)
                        else "internal error while generating", "type": "server_error",
                        "param": None, "code": None}
                yield json.dumps({"error": body})
            yield "[DONE]"

        return EventSourceResponse(events(), sep="\n", ping=600)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": engine.model_name, "waiting": queue.waiting}

    @app.get("/v1/models", dependencies=[Depends(auth)])
    async def models() -> dict[str, Any]:
        card = {"id": engine.model_name, "object": "model", "created": engine.created,
                "owned_by": "chatlab", "max_model_len": engine.context_length}
        return {"object": "list", "data": [card]}

    @app.post("/v1/chat/completions", dependencies=[Depends(auth)])
    async def chat(request: Request, req: ChatRequest) -> Any:
        check_model(req.model)
        if len(req.messages) > max_messages:
            raise APIError(400, f"{len(req.messages)} messages is over the limit of {max_messages}; "
                           "drop or summarise earlier turns", "messages")
        engine.check(req)
        stream = engine.chat_stream if req.stream else engine.chat
        return await run(request, req, lambda cancelled: stream(req, should_stop=cancelled))

    @app.post("/v1/completions", dependencies=[Depends(auth)])
    async def completions(request: Request, req: CompletionRequest) -> Any:
        check_model(req.model)
        engine.check(req)
        stream = engine.completion_stream if req.stream else engine.completion
        return await run(request, req, lambda cancelled: stream(req, should_stop=cancelled))

    @app.post("/v1/chat/render", dependencies=[Depends(auth)])
    async def render(req: ChatRequest) -> dict[str, Any]:
        check_model(req.model)
        return engine.render(req)

    return app


def _drive(work: Callable[[Callable[[], bool]], Iterator[dict] | dict],
           emit: Callable[[Any], None], cancelled: Callable[[], bool]) -> None:
    """Run one engine call on the worker thread, emitting its dict or each of its chunks."""
    result = work(cancelled)
    if isinstance(result, dict):
        emit(result)
        return
    for chunk in result:
        if cancelled():
            break
        emit(chunk)
