"""The worker's loop, its heartbeat thread, and stopping (a mixin of the Worker).

:meth:`WorkerLoop.run` ticks until stopped. Idle, it sleeps until the worker's next
deadline, waking when an invocation ends, on the store's news (an append, here or by
another writer; the head is polled too), when a pass is requested, or when stopped.
A thread of its own renews the lease a third of a lease apart and, twice a second,
asks whether a worker that holds running tasks is gone
(:meth:`~.fleet.FleetCommands.recover_gone`), so a dead peer's tasks come back within
about a second (on PostgreSQL, where a lock must be seen free twice, the second look is
made as soon as it can tell: within 1.5 s).

Stopping (SIGTERM, SIGINT, :meth:`WorkerLoop.stop`): from that moment nothing more is
reserved; the invocations in flight get the grace period to reach their next decision
(they start no further phase), and the heartbeats go on so that the lease does not
lapse meanwhile; then the scheduler closes, which returns the tasks
still running here to ``pending`` with no restart counted (rule 10), and async phases
still awaited are cancelled. A second stop closes at once. The loop returns within
the grace period and a moment, whatever the phases do: a sync phase still running
then goes on in its daemon thread, and its decisions are refused (the scheduler is
closed).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..errors import ConflictError, CorruptEvent, LogReplaced, StoreError
from ..retention.keeper import keep

if TYPE_CHECKING:
    from .invocations import Invocations
    from .scheduler import Scheduler

log = logging.getLogger("tasktrail.worker")

DEFAULT_POLL_MS = 100.0
"""How often an idle worker looks for events other writers appended."""
DEFAULT_GRACE_S = 10.0
"""How long a stopping worker waits for its invocations to reach their next decision."""
LIVENESS_EVERY_S = 0.5
"""How often the heartbeat thread asks whether a peer holding tasks is gone."""
STORE_RETRY_MAX_MS = 30_000.0
"""The longest a :meth:`WorkerLoop.run` waits before trying a tick again after the
store failed (the wait doubles from ``poll_ms`` with each failure in a row)."""


def check_poll(poll_ms: object) -> float:
    """A poll interval, checked: a finite number of ms above 0 (a worker must look again)."""
    if isinstance(poll_ms, bool) or not isinstance(poll_ms, int | float) or not poll_ms > 0:
        raise ValueError(f"poll_ms must be a number of ms > 0, not {poll_ms!r}")
    if math.isinf(poll_ms):
        raise ValueError("poll_ms must be finite: an idle worker must look again")
    return float(poll_ms)


def check_grace(grace_s: object) -> float:
    """A grace period, checked: a number of seconds, 0 or more."""
    if isinstance(grace_s, bool) or not isinstance(grace_s, int | float) or not grace_s >= 0:
        raise ValueError(f"grace_s must be a number of seconds >= 0, not {grace_s!r}")
    if math.isinf(grace_s):
        raise ValueError("grace_s must be finite: a stop must end")
    return float(grace_s)


class WorkerLoop:
    """:meth:`run`, :meth:`stop` and the heartbeat thread, mixed into the Worker."""

    if TYPE_CHECKING:
        scheduler: Scheduler
        invocations: Invocations
        poll_ms: float
        grace_s: float
        ticks: int
        _stop: threading.Event
        _stop_now: threading.Event

        def _tick(self, *, wait: bool) -> Any: ...
        def next_deadline(self) -> float | None: ...
        def _pass_requested(self) -> bool: ...
        def _news_may_bring_work(self) -> bool: ...

    def run(self, *, max_ticks: int | None = None) -> None:
        """Tick until :meth:`stop` (or ``max_ticks``), then stop as the module says and
        close the scheduler.

        A tick the store failed (:class:`StoreError`, or a :class:`ConflictError` past
        its retries) is logged and tried again after a backoff doubling from
        ``poll_ms`` up to 30 s, unless it left a task running here that no invocation
        runs any more (its last decision was not written); that one, a
        :class:`CorruptEvent` and any other error end the run (the task is recovered
        as after a crash).
        """
        s = self.scheduler
        log.info(
            "worker %s started on %s (concurrency %d)",
            s.worker,
            s.store.location,
            self.invocations.concurrency,
        )
        closed = threading.Event()  # the heartbeats go on through the grace, to the close
        beating = threading.Thread(
            target=self._beat, args=(closed,), name=f"heartbeat-{s.worker}", daemon=True
        )
        beating.start()
        keeping = keep(s, closed)  # retention and periodic seals (issue 45), beside them
        failures = 0
        try:
            while not self._stop.is_set():
                if max_ticks is not None and self.ticks >= max_ticks:
                    break
                ticked = self.ticks
                try:
                    if s.log_problem is not None:  # the heartbeat thread found it
                        raise LogReplaced(s.log_problem)
                    news_seen = s.store.news.generation  # news during the tick: no idling
                    report = self._tick(wait=False)
                    failures = 0
                    if report.progressed:
                        continue
                    self._idle(news_seen)
                except (CorruptEvent, LogReplaced):
                    raise  # the log itself: trying again reads the same event, or none
                except (StoreError, ConflictError) as error:
                    # A store away a while (locked, a server restarting) or a race lost too
                    # often: the work stays in the log for a later tick. Not a task left
                    # running here with no invocation: pi-durable fails its session then.
                    # Nor a log that is gone (its schema dropped): it stays gone.
                    if s._stranded():
                        raise
                    if isinstance(error, StoreError) and _log_gone(s):
                        raise LogReplaced(str(s.log_problem)) from None
                    failures += 1
                    delay_ms = min(self.poll_ms * 2 ** min(failures - 1, 16), STORE_RETRY_MAX_MS)
                    message = "worker %s: tick failed (%s, %d in a row); trying again in %.0f ms"
                    log.warning(message, s.worker, error, failures, delay_ms)
                    self.ticks = ticked + 1  # a failed tick counts (max_ticks)
                    self._stop.wait(delay_ms / 1000)
        finally:
            self._stop.set()

            def stop_beating() -> None:  # before the close: no renewal after its release
                closed.set()
                beating.join(timeout=1)
                keeping.join(timeout=5)

            try:
                self._wind_down(stop_beating)
            finally:
                stop_beating()
            log.info(
                "worker %s closed: %d events written, %d conflicts, %d ticks",
                s.worker,
                s.events_written,
                s.conflicts,
                self.ticks,
            )

    def _wind_down(self, before_close: Callable[[], None]) -> None:
        """Reserve nothing more, give the invocations in flight the grace period, then
        (``before_close``: the heartbeats stop) close (rule 10 for what still runs
        here) and cancel the async phases left."""
        s, invocations = self.scheduler, self.invocations
        s.draining = True
        if invocations.in_flight:
            log.info(
                "worker %s stopping: %d invocations in flight, %.1f s of grace",
                s.worker,
                invocations.in_flight,
                self.grace_s,
            )
            if not invocations.wait(self.grace_s, interrupted=self._stop_now):
                log.warning(
                    "worker %s: %d invocations still running after the grace period; "
                    "closing returns their tasks",
                    s.worker,
                    invocations.in_flight,
                )
        before_close()
        try:
            s.close()
        finally:
            invocations.cancel()  # after the close: a cancelled phase then records nothing

    def _beat(self, closed: threading.Event) -> None:
        """Heartbeats on their own thread, a third of a lease apart (wall time), until
        ``closed``: neither a long phase nor a stop's grace lets this worker's lease
        lapse, nor delays recovering a lost one. Twice a second in between (and as soon
        as a lock seen free can tell), a peer that holds running tasks and whose process
        is gone has them recovered."""
        s = self.scheduler
        beat_every = s.lease_ms / 3 / 1000
        beat_at = time.monotonic() + beat_every
        while True:
            now = time.monotonic()
            look_at = s.next_liveness_look()
            step = min(LIVENESS_EVERY_S, beat_at - now)
            if look_at is not None:
                step = min(step, look_at - now)
            if closed.wait(max(step, 0.0)):
                return
            try:
                s.check_log()  # nothing renewed, recovered or folded from a log gone
                if time.monotonic() >= beat_at:
                    beat_at = time.monotonic() + beat_every
                    report = s.heartbeat()
                else:
                    report = s.recover_gone(wait=False)
                for task_id, worker in report.lost.items():
                    log.info("recovered %s from lost worker %s", task_id, worker)
                if report.recovered:
                    self.invocations.changed.set()  # the loop runs them at once
            except LogReplaced:
                self.invocations.changed.set()  # the loop stops with it at once
                return
            except Exception as error:  # a store hiccup: the next beat or tick tries again
                if closed.is_set():
                    return  # closing meanwhile: nothing to renew
                log.warning("heartbeat of worker %s failed: %s", s.worker, error)

    def _idle(self, news_seen: int) -> None:
        """Wait for work: the store's news (:mod:`..store.news`: an append here or in
        another process; only where it may bring work now) or an invocation's end,
        which set ``changed``; the head is polled every ``poll_ms`` too (a fallback,
        should the news be away)."""
        s = self.scheduler
        news = s.store.news
        deadline = self.next_deadline()
        seen = s.check_log()  # the head, in the log this worker folded
        changed = self.invocations.changed
        if not self._news_may_bring_work():
            # Every slot taken, and nothing but slots to fill: an append (this worker's
            # own checkpoints, mostly) makes no work until one frees, which wakes it.
            # The head's poll below still looks every poll_ms.
            flagging: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        elif news.generation != news_seen:
            return  # appended since the tick began: it may be work
        else:
            flagging = news.flagging(changed)
        with flagging:
            while not self._stop.is_set():
                now = s.now()
                if deadline is not None and now >= deadline:
                    return
                wait_ms = self.poll_ms if deadline is None else min(self.poll_ms, deadline - now)
                if changed.wait(max(wait_ms, 1.0) / 1000):
                    return  # news, an invocation ended (a slot is free), or a stop
                if s.check_log() != seen:
                    return  # another writer appended: its events may make work here
                if self._pass_requested():
                    return  # a host asked for a pass (marked keys dirty)

    def stop(self, *_: Any) -> None:
        """Stop :meth:`run` (thread- and signal-safe): nothing more is reserved and the
        invocations in flight get the grace period; a second call closes at once."""
        if self._stop.is_set():
            self._stop_now.set()
        self._stop.set()
        self.invocations.changed.set()

    def install_signal_handlers(self) -> None:
        """Stop on SIGTERM and SIGINT (call from the main thread); a second signal
        closes at once.

        The handler only writes the signal's number to a pipe; a thread of its own
        reads it and calls :meth:`stop`. A handler runs in the main thread between
        two of its steps, possibly while the loop holds the lock inside an Event it
        waits on, and ``stop()`` sets that Event: called from the handler, it would
        wait for that lock forever."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)  # a handler never blocks

        def stop_on_signals() -> None:
            while data := os.read(read_fd, 1):
                name = signal.Signals(data[0]).name
                if self._stop.is_set():
                    log.info("signal %s again: closing now", name)
                else:
                    log.info("signal %s: closing after at most %.1f s of grace", name, self.grace_s)
                self.stop()

        threading.Thread(target=stop_on_signals, name="tasktrail-signals", daemon=True).start()

        def handle(signum: int, frame: FrameType | None) -> None:
            with contextlib.suppress(OSError):  # a full pipe: a stop is on its way already
                os.write(write_fd, bytes([signum]))

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)


def _log_gone(s: Scheduler) -> bool:
    """After a read failed: whether the log is gone (known, or found now)."""
    try:
        s.check_log()
    except LogReplaced:
        return True
    except StoreError:
        return False  # the store away a while: not known now
    return False
