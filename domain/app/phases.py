"""Running phases: a pass reserves every task that can run now and calls its
registered phase handlers (or its abort handler) through an :class:`Invocation`,
until the task stops running, the scheduler closes, or a phase faults it (it raised,
returned without a decision, named no known phase, or took too many steps). Mixed
into :class:`~.scheduler.Scheduler` as :class:`PhaseCommands`, with :class:`PassReport`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConflictError, Refused
from ..invoking.phase_calls import AwaitableRunner, run_awaitable
from ..invoking.phase_steps import MAX_PHASE_STEPS as MAX_PHASE_STEPS
from ..invoking.phase_steps import PhaseSteps, drive
from ..service.retries import RetryCommands
from ..tasks import decide
from ..tasks.definitions import Registry
from ..tasks.events import Mode, OutcomeStatus
from ..tasks.invocation import Invocation
from ..tasks.live_index import live_by_priority, priority_of
from ..tasks.state import TaskState
from ..world import Draft, World
from .changes import Selected

if TYPE_CHECKING:
    from ..store.store import Store

T = TypeVar("T")


@dataclass
class PassReport:
    """What one :meth:`Scheduler.run_pass` did."""

    reserved: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)
    outdated: dict[str, str] = field(default_factory=dict)
    """Tasks that kept running under the definition their invocation started with
    after the registry changed it: ``missing_definition`` (unregistered) or
    ``replaced_definition`` (pi-durable's ``task_outdated`` report)."""
    faulted: dict[str, str] = field(default_factory=dict)
    """Tasks the scheduler itself ended ``faulted`` (maybe held), with the reason:
    ``threw``, ``timeout``, ``no_decision``, ``unknown_phase``, ``step_limit``,
    ``no_outcome`` or ``restart_limit`` (pi-durable's ``task_faulted``), once recorded."""

    @property
    def progressed(self) -> bool:
        """Whether the pass changed anything."""
        return bool(self.reserved or self.ended)


def _taken(task: TaskState, worker: str) -> bool:
    """Whether a reservation by ``worker`` could not take ``task`` now, as
    :func:`~..tasks.readiness.readiness` says: ended, holding its outcome, or running
    (in another worker; or here, but for an abort mark its invocation did not see)."""
    if task.status in ("terminal", "completing"):
        return True
    return task.status == "running" and (
        task.worker not in (None, worker) or not (task.mode == "run" and task.abort_requested)
    )


@dataclass
class Started:
    """What :meth:`PhaseCommands.start_invocations` started."""

    modes: dict[str, Mode] = field(default_factory=dict)
    """The mode of each invocation started, in the order of the tasks given."""
    error: BaseException | None = None
    """The first error neither a refusal nor a lost race (a store away, say): the
    caller raises it once it started the invocations in ``modes``."""


class PhaseCommands(PhaseSteps, RetryCommands):
    """:meth:`run_pass` and :meth:`run_until_idle` (an invocation's steps:
    :mod:`..invoking.phase_steps`; a failed phase: :mod:`..service.retries`)."""

    world: World
    registry: Registry
    closing: bool
    draining = False
    """Set when a worker stops: no invocation starts, and a running one ends after its
    current phase's decision (the close that follows returns its task: rule 10)."""
    _invocations: dict[str, Invocation]
    _resumed: set[str]
    _drained: set[str]
    _quiet_basis: int | None = None
    """The store news' :meth:`~..store.news.News.basis` before the last read to the
    log's end that :meth:`_refresh_unless_quiet` made (``None``: the next one reads)."""

    if TYPE_CHECKING:
        store: Store
        _closed: bool
        worker: str
        peers: frozenset[str]
        _lock: threading.RLock
        _rank_of: dict[str, bytes]
        _timed: Selected

        def _next_token(self, draft: Draft, task: TaskState) -> float | None: ...

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def _context(self, world: World | None = None) -> decide.Context: ...
        def _readiness(self, draft: Draft, ctx: decide.Context, task: TaskState) -> str: ...
        def _is_running(self, task_id: str) -> bool: ...
        def refresh(self) -> int: ...
        def _heartbeat_if_due(self) -> None: ...
        def _lock_lost(self) -> bool: ...
        def _fenced(self) -> bool: ...
        def reserve(self, task_id: str) -> Mode | None: ...
        def _reserve_all(self, task_ids: Sequence[str]) -> list[Mode | BaseException | None]: ...

        def finish(
            self,
            task_id: str,
            status: OutcomeStatus = "completed",
            error: Any = None,
            *,
            reason: str | None = None,
        ) -> None: ...

    # ─── running phases ─────────────────────────────────────────────────────

    def run_pass(self) -> PassReport:
        """Reserve every task that can run now and run its registered phases, one
        invocation after another (a :class:`~.worker.Worker` runs several at once).

        A phase that raises ends the task ``faulted`` (reason ``threw``) unless its
        retry policy tries it again (:mod:`..service.retries`); an abort handler that
        returns without an outcome ends it ``faulted`` (reason ``no_outcome``). An
        ``async def`` handler runs to its end on a loop of this thread's own.
        """
        report = PassReport()
        for task_id in self.runnable():
            mode = self.start_invocation(task_id, report)
            if mode is None:
                continue
            self.run_invocation(task_id, mode, report)
            self._heartbeat_if_due()  # a long pass still recovers lost workers in time
            if self.closing or self.draining:
                break
        return report

    def _refresh_unless_quiet(self) -> None:
        """:meth:`refresh` before deciding (under the lock), spared where the store's
        news heard every other writer's append since the last one and there was none:
        a PostgreSQL listener, connected. The read was a round trip to the server each
        group (a fifth of a busy worker's CPU). On PostgreSQL no turn holds other
        writers off between the read and the append anyway: the guards refuse a
        decision on a view another writer's append left stale, and the group is decided
        again after a read (a conflict drops the basis)."""
        news = self.store.news
        if news.quiet_since(self._quiet_basis):
            return
        basis = news.basis()
        self._quiet_basis = None  # until the read reached the end
        self.refresh()
        self._quiet_basis = basis

    def _wake_now(self) -> dict[str, Any]:
        """:meth:`~.scheduler.Scheduler.wake` on the world as folded now (under the lock)."""
        ctx = self._context()
        world = self.world
        draft = Draft(world)
        active = bool(self._invocations)
        at: float | None = None
        held = world.tasks  # a live task is never dropped from memory
        # Once active, a task with no deadline nor rate changes nothing (neither
        # ``active`` nor ``at``): only the others are asked, kept from the changes.
        timed = self._timed.of(world)
        for task_id in timed if active else world.live:
            task = held.get(task_id) or world.get(task_id)
            assert task is not None
            state = self._readiness(draft, ctx, task)
            if state in ("sleeping", "message") and task.until is not None:
                at = task.until if at is None else min(at, task.until)  # rules 8, 21
            elif state in ("ready", "running"):
                active = True
            elif state == "rate_limited":  # rule 34: held back until its next token
                token = self._next_token(draft, task)
                if token is not None:
                    at = token if at is None else min(at, token)
        return {"active": active, "at": at}

    def _next_wake_at(self) -> float | None:
        """When the earliest sleep, message wait or rate token falls due, as :meth:`wake`
        says, for a worker's idle wait: a first look, which reads the log only when the
        store's news says another writer appended (a wait it misses ends on that news)."""
        with self._lock:
            if not self._closed:  # as wake() reads: nothing of a closed store
                self._refresh_unless_quiet()
            at: float | None = self._wake_now()["at"]
            return at

    def runnable(self, limit: int | None = None) -> list[str]:
        """The tasks that can run now and no invocation here runs, higher priorities first
        (rule 19), then in this worker's order (submission order; with peers, rendezvous
        hashing). Folds what other writers appended first; empty once closing or draining.
        ``limit``: the first that many only (the rest are not asked: a worker with a few
        free slots and thousands of tasks queued asks after a few)."""
        if self.closing or self.draining or self._lock_lost():
            return []  # a worker without its liveness lock takes no new work
        with self._lock:  # a heartbeat thread may fold events meanwhile
            self._refresh_unless_quiet()  # a first look: each reservation decides on its own
            world = self.world
            ctx, draft = self._context(world), Draft(world)
            ordered = live_by_priority(world)
            if self.peers:  # ranked first, then asked: each worker's order is its own
                ranks = self._ranks(world)
                ordered.sort(key=lambda t: (-priority_of(world, t), ranks[t]))
            ready = (
                task_id
                for task_id in ordered
                if task_id not in self._invocations
                and self._readiness(draft, ctx, world.tasks[task_id]) == "ready"
            )
            return self._admitted(world, ctx, ready, limit)

    def _ranks(self, world: World) -> dict[str, bytes]:
        """This worker's rendezvous rank of each live task, each hashed once, not at
        every look (kept for the live tasks: those that ended are dropped now and then)."""
        ranks = self._rank_of
        if len(ranks) > 2 * len(world.live) + 1_000:
            ranks = self._rank_of = {t: ranks[t] for t in world.live if t in ranks}
        for task_id in world.live:
            if task_id not in ranks:
                ranks[task_id] = _rank(self.worker, task_id)
        return ranks

    def _admitted(
        self, world: World, ctx: decide.Context, ready: Iterator[str], limit: int | None
    ) -> list[str]:
        """The first ``limit`` of ``ready`` (all: ``None``) that this worker may start
        (:class:`~..service.flow.FlowCommands` narrows them to what limits let start)."""
        return list(ready if limit is None else islice(ready, limit))

    def start_invocation(self, task_id: str, report: PassReport) -> Mode | None:
        """Reserve ``task_id`` for an invocation here; returns its mode (``run`` or
        ``abort``), or ``None`` when none started: another worker reserved it first,
        a rule refused it (``report.blocked``), or a rule ended it instead
        (``report.ended``, and ``report.faulted`` for rule 12)."""
        started = self.start_invocations([task_id], 1, report)
        if started.error is not None:
            raise started.error
        mode = started.modes.get(task_id)
        if mode is not None:
            report.reserved.append(task_id)
        return mode

    def start_invocations(self, candidates: list[str], slots: int, report: PassReport) -> Started:
        """Reserve up to ``slots`` of ``candidates`` for invocations here, in their order,
        their reservations appended together (:mod:`.group_commit`). A candidate that
        is no longer ready on the world as folded now (another worker took or ended
        it) is passed over; those looked at are taken off the front of ``candidates``.
        What rules decided instead of a reservation goes to ``report``, as
        :meth:`start_invocation`'s."""
        started = Started()
        if self.closing or self.draining or self._lock_lost():
            return started
        chosen: list[str] = []
        looked = 0
        # Not under the lock, which a leader holds while it waits for the store's turn:
        # a dict's get is atomic, and what this passes over or lets through is only a
        # first look (each reservation is decided under the lock, on the world then).
        tasks = self.world.tasks
        for task_id in candidates:
            if len(chosen) == slots:
                break
            looked += 1
            task = tasks.get(task_id)
            if (
                task is not None
                and task_id not in self._invocations
                and not _taken(task, self.worker)
            ):
                chosen.append(task_id)
        del candidates[:looked]
        # Not under the lock: queued, the reservations join the group of a leader that
        # waits for its turn (each is decided under the lock, on the world as it is).
        outcomes = self._reserve_all(chosen)
        with self._lock:
            for task_id, outcome in zip(chosen, outcomes, strict=True):
                if isinstance(outcome, ConflictError):
                    continue  # another worker reserved it first; this one moves on
                if isinstance(outcome, Refused):
                    if not self._held_elsewhere(task_id):
                        report.blocked[task_id] = outcome.reason
                elif isinstance(outcome, BaseException):
                    started.error = started.error or outcome
                elif outcome is None:
                    report.ended.append(task_id)
                    ended = self._task_now(task_id).outcome
                    if ended is not None and ended.status == "faulted":
                        report.faulted[task_id] = ended.reason or "faulted"  # rule 12
                else:
                    started.modes[task_id] = outcome
        return started

    def run_invocation(
        self,
        task_id: str,
        mode: Mode,
        report: PassReport,
        run_awaitable: AwaitableRunner = run_awaitable,
    ) -> None:
        """Run the invocation :meth:`start_invocation` started, to its end, in this
        thread: its phases (or abort handler) until the task stops running here, the
        scheduler closes or drains, or a phase faults it (:mod:`..invoking.phase_steps`); safe to
        run in a thread of its own, one thread an invocation. ``run_awaitable`` runs
        what an ``async`` handler returns (a worker runs an ``async`` invocation on its
        event loop instead: :mod:`..invoking.loop_invocations`)."""
        invocation = self._invocations[task_id]
        try:
            steps = self._steps(invocation, mode, report)
            drive(steps, partial(self._perform, invocation, run_awaitable))
        finally:
            self._end_invocation(invocation)
        if not self._task_now(task_id).live:
            report.ended.append(task_id)

    def _stranded(self) -> list[str]:
        """Tasks held running here that no invocation here runs any more: an invocation
        ended and the write of its last decision failed (the store away), so nothing
        here runs the task again, and this worker's lease keeps the others off it."""
        with self._lock:
            ctx, draft = self._context(), Draft(self.world)
            return [
                task_id
                for task_id in sorted(self.world.live)
                if task_id not in self._invocations
                and self._is_running(task_id)
                and self._readiness(draft, ctx, self._task_now(task_id)) == "running"
            ]

    def _task_now(self, task_id: str) -> TaskState:
        """A task this pass knows exists, as the world holds it now."""
        task = self.world.get(task_id)
        assert task is not None, task_id
        return task

    def _held_elsewhere(self, task_id: str) -> bool:
        task = self.world.get(task_id)
        return task is not None and decide.held_elsewhere(task, self._context())

    def run_until_idle(self, max_passes: int = 10_000) -> list[PassReport]:
        """Run passes until one changes nothing (sleeps not yet due stay asleep)."""
        reports = []
        for _ in range(max_passes):
            report = self.run_pass()
            reports.append(report)
            if not report.progressed:
                break
        return reports


def _rank(worker: str, task_id: str) -> bytes:
    """A worker's own order of tasks (rendezvous hashing)."""
    return hashlib.blake2b(f"{worker}\x00{task_id}".encode(), digest_size=8).digest()
