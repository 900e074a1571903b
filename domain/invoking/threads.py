"""The threads a worker runs invocations with: a bounded pool of daemon threads, and an
event loop on a thread of its own.

Both are daemons: a phase stuck past the worker's stop never keeps the process alive
(``concurrent.futures``' pools are joined at the interpreter's exit, so a hung sync
phase would). Threads start as work comes and end after :data:`IDLE_S` without any,
so an idle worker, or one whose phases are all ``async``, holds none of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger("tasktrail.worker")

IDLE_S = 10.0
"""How long a pool's thread waits for work before it ends."""


class DaemonPool:
    """At most ``size`` daemon threads running the jobs :meth:`submit` hands them, in
    the order handed; a job waits only when all ``size`` are busy."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self._ready = threading.Condition(threading.Lock())
        self._jobs: deque[Callable[[], object]] = deque()
        self._threads = 0
        self._idle = 0
        self._started = 0

    @property
    def threads(self) -> int:
        """How many threads the pool has now (busy or idle)."""
        with self._ready:
            return self._threads

    def submit(self, job: Callable[[], object]) -> None:
        """Run ``job()`` in one of the pool's threads; returns at once. What it raises
        is logged: a job reports its own outcome."""
        with self._ready:
            self._jobs.append(job)
            # An idle thread takes it; one more is started while there are more jobs
            # waiting than idle threads to take them, up to ``size``.
            if len(self._jobs) > self._idle and self._threads < self.size:
                self._threads += 1
                self._started += 1
                name = f"{self.name}-{self._started}"
                threading.Thread(target=self._work, name=name, daemon=True).start()
            else:
                self._ready.notify()

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._jobs:
                    self._idle += 1
                    woken = self._ready.wait(IDLE_S)
                    self._idle -= 1
                    if not woken and not self._jobs:
                        self._threads -= 1
                        return
                job = self._jobs.popleft()
            try:
                job()
            except BaseException:  # never the pool's: a job reports its own outcome
                log.exception("a job of %s failed", self.name)

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in one of the pool's threads, in a copy of this task's context
        (as ``asyncio.to_thread``); the event loop goes on meanwhile."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        context = contextvars.copy_context()

        def job() -> None:
            try:
                result = context.run(fn, *args)
            except BaseException as error:
                settle_soon(loop, future, error=error)
            else:
                settle_soon(loop, future, result)

        self.submit(job)
        return await future


def settle_soon(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any = None,
    *,
    error: BaseException | None = None,
) -> None:
    """Settle ``future`` (of ``loop``) from another thread, unless it was cancelled
    meanwhile or its loop is gone (a worker stopped: no one waits for it then)."""

    def settle() -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    with contextlib.suppress(RuntimeError):  # the loop is closed
        loop.call_soon_threadsafe(settle)


class LoopThread:
    """An event loop on a daemon thread of its own, started on first use."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> asyncio.AbstractEventLoop | None:
        """The loop, if it was started and not stopped."""
        return self._loop

    def get(self) -> asyncio.AbstractEventLoop:
        """The loop, started now if it is not running."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=run, name=self.name, daemon=True).start()
                ready.wait()
                self._loop = loop
            return self._loop

    def stop(self) -> None:
        """Stop the loop, after what it was asked to do by now and a moment more."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            # A moment for the cancelled tasks to take their CancelledError first.
            loop.call_soon_threadsafe(loop.call_later, 0.1, loop.stop)
