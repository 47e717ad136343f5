"""A bounded queue in front of the model, fair round-robin by client (`user`, else the address): full,
a 429 with `Retry-After`; a job whose client left is withdrawn, or cancelled at the next token."""
from __future__ import annotations

import asyncio
import json
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Generator
from typing import AsyncIterator, Callable, Iterator

from fastapi import Request
from fastapi.responses import JSONResponse, Response
from sse_starlette.sse import EventSourceResponse

from chatlab.engine.request import SamplingFields
from chatlab.generate import StopFn
from chatlab.serve.errors import APIError, exception_body
from chatlab.types.responses import Answer, Chunk

# (emit, cancelled) -> None; what is emitted (an answer, a chunk, an error) is only passed on
JobBody = Callable[[Callable[[object], None], Callable[[], bool]], None]
_DONE = object()
Work = Callable[[StopFn], Iterator[Chunk] | Answer]  # should_stop -> an answer or its chunks
CLIENT_GONE = 499  # nginx's "client closed request": logged, never seen by anyone


class Job:
    def __init__(self, work: JobBody, loop: asyncio.AbstractEventLoop, queue: "FairQueue") -> None:
        self.work, self.loop, self.queue = work, loop, queue
        self.results: asyncio.Queue[object] = asyncio.Queue()
        self.cancelled = threading.Event()

    def emit(self, item: object) -> None:  # called on the worker thread
        self.loop.call_soon_threadsafe(self.results.put_nowait, item)

    def cancel(self) -> None:
        if not self.cancelled.is_set():
            self.cancelled.set()
            self.queue.withdraw(self)

    async def first(self) -> object:
        """The job's first result (a non-streamed answer); None if it ended with none."""
        try:
            item = await self.results.get()
            if isinstance(item, BaseException):
                raise item
            return None if item is _DONE else item
        finally:  # done, failed, or the awaiting request was cancelled: nothing more to run
            self.cancel()

    async def __aiter__(self) -> AsyncIterator[object]:
        try:
            while (item := await self.results.get()) is not _DONE:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:  # the consumer stopped early (disconnect, error): stop generating
            self.cancel()


class FairQueue:
    def __init__(self, max_waiting: int = 32, workers: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"workers={workers}: the queue needs at least one worker")
        self.max_waiting, self.workers = max_waiting, workers
        self._waiting: OrderedDict[str, deque[Job]] = OrderedDict()
        self._count = 0
        self._cond = threading.Condition()
        self._closed = False
        self._seconds_per_job = 1.0  # running average, for Retry-After
        self._threads = [threading.Thread(target=self._run, name=f"chatlab-worker-{i}", daemon=True)
                         for i in range(workers)]
        for t in self._threads:
            t.start()

    @property
    def waiting(self) -> int:
        return self._count

    def retry_after(self) -> int:
        """Seconds until a place is likely free (about one job's duration), clamped to 1..60."""
        return max(1, min(60, math.ceil(self._seconds_per_job / self.workers)))

    def submit(self, work: JobBody, client: str) -> Job:
        job = Job(work, asyncio.get_running_loop(), self)
        with self._cond:
            if self._count >= self.max_waiting:
                wait = self.retry_after()
                raise APIError(429, f"the server queue is full ({self.max_waiting} requests "
                               f"waiting); retry after {wait} s or send fewer requests at once",
                               code="queue_full", headers={"Retry-After": str(wait)})
            self._waiting.setdefault(client, deque()).append(job)
            self._count += 1
            self._cond.notify()
        return job

    def withdraw(self, job: Job) -> None:
        """Take a cancelled job out of the waiting line (no-op once it runs or has run)."""
        with self._cond:
            for client, jobs in self._waiting.items():
                if job in jobs:
                    jobs.remove(job)
                    self._count -= 1
                    if not jobs:
                        del self._waiting[client]
                    break
            else:
                return
        job.emit(_DONE)

    def _next(self) -> Job | None:
        with self._cond:
            while not self._count and not self._closed:
                self._cond.wait()
            if self._closed:
                return None
            client, jobs = next(iter(self._waiting.items()))
            job = jobs.popleft()
            del self._waiting[client]
            if jobs:  # this client goes to the back of the rotation
                self._waiting[client] = jobs
            self._count -= 1
            return job

    def _run(self) -> None:
        while (job := self._next()) is not None:
            if job.cancelled.is_set():
                job.emit(_DONE)
                continue
            started = time.monotonic()
            try:
                job.work(job.emit, job.cancelled.is_set)
            except BaseException as err:  # noqa: BLE001 - handed to the request, not lost
                job.emit(err)
            job.emit(_DONE)
            self._seconds_per_job += 0.2 * (time.monotonic() - started - self._seconds_per_job)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()


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
        if isinstance(result, Generator):
            result.close()  # a generator left early releases the model now, not at garbage collection
