"""The worker loop: one scheduler process of a fleet, run as a service.

A :class:`Worker` drives a :class:`~.scheduler.Scheduler` the way a host would:
each tick renews its lease and recovers the tasks of lost workers
(:meth:`~.scheduler.Scheduler.heartbeat`), starts invocations on runnable tasks (up to
``concurrency`` in flight, each in a thread of its own, ``async`` phases on the
worker's event loop: :mod:`.invocations`), runs the controller passes a host requested
(``request_pass``), a full controller pass when Turn work is due and the runtime
cleanups due for an attempt when a Turn runtime is configured, and ``dispatch_due`` /
``reconcile`` when a run executor is. Between ticks it sleeps until the earliest
deadline it knows (a sleep falling due, a Turn or wakeup deadline, a cleanup attempt,
its next heartbeat), until an invocation ends (its slot is filled at once), until
another writer appends (it polls the store's head) or until a pass is requested. The
loop itself, and stopping with a grace period, are :mod:`.worker_loop`'s.

Every decision a tick takes is logged at INFO on the ``tasktrail.worker`` logger.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..turns.engine import Maintenance
from ..turns.report import ControllerPassReport
from ..turns.runtime import Runtime, cleans_up
from ..turns.settings import retry_delay_ms
from .changes import Changes
from .fleet import HeartbeatReport
from .invocations import DEFAULT_CONCURRENCY, Invocations
from .phases import PassReport
from .worker_loop import DEFAULT_GRACE_S, DEFAULT_POLL_MS, WorkerLoop, check_grace, check_poll
from .worker_reports import TaskCallback, WakeCallback, WorkerReports

if TYPE_CHECKING:
    from .scheduler import Scheduler

log = logging.getLogger("tasktrail.worker")


@dataclass
class TickReport:
    """What one :meth:`Worker.tick` did."""

    recovered: list[str] = field(default_factory=list)
    reserved: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    dispatched: int = 0
    reconciled: int = 0
    passed: int = 0
    cleanups: dict[str, dict[str, str]] = field(default_factory=dict)
    """The runtime cleanups attempted outside a pass: task -> role -> what came of it."""
    scheduled: list[str] = field(default_factory=list)
    """Tasks the schedules due submitted (rule 27)."""
    finished: int = 0
    """Invocations that ended with their task still live (it waits, sleeps, or was
    handed back), collected in this tick."""

    @property
    def progressed(self) -> bool:
        """Whether the tick changed anything (then the next one runs at once)."""
        return bool(
            self.recovered
            or self.reserved
            or self.ended
            or self.dispatched
            or self.finished
            or self.scheduled
        )


class Worker(WorkerLoop, WorkerReports):
    """Runs one scheduler as a fleet member until :meth:`stop`.

    Up to ``concurrency`` invocations run at once (default 16), each on its own
    reserved task; a phase or abort handler may be ``async def`` (it runs on the
    worker's event loop) or sync (it runs in the invocation's thread). A stop (SIGTERM,
    SIGINT, :meth:`stop`) reserves nothing more and gives the running invocations
    ``grace_s`` seconds (default 10) to reach their next decision before the close
    returns their tasks (rule 10); a second stop closes at once.

    ``on_wake({active, at})`` is called when :meth:`~.Scheduler.wake` changes (a wake
    it raised on is offered again at the next tick);
    ``on_parked(task_id, reason)`` (each time a recovery parks a task at the restart
    limit), ``on_blocked(task_id, reason)`` (when a task's
    blocked reason changes), ``on_unblocked(task_id, reason)`` (a task reported
    blocked is no longer, with the reason it had: a registry change, a raised
    ``restart_limit``, ``retry`` or its end let it go), ``on_migration_failed(task_id,
    reason)`` (once per definition whose migration failed) and ``on_outdated(task_id,
    reason)`` (a task keeps running under the definition its invocation started with:
    ``missing_definition`` or ``replaced_definition``) and ``on_faulted(task_id,
    reason)`` (the scheduler ended a task ``faulted``, once it is recorded; the reason
    as in :attr:`~.phases.PassReport.faulted`) report to the host as the seed
    scheduler does; ``on_pass_error(task_id, error)`` hears each task a controller
    pass blocked (its runtime events failed) or failed, with why, as yui's controller
    reports each to its ``onError``. ``maintenance`` (project ids, or a predicate
    asked at each pass) fences projects as yui's ``maintenanceFence`` does: their
    tasks are deferred, and ``on_deferred(task_id, project_ids)`` hears of each
    deferral (yui's ``onMaintenanceFenceDefer``); the deferred work stays due, so the
    passes after it (with the delivery backoff) do it once the fence is down.
    Callbacks that raise are logged, never fatal.
    """

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        runtime: Runtime | None = None,
        poll_ms: float = DEFAULT_POLL_MS,
        on_wake: WakeCallback | None = None,
        on_parked: TaskCallback | None = None,
        on_blocked: TaskCallback | None = None,
        on_unblocked: TaskCallback | None = None,
        on_migration_failed: TaskCallback | None = None,
        on_outdated: TaskCallback | None = None,
        on_faulted: TaskCallback | None = None,
        on_pass_error: TaskCallback | None = None,
        maintenance: Maintenance = (),
        on_deferred: Callable[[str, tuple[str, ...]], None] | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        grace_s: float = DEFAULT_GRACE_S,
    ) -> None:
        poll_ms = check_poll(poll_ms)
        self.scheduler = scheduler
        self.invocations = Invocations(scheduler, concurrency)
        """The invocations in flight (``concurrency`` at most)."""
        scheduler.listen_for_news(self.invocations.changed.set)  # a message: tick at once
        self.grace_s = check_grace(grace_s)
        self.runtime = runtime
        # Runtime's own cleanup answers "not done" for good: a runtime that does not
        # implement one has nothing the Worker could settle outside a pass, and asking
        # it every backoff would cost a call per open obligation, growing with history.
        self._cleans_up = runtime is not None and cleans_up(runtime)
        self.poll_ms = poll_ms
        self.on_wake = on_wake
        self.on_parked = on_parked
        self.on_blocked = on_blocked
        self.on_unblocked = on_unblocked
        self.on_migration_failed = on_migration_failed
        self.on_outdated = on_outdated
        self.on_faulted = on_faulted
        self.on_pass_error = on_pass_error
        self.maintenance = maintenance
        self.on_deferred = on_deferred
        self.ticks = 0
        self._stop = threading.Event()
        self._stop_now = threading.Event()
        self._last_wake: dict[str, Any] | None = None
        self._blocked: dict[str, str] = {}
        self._blocked_changes, self._blocked_basis = Changes(), ()
        self._parked_reported = 0
        """How many of the scheduler's :attr:`~.Scheduler.parked` were reported: each
        recovery's parkings are appended there, a task parked again after ``retry``
        too, and each is reported (pi-durable reports at every open that parks)."""
        self._turn_retry_at = -math.inf
        """No controller pass before this (a pass could not move the Turn deadline)."""
        self._turn_stuck = 0
        self._reported_migrations: dict[str, Any] = {}
        """Each live task reported for a failed migration, with the definition it failed
        under (one that ended is dropped at the next tick)."""

    # ─── one cycle ──────────────────────────────────────────────────────────

    def tick(self) -> TickReport:
        """One cycle of work: heartbeat, phases, controller pass, dispatch, reconcile.
        The invocations it starts run at once (``concurrency`` of them) and it returns
        once they all ended, as :meth:`~.Scheduler.run_pass` does; :meth:`run` does
        not wait for them (a slot that frees is filled at once)."""
        return self._tick(wait=True)

    def _tick(self, *, wait: bool) -> TickReport:
        s = self.scheduler
        report = TickReport()
        # Due a third of a lease after the last one: a busy worker's ticks do not each
        # write its lease (commands renew it, and run() beats on a thread of its own).
        beat = s.heartbeat() if s.now() >= s.next_heartbeat() else HeartbeatReport()
        report.recovered = beat.recovered
        for task_id in beat.recovered:
            log.info("recovered %s from lost worker %s", task_id, beat.lost.get(task_id))
        # Before the phases, so a tick's task can start in this cycle.
        report.scheduled = s.submit_due_schedules()
        self._start_invocations(report, wait=wait)
        self._collect(report)
        self._report_blocked()
        if self._pass_requested():
            # passes.requested (yui pumps a pass as it is requested): the dirty keys a host
            # marked, or a full pass it asked for, run now, coalesced as the queue keeps them.
            for passed in s.pump(runtime=self.runtime, maintenance=self.maintenance):
                report.passed += len(passed.tasks)
                self._heard(passed)
        turn_due = s.next_turn_deadline() if self.runtime is not None else None
        if turn_due is not None and turn_due <= s.now() and s.now() >= self._turn_retry_at:
            # Only when Turn work is due: every pass is recorded as events.
            passed = s.controller_pass("full", runtime=self.runtime, maintenance=self.maintenance)
            report.passed += len(passed.tasks)
            self._heard(passed)
            self._turn_backoff(turn_due)
        if self._cleans_up:
            self._clean_up(report)
        if s._runs_runtime().executor is not None:
            dispatched = s.dispatch_due()
            report.dispatched = len(dispatched.minted)
            for run_id in dispatched.minted:
                log.info("dispatched run %s", run_id)
            for task_id, error in dispatched.payload_errors.items():
                log.warning("no run of %s minted: its payload hook failed: %s", task_id, error)
            reconciled = s.reconcile()
            report.reconciled = len(reconciled.outcomes)
            for run_id, outcome in reconciled.outcomes.items():
                log.info("reconciled run %s: %s", run_id, outcome)
        self._report_parked()
        self._report_wake()
        self.ticks += 1
        return report

    def _start_invocations(self, report: TickReport, *, wait: bool) -> None:
        """Start invocations on the tasks that can run now, as slots allow; ``wait``:
        go through every one of them, each as a slot frees, and wait for all to end."""
        s, invocations = self.scheduler, self.invocations
        if self._stop.is_set() or (invocations.free == 0 and not wait):
            return
        # Not waiting, it starts as many as its free slots: twice that are asked after
        # (some may be taken meanwhile), not every task queued.
        candidates = s.runnable(None if wait else 2 * invocations.free)
        settled = PassReport()  # what reservations decided without an invocation
        while candidates and not self._stop.is_set():
            if invocations.free == 0:
                if not wait:
                    break
                invocations.changed.wait(0.05)
                self._collect(report)
                continue
            # As many as there are free slots, reserved in one transaction.
            started = s.start_invocations(candidates, invocations.free, settled)
            for task_id, mode in started.modes.items():
                log.info("started %s (%s)", task_id, mode)
                report.reserved.append(task_id)
                invocations.start(task_id, mode, PassReport(reserved=[task_id]))
            if started.error is not None:
                raise started.error
        if wait:
            invocations.wait(math.inf)
        self._heard_from_phases(settled, report)

    def _collect(self, report: TickReport) -> None:
        """Take in what the invocations that ended since the last look reported."""
        for finished in self.invocations.finished():
            self._heard_from_phases(finished, report)

    def _heard_from_phases(self, phases: PassReport, report: TickReport) -> None:
        for task_id in phases.ended:
            log.info("ended %s", task_id)
            report.ended.append(task_id)
        for task_id, reason in phases.outdated.items():
            log.info("%s keeps running under its old definition (%s)", task_id, reason)
            self._call(self.on_outdated, task_id, reason)
        for task_id, reason in phases.faulted.items():
            log.info("faulted %s (%s)", task_id, reason)
            self._call(self.on_faulted, task_id, reason)
        if phases.reserved and not phases.ended:
            report.finished += len(phases.reserved)

    def next_deadline(self) -> float | None:
        """The earliest scheduler-clock time something falls due: a sleep, a Turn or
        wakeup deadline, a runtime cleanup's next attempt, a schedule's tick, or this
        worker's next heartbeat."""
        s = self.scheduler
        candidates = [s._next_wake_at(), s.next_heartbeat(), s.next_schedule_due()]
        if self.runtime is not None:
            if self._pass_requested():
                candidates.append(s.now())  # a requested pass runs at the next tick
            turn_due = s.next_turn_deadline()
            if turn_due is not None:
                candidates.append(max(turn_due, self._turn_retry_at))
            if self._cleans_up:
                candidates.append(s.next_cleanup_attempt())
        due = [c for c in candidates if c is not None]
        return min(due) if due else None

    def _news_may_bring_work(self) -> bool:
        """Whether an append may give this worker work now: a free slot for a task it
        made runnable, or work beside the invocations (a runtime's passes and
        cleanups, an executor's runs, a host told of wake changes)."""
        return (
            self.invocations.free > 0
            or self.runtime is not None
            or self.on_wake is not None
            or self.scheduler._runs_runtime().executor is not None
        )

    def _pass_requested(self) -> bool:
        """Whether a requested pass waits for this Worker's pump: not while another
        pump runs (a host's thread), which runs it once its pass is done (passes.one_pump);
        taken for work due now, it would have the Worker tick without pause meanwhile."""
        queue = self.scheduler.pass_queue
        return self.runtime is not None and bool(queue) and not queue.pumping

    def _heard(self, passed: ControllerPassReport) -> None:
        """Tell the host what a controller pass deferred, blocked or failed."""
        for task_id, projects in passed.deferred.items():
            log.info("deferred %s: %s under maintenance", task_id, ", ".join(projects))
            self._call(self.on_deferred, task_id, projects)
        # passes.errors_reported (yui, ``#onError`` per blocked or failed task): the
        # pass went on for the other tasks; the host hears of each that did not.
        for task_id, error in passed.errors.items():
            log.warning("controller pass %s %s: %s", passed.outcomes[task_id], task_id, error)
            self._call(self.on_pass_error, task_id, error)

    def _clean_up(self, report: TickReport) -> None:
        """The runtime cleanups due for an attempt (yui tries one at once and retries it
        on the delivery retry timer, never giving up), outside a pass: one answering
        "not done yet" appends nothing and is due again after the backoff."""
        s = self.scheduler
        due = s.next_cleanup_attempt()
        if self.runtime is None or due is None or due > s.now():
            return
        cleaned = s.run_cleanups(runtime=self.runtime, maintenance=self.maintenance)
        report.cleanups = cleaned.cleanups
        for task_id, roles in cleaned.cleanups.items():
            for role, how in roles.items():
                # "Not done yet" (or held by another worker) comes back every backoff (2 s
                # at most): not news.
                level = logging.DEBUG if how in ("open", "held") else logging.INFO
                log.log(level, "runtime cleanup of %s/%s: %s", task_id, role, how)
        for where, error in cleaned.errors.items():
            log.warning("runtime cleanup of %s failed: %s", where, error)
        for task_id, projects in cleaned.deferred.items():
            log.info("deferred cleanups of %s: %s under maintenance", task_id, ", ".join(projects))
            self._call(self.on_deferred, task_id, projects)

    def _turn_backoff(self, due: float) -> None:
        """A pass that could not move the Turn deadline it ran for (a fenced wakeup, a
        Turn the runtime does not deliver) is run again after the delivery backoff, as
        yui's retry timers do, not at every poll; one that moved it resets it."""
        s = self.scheduler
        after = s.next_turn_deadline()
        if after is not None and after <= due:
            delay = retry_delay_ms(s.turn_settings.delivery_retry_base_ms, self._turn_stuck)
            self._turn_retry_at = s.now() + delay
            self._turn_stuck += 1
        else:
            self._turn_retry_at = -math.inf
            self._turn_stuck = 0
