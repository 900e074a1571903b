"""A worker's invocations in flight: up to ``concurrency`` at once, each on its own
reserved task; ``async`` ones on one event loop with no thread each, sync ones in
threads of a bounded pool.

How an invocation is driven (issue 43): through its steps
(:mod:`..invoking.phase_steps`), by whichever driver suits the handler it runs.

- An invocation whose handler is an ``async def`` is driven by a coroutine on the
  worker's event loop (:mod:`..invoking.loop_invocations`), not by a thread of its own:
  its phase's coroutine runs there, and what it decides goes to the group commit
  without the loop waiting for the lock or the store (the next phase it returns, and
  the awaitable forms ``await inv.checkpoint_async(...)``, ``finish_async`` and the
  rest, are queued and awaited; a fault, a retry's backoff or a failed phase's end is
  taken in a pool of :data:`COMMIT_THREADS` threads). So any number of async phases
  wait at once on a handful of threads: the loop's, the group commit's committer, the
  heartbeat's.
- A sync handler runs in a thread of a pool of at most ``concurrency`` daemon threads
  (:mod:`..invoking.threads`), started as needed and ended when idle. An invocation
  that starts with a sync phase is driven by that thread; should it reach an ``async
  def`` phase, it hands the rest over to a coroutine on the loop and the thread goes
  back to the pool. One driven on the loop that reaches a sync phase awaits it in a
  pool thread.
- The context of the thread that starts an invocation is carried into its coroutine,
  and each phase runs with its telemetry span current (one span a phase).

A command a phase calls in its plain form (``inv.checkpoint(...)``) from an ``async``
phase still works: it holds the loop, and every coroutine on it, for that command,
its wait for the lock included.

:class:`Invocations` is what the :class:`~.worker.Worker` drives: :meth:`start` one on
a reserved task when a slot is free, :meth:`finished` to collect what ended (a slot
frees as soon as an invocation ends, and :attr:`changed` wakes the worker's loop), and
at a stop :meth:`wait` for the grace period, then :meth:`cancel` what still runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Awaitable
from functools import partial
from typing import TYPE_CHECKING, Any

from ..invoking.loop_invocations import Run, run_on_loop
from ..invoking.phase_calls import AwaitableRunner, PhaseCancelled, as_coroutine, is_async_handler
from ..invoking.phase_steps import CallHandler, Step, Steps, drive
from ..invoking.threads import DaemonPool, LoopThread
from ..tasks.invocation import Invocation
from .phases import PassReport

if TYPE_CHECKING:
    from ..tasks.events import Mode
    from .scheduler import Scheduler

DEFAULT_CONCURRENCY = 16
COMMIT_THREADS = 4
"""The threads that take an ``async`` invocation's decisions other than its checkpoints
and commands (faults, retries, ends of failed phases): each waits for the scheduler's
lock, so more would only wait together."""


def check_concurrency(concurrency: object) -> int:
    """A concurrency, checked: a whole number of invocations of at least 1."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a whole number >= 1, not {concurrency!r}")
    return concurrency


class Invocations:
    """The invocations one worker runs at once (see the module docstring)."""

    def __init__(self, scheduler: Scheduler, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        self.scheduler = scheduler
        self.concurrency = check_concurrency(concurrency)
        self.changed = threading.Event()
        """Set when an invocation ends (a slot is free, there is a report to collect)."""
        self._lock = threading.Lock()
        self._ended = threading.Condition(self._lock)
        self._running: dict[str, Run] = {}
        self._overran: set[Run] = set()
        """Sync phases past their timeout whose tasks run again (rule 24): each holds
        its slot until its phase returns."""
        self._done: list[PassReport] = []
        self._errors: list[Exception] = []
        name = scheduler.worker
        self._loop = LoopThread(f"tasktrail-loop-{name}")
        self.phase_threads = DaemonPool(f"tasktrail-phase-{name}", self.concurrency)
        """The threads sync phases run in: no more than invocations may be in flight."""
        self.commit_threads = DaemonPool(f"tasktrail-decide-{name}", COMMIT_THREADS)
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
        """Run the invocation the scheduler reserved ``task_id`` for, on the loop or in
        a pool thread (see the module docstring); ``report`` (its reservation already
        in it) is handed back by :meth:`finished` once it ends."""
        run = Run(task_id)
        with self._lock:
            overran = self._running.get(task_id)
            if overran is not None:  # a fenced phase of the task's that still runs
                self._overran.add(overran)
            self._running[task_id] = run
            self.peak = max(self.peak, len(self._running) + len(self._overran))
        try:
            invocation = self.scheduler._invocations[task_id]
            steps = self.scheduler._steps(invocation, mode, report)
            on_loop = self._starts_on_loop(invocation, mode)
        except Exception as error:  # closed meanwhile, say: the worker's loop decides
            self.over(run, report, error)
            return
        if on_loop:
            self._to_loop(run, invocation, steps, None, report)
        else:
            self.phase_threads.submit(partial(self._drive, run, invocation, steps, report))

    def _starts_on_loop(self, invocation: Invocation, mode: Mode) -> bool:
        """Whether the handler the invocation runs first is an ``async def``."""
        s = self.scheduler
        task = s.world.get(invocation.task_id)
        definition = s.registry.get(task.kind) if task is not None else None
        if task is None or definition is None:
            return False
        if mode == "abort":
            handler = definition.abort
        else:
            phase = task.checkpoint.phase if task.checkpoint is not None else None
            handler = definition.phases.get(phase) if phase is not None else None
        return handler is not None and is_async_handler(handler)

    def _drive(self, run: Run, invocation: Invocation, steps: Steps, report: PassReport) -> None:
        """Drive an invocation in this pool thread, until its steps end or reach an
        ``async def`` handler: the loop goes on from there."""
        s = self.scheduler
        error: Exception | None = None
        handed: Step | None = None
        try:
            try:
                perform = partial(s._perform, invocation, self.await_on_loop(run))
                handed = drive(steps, perform, hand_over=_on_loop)
            finally:
                if handed is None:
                    s._end_invocation(invocation)
            if handed is None and not s._task_now(invocation.task_id).live:
                report.ended.append(invocation.task_id)
        except Exception as raised:  # the store failed under a decision: the loop decides
            error = raised
        finally:
            if handed is None:
                self.over(run, report, error)
        if handed is not None:
            self._to_loop(run, invocation, steps, handed, report)

    def _to_loop(
        self,
        run: Run,
        invocation: Invocation,
        steps: Steps,
        first: Step | None,
        report: PassReport,
    ) -> None:
        """Go on driving the invocation on the loop, from ``first``."""
        loop = self._loop.get()

        def begin() -> None:
            driving = run_on_loop(self, run, invocation, steps, first, report)
            run.driver = loop.create_task(driving)

        loop.call_soon_threadsafe(begin)

    def await_on_loop(self, run: Run) -> AwaitableRunner:
        """What runs an awaitable a sync handler returned: on the worker's loop, while
        the pool thread that called the handler waits."""

        def run_awaitable(awaitable: Awaitable[Any]) -> Any:
            # run_coroutine_threadsafe carries this thread's context into the task.
            coroutine = as_coroutine(awaitable)
            future = asyncio.run_coroutine_threadsafe(coroutine, self._loop.get())
            run.awaiting = future
            try:
                return future.result()
            except (concurrent.futures.CancelledError, asyncio.CancelledError):
                raise PhaseCancelled() from None
            finally:
                run.awaiting = None

        return run_awaitable

    def over(self, run: Run, report: PassReport, error: Exception | None) -> None:
        """``run`` ended (``error``: the store failed under its last decision)."""
        with self._lock:
            if self._running.get(run.task_id) is run:
                del self._running[run.task_id]
            self._overran.discard(run)
            if error is not None:
                self._errors.append(error)
            self._done.append(report)
            self._ended.notify_all()
        self.changed.set()

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
        deadline = time.monotonic() + timeout_s
        with self._ended:
            while self._running or self._overran:
                left = deadline - time.monotonic()
                if left <= 0 or (interrupted is not None and interrupted.is_set()):
                    return False
                self._ended.wait(min(left, 0.05))  # a look at ``interrupted`` as often
        return True

    def cancel(self) -> None:
        """Cancel the async phases still awaited (their invocations end as a phase that
        raised would: after a close, with nothing recorded), and stop the loop a moment
        later (the cancelled phases' invocations end within it)."""
        with self._lock:
            runs = [*self._running.values(), *self._overran]
        for run in runs:
            if run.awaiting is not None:
                run.awaiting.cancel()
        loop = self._loop.running
        if loop is not None:

            def cancel_phases() -> None:  # on the loop, which alone sets ``run.phase``
                for run in runs:
                    if run.phase is not None:
                        run.phase.cancel()

            with contextlib.suppress(RuntimeError):  # the loop is closed
                loop.call_soon_threadsafe(cancel_phases)
        self._loop.stop()  # after the cancellations it queued (the loop's order)


def _on_loop(step: Step) -> bool:
    """Whether a thread's invocation hands ``step`` to the loop: an ``async def`` phase."""
    return isinstance(step, CallHandler) and is_async_handler(step.handler)
