"""A worker's invocations in flight: up to ``concurrency`` at once, each on its own
reserved task, sync phases in threads and ``async`` ones on one event loop.

Each invocation is driven by a thread of its own (a daemon: a phase stuck past the
worker's stop never keeps the process alive) that runs
:meth:`~.phases.PhaseCommands.run_invocation`. A sync handler runs in that thread; an
``async def`` one runs on the worker's event loop (a thread of its own as well) while
the driving thread waits for it, so many async phases wait together on one loop, a
sync phase never blocks the loop, and the decisions every phase takes go through the
scheduler's lock as any command does. The context of the thread that starts a phase
(its telemetry span) is carried into the loop's task.

:class:`Invocations` is what the :class:`~.worker.Worker` drives: :meth:`start` one on
a reserved task when a slot is free, :meth:`finished` to collect what ended (a slot
frees as soon as an invocation ends, and :attr:`changed` wakes the worker's loop), and
at a stop :meth:`wait` for the grace period, then :meth:`cancel` what still runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from .phase_calls import PhaseCancelled, as_coroutine
from .phases import PassReport

if TYPE_CHECKING:
    from ..tasks.events import Mode
    from .scheduler import Scheduler

log = logging.getLogger("tasktrail.worker")
DEFAULT_CONCURRENCY = 16


def check_concurrency(concurrency: object) -> int:
    """A concurrency, checked: a whole number of invocations of at least 1."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a whole number >= 1, not {concurrency!r}")
    return concurrency


class _Loop:
    """An event loop on a daemon thread of its own, started on first use."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    def get(self) -> asyncio.AbstractEventLoop:
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
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            # A moment for the cancelled tasks to take their CancelledError first.
            loop.call_soon_threadsafe(loop.call_later, 0.1, loop.stop)


class Invocations:
    """The invocations one worker runs at once (see the module docstring)."""

    def __init__(self, scheduler: Scheduler, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        self.scheduler = scheduler
        self.concurrency = check_concurrency(concurrency)
        self.changed = threading.Event()
        """Set when an invocation ends (a slot is free, there is a report to collect)."""
        self._lock = threading.Lock()
        self._running: dict[str, threading.Thread] = {}
        self._overran: set[threading.Thread] = set()
        """Threads of sync phases past their timeout whose tasks run again (rule 24):
        each holds its slot until its phase returns."""
        self._awaiting: dict[str, concurrent.futures.Future[Any]] = {}
        self._done: list[PassReport] = []
        self._errors: list[Exception] = []
        self._loop = _Loop(f"tasktrail-loop-{scheduler.worker}")
        self.peak = 0
        """The most invocations in flight at once so far."""

    @property
    def in_flight(self) -> int:
        """How many invocations run now."""
        with self._lock:
            return len(self._running) + len(self._overran)

    @property
    def free(self) -> int:
        """How many more may start now."""
        return max(0, self.concurrency - self.in_flight)

    def start(self, task_id: str, mode: Mode, report: PassReport) -> None:
        """Run the invocation the scheduler reserved ``task_id`` for, in a thread of its
        own; ``report`` (its reservation already in it) is handed back by
        :meth:`finished` once it ends."""
        thread = threading.Thread(
            target=self._drive,
            args=(task_id, mode, report),
            name=f"tasktrail-invocation-{task_id[:12]}",
            daemon=True,
        )
        with self._lock:
            overran = self._running.get(task_id)
            if overran is not None:  # a fenced phase of the task's that still runs
                self._overran.add(overran)
            self._running[task_id] = thread
            self.peak = max(self.peak, len(self._running) + len(self._overran))
        thread.start()

    def _drive(self, task_id: str, mode: Mode, report: PassReport) -> None:
        try:
            self.scheduler.run_invocation(
                task_id, mode, report, lambda awaitable: self._await(task_id, awaitable)
            )
        except Exception as error:  # the store failed under a decision: the loop decides
            with self._lock:
                self._errors.append(error)
        finally:
            with self._lock:
                if self._running.get(task_id) is threading.current_thread():
                    del self._running[task_id]
                self._overran.discard(threading.current_thread())
                self._done.append(report)
            self.changed.set()

    def _await(self, task_id: str, awaitable: Awaitable[Any]) -> Any:
        """Run an async handler's awaitable on the worker's loop; this thread waits.
        ``run_coroutine_threadsafe`` carries this thread's context into the task."""
        future = asyncio.run_coroutine_threadsafe(as_coroutine(awaitable), self._loop.get())
        with self._lock:
            self._awaiting[task_id] = future
        try:
            return future.result()
        except (concurrent.futures.CancelledError, asyncio.CancelledError):
            raise PhaseCancelled() from None
        finally:
            with self._lock:
                self._awaiting.pop(task_id, None)

    def finished(self) -> list[PassReport]:
        """The reports of the invocations that ended since the last call. An error that
        ended one (the store failed under its last decision) is raised here, in the
        worker's loop, as a failed tick's would be."""
        with self._lock:
            done, self._done = self._done, []
            errors, self._errors = self._errors, []
            if errors:  # kept for the next look, after the loop handled the error
                self._done = done + self._done
                done = []
            self.changed.clear()  # an invocation that ends after this sets it again
        if errors:
            raise errors[0]
        return done

    def wait(self, timeout_s: float, interrupted: threading.Event | None = None) -> bool:
        """Wait up to ``timeout_s`` for every invocation to end (sooner once
        ``interrupted`` is set); whether none runs any more."""
        import time

        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                threads = [*self._running.values(), *self._overran]
            if not threads:
                return True
            left = deadline - time.monotonic()
            if left <= 0 or (interrupted is not None and interrupted.is_set()):
                return False
            threads[0].join(min(left, 0.05))

    def cancel(self) -> None:
        """Cancel the async phases still awaited (their invocations end as a phase that
        raised would: after a close, with nothing recorded), and stop the loop."""
        with self._lock:
            futures = list(self._awaiting.values())
        for future in futures:
            future.cancel()
        self._loop.stop()  # after the cancellations it queued (the loop's order)
