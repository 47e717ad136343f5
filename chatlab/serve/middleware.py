"""Two ASGI middlewares that sit between uvicorn and the routes.

BodyLimit reads the whole body itself, counting bytes as they arrive (Content-Length or
chunked), and answers 413 past the limit: a limit enforced inside the route's `receive` is
swallowed by FastAPI's body parsing ("400 There was an error parsing the body").

CatchAll turns an unexpected exception into a 500 with `Connection: close`, and does not
re-raise it: after Starlette's own `Exception` handler re-raises, uvicorn closes a kept-alive
connection under the client's next request.
"""
from __future__ import annotations

import logging

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chatlab.serve.errors import error_response

log = logging.getLogger("chatlab.serve")


class BodyLimit:
    """Refuse bodies over `max_bytes` with 413; hand the app the body already read."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes
        # an oversized body is read on (and dropped) up to this much before answering, so the
        # client, still sending, reads the 413 instead of a reset connection
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
    """A `receive` that yields the buffered body once, then the connection's own messages (so
    routes can still hear `http.disconnect`)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class CatchAll:
    """Unexpected exceptions: logged, answered with a generic 500, connection closed."""

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
