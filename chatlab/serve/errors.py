"""OpenAI's error body for every failure: a bad request is a 400 (never a 422 or a 500) whose
`param` names the field; an oversized body a 413; an unexpected exception a 500."""
from __future__ import annotations

import logging
from typing import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chatlab.types import param_of
from chatlab.errors import ChatlabError
from chatlab.types.responses import ErrorBody

log = logging.getLogger("chatlab.serve")
TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
         405: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error",
         500: "server_error", 503: "server_error"}


class APIError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}


def _encodable(text: str) -> str:
    """A message that quotes a lone surrogate the client sent, made encodable."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> ErrorBody:
    """OpenAI's error object for a failure answered with `status`, streamed or not."""
    return {"error": {"message": _encodable(message), "type": TYPES.get(status, "invalid_request_error"),
                      "param": None if param is None else _encodable(param), "code": code}}


def exception_body(err: BaseException) -> ErrorBody:
    """The error event for an exception raised mid-stream (a server error leaks no details)."""
    if isinstance(err, ChatlabError):
        return error_body(400, str(err), err.param, err.code)
    if isinstance(err, APIError):
        return error_body(err.status, err.message, err.param, err.code)
    return error_body(500, "internal error while generating")


def error_response(status: int, message: str, param: str | None = None, code: str | None = None,
                   headers: Mapping[str, str] | None = None) -> JSONResponse:
    body = error_body(status, message, param, code)
    extra = dict(headers or {})
    if status == 401:
        extra["WWW-Authenticate"] = "Bearer"
    if status >= 500 or status == 413:  # the connection's state is unknown (or unread): end it
        extra["Connection"] = "close"
    return JSONResponse(body, status_code=status, headers=extra or None)


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api(_: Request, exc: APIError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.param, exc.code, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        if first.get("type") == "json_invalid":
            return error_response(400, "the request body is not valid JSON; send a JSON object")
        param = param_of(tuple(p for p in first.get("loc", ()) if p != "body"))
        msg = first.get("msg", "invalid request")
        return error_response(400, f"{param}: {msg}" if param else msg, param)

    @app.exception_handler(ChatlabError)
    async def _chatlab(_: Request, exc: ChatlabError) -> JSONResponse:
        return error_response(400, str(exc), exc.param, exc.code)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # keep the exception's headers: a 405 must say which methods are allowed (Allow)
        return error_response(exc.status_code, str(exc.detail), headers=exc.headers)


class BodyLimit:
    """Refuse bodies over `max_bytes` with 413, counting bytes as they arrive."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes
        # read on (and dropped) up to this much, so a client still sending reads the 413
        self.drain_bytes = max(4 * max_bytes, 8_000_000)

    def too_big(self) -> ASGIApp:
        return error_response(413, f"request body over {self.max_bytes:,} bytes; send fewer or "
                              "shorter messages (the limit is set with --max-body-bytes)")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or {}).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.drain_bytes:
            return await self.too_big()(scope, receive, send)
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left while sending: nobody to answer
            body = message.get("body", b"")
            seen += len(body)
            if seen <= self.max_bytes:
                chunks.append(body)
            elif seen > self.drain_bytes:
                break
            if not message.get("more_body", False):
                break
        if seen > self.max_bytes:
            chunks.clear()
            return await self.too_big()(scope, receive, send)
        await self.app(scope, _replay(b"".join(chunks), receive), send)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that yields the buffered body once, then the connection's own messages."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class CatchAll:
    """Unexpected exceptions: logged, answered with a generic 500 and not re-raised."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception:  # noqa: BLE001 - the one place unexpected errors end
            log.exception("unexpected error while serving %s %s", scope.get("method"), scope.get("path"))
            if not started:
                response = error_response(500, "internal error while generating; the server log "
                                          "has details")
                await response(scope, receive, send)
            # else a response (a stream) is under way: returning unfinished makes uvicorn close it
