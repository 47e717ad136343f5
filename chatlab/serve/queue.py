"""A bounded, fair queue in front of the one model.

The backend holds one KV cache, so generations run one at a time on a worker thread while the
event loop keeps accepting requests. Waiting jobs are grouped by client (the request's `user`,
else its address) and taken round-robin, so one client sending twenty requests cannot starve
another who sent one. When `max_waiting` jobs wait, new ones get 429 at once instead of
piling up. A job's results travel to its request through an asyncio queue; a request that goes
away (client disconnect) sets the job's cancel flag, which the generation loop checks per token.
"""
from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict, deque
from typing import Any, AsyncIterator, Callable

from chatlab.serve.errors import APIError

Work = Callable[[Callable[[Any], None], Callable[[], bool]], None]  # (emit, cancelled) -> None
_DONE = object()


class Job:
    def __init__(self, work: Work, loop: asyncio.AbstractEventLoop) -> None:
        self.work, self.loop = work, loop
        self.results: asyncio.Queue[Any] = asyncio.Queue()
        self.cancelled = threading.Event()

    def emit(self, item: Any) -> None:  # called on the worker thread
        self.loop.call_soon_threadsafe(self.results.put_nowait, item)

    def cancel(self) -> None:
        self.cancelled.set()

    async def __aiter__(self) -> AsyncIterator[Any]:
        try:
            while (item := await self.results.get()) is not _DONE:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:  # the consumer stopped early (disconnect, error): stop generating
            self.cancel()


class FairQueue:
    def __init__(self, max_waiting: int = 32) -> None:
        self.max_waiting = max_waiting
        self._waiting: OrderedDict[str, deque[Job]] = OrderedDict()
        self._count = 0
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="chatlab-worker", daemon=True)
        self._thread.start()

    @property
    def waiting(self) -> int:
        return self._count

    def submit(self, work: Work, client: str) -> Job:
        job = Job(work, asyncio.get_running_loop())
        with self._cond:
            if self._count >= self.max_waiting:
                raise APIError(429, f"the server queue is full ({self.max_waiting} requests "
                               "waiting); retry after a moment or send fewer requests at once",
                               code="queue_full")
            self._waiting.setdefault(client, deque()).append(job)
            self._count += 1
            self._cond.notify()
        return job

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
            try:
                job.work(job.emit, job.cancelled.is_set)
            except BaseException as err:  # noqa: BLE001 - handed to the request, not lost
                job.emit(err)
            job.emit(_DONE)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
