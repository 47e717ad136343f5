"""One request's generation: queued, driven on the worker thread, cancelled when the client leaves.

A streamed request's client leaving is heard by sse-starlette, which closes the event generator
(and so the job). A non-streamed request has no such listener, so a watcher task waits for the
connection's `http.disconnect` while the answer is awaited and cancels the job.
"""
from __future__ import annotations

import asyncio
import json
from typing import AsyncIterator, Callable, Iterator

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from sse_starlette.sse import EventSourceResponse

from chatlab.engine.request import SamplingFields
from chatlab.generate import StopFn
from chatlab.serve.errors import APIError, exception_body
from chatlab.serve.queue import FairQueue, Job
from chatlab.types.responses import Answer, Chunk

Work = Callable[[StopFn], Iterator[Chunk] | Answer]  # should_stop -> an answer or its chunks
CLIENT_GONE = 499  # nginx's "client closed request": logged, never seen by anyone


async def run(request: Request, queue: FairQueue, req: SamplingFields, work: Work) -> Response:
    client = req.user or (request.client.host if request.client else "anonymous")
    job = queue.submit(lambda emit, cancelled: _drive(work, emit, cancelled), client)
    if req.stream:
        return EventSourceResponse(_events(job), sep="\n", ping=600)
    watcher = asyncio.create_task(_cancel_when_gone(request, job))
    try:
        answer = await job.first()
    finally:
        watcher.cancel()
    if answer is not None:
        return JSONResponse(answer)
    if job.cancelled.is_set() and await request.is_disconnected():
        return Response(status_code=CLIENT_GONE)
    raise APIError(500, "generation produced no response; the server log has details")


async def _cancel_when_gone(request: Request, job: Job) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
    job.cancel()


async def _events(job: Job) -> AsyncIterator[str]:
    try:
        async for chunk in job:
            yield json.dumps(chunk, ensure_ascii=False)
    except Exception as err:  # noqa: BLE001 - mid-stream: an error event, not a crash
        yield json.dumps(exception_body(err), ensure_ascii=False)
    yield "[DONE]"


def _drive(work: Work, emit: Callable[[object], None], cancelled: StopFn) -> None:
    """Run one engine call on the worker thread, emitting its dict or each of its chunks."""
    result = work(cancelled)
    if isinstance(result, dict):
        emit(result)
        return
    try:
        for chunk in result:
            if cancelled():
                break
            emit(chunk)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()  # a generator left early releases the model now, not at garbage collection
