"""OpenAI's error body for every failure, and the handlers that make sure nothing else leaks.

`{"error": {"message", "type", "param", "code"}}`. A bad request is never a 500 and never shows a
stack trace: validation errors name the field, ChatlabError messages name the fix, and an
unexpected exception is logged on the server and answered with a short generic message.
"""
from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from chatlab.errors import ChatlabError, UnknownNameError

log = logging.getLogger("chatlab.serve")

TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
         413: "invalid_request_error", 422: "invalid_request_error", 429: "rate_limit_error",
         500: "server_error", 503: "server_error"}


class APIError(Exception):
    """An error with its HTTP status, raised by routes and the queue."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def error_response(status: int, message: str, param: str | None = None,
                   code: str | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": TYPES.get(status, "invalid_request_error"),
                      "param": param, "code": code}}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, headers=headers)


def _validation_message(err: RequestValidationError) -> tuple[str, str | None]:
    first = err.errors()[0] if err.errors() else {}
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    param = ".".join(loc) or None
    if first.get("type") == "json_invalid":
        return "the request body is not valid JSON; send a JSON object", None
    msg = first.get("msg", "invalid request")
    return (f"{param}: {msg}" if param else msg), param


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(APIError)
    async def _api(_: Request, exc: APIError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.param, exc.code)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(exc)
        status = 400 if param is None or "json" in message else 422
        return error_response(status, message, param)

    @app.exception_handler(UnknownNameError)
    async def _unknown(_: Request, exc: UnknownNameError) -> JSONResponse:
        return error_response(400, str(exc))

    @app.exception_handler(ChatlabError)
    async def _chatlab(_: Request, exc: ChatlabError) -> JSONResponse:
        return error_response(400, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error while serving a request")
        return error_response(500, "internal error while generating; the server log has details")
