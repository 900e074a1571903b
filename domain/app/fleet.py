"""A fleet member: the worker's name, its lease, and recovery scoped to lost workers.

Several schedulers may share one store (SPEC section 8). Each is a *worker* with
a name; a reservation records the worker on the task (``TaskState.worker``). A
worker holds a lease in the store's lease table (:mod:`..store.leases`) and
renews it on every command cycle (at most every quarter lease, so that renewals
cost no more than a write every few seconds) and on :meth:`FleetCommands.heartbeat`.

Rule 9 for a fleet: opening recovers the running tasks of this worker's own name
(a restart of the same worker) and of workers whose lease expired or whose process
is gone; a heartbeat recovers those too. Each writer holds a lock for its process's
life (:mod:`..store.liveness`: a ``flock`` beside a SQLite file, a session advisory
lock on PostgreSQL), which the system lets go when the process dies, so a dead
worker's tasks come back at once (:meth:`FleetCommands.recover_gone`, asked every
second by a running :class:`~.worker.Worker`), while a live but silent one (stopped,
hung, cut off) keeps its tasks until its lease lapses. A task a live worker holds is
never touched. On PostgreSQL a worker's lock goes with its server session, which ends
without the process too (a cut connection): the worker takes it again at once, a peer
calls it gone only once its lock was free for a while (:mod:`..store.advisory`), and
a worker that was without its lock that long is fenced (:meth:`FleetCommands._fenced`)
and then recovers its own running tasks, as a restart would. Two workers recovering at
once recover each task once: both decide on the store's current state, and the loser
of the append race decides again.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConflictError, InvalidArgument, LogReplaced, StoreError
from ..store.leases import Lease, Leases
from ..store.liveness import Liveness
from ..store.liveness_kinds import liveness_for
from ..tasks import decide
from ..tasks.context import Context
from ..tasks.events import TaskRecovered
from ..world import Draft
from .log_guard import LogGuard

if TYPE_CHECKING:
    from ..clock import Clock
    from ..store.store import Store
    from ..world import World

T = TypeVar("T")
log = logging.getLogger("tasktrail.worker")
DEFAULT_LEASE_MS = 30_000.0
WORKER_ENV = "TASKTRAIL_WORKER"
MAX_WORKER_NAME = 200
RECOVERY_ATTEMPTS = 8
GONE_FOR_MS = 86_400_000.0
"""Lease rows of workers whose lease ran out more than this long ago are dropped."""
PRUNE_EVERY_MS = 3_600_000.0


def worker_name(worker: str | None) -> str:
    """The worker's name: ``worker``, else ``$TASKTRAIL_WORKER``, else a fresh unique id."""
    if worker is None:
        worker = os.environ.get(WORKER_ENV) or (
            f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        )
    if not isinstance(worker, str) or not worker.strip() or len(worker) > MAX_WORKER_NAME:
        raise InvalidArgument(
            f"worker must be a non-empty name of at most {MAX_WORKER_NAME} characters, "
            f"not {worker!r}"
        )
    return worker


def lease_ms(lease: object) -> float:
    """A lease length, checked: a finite number of ms above zero."""
    if isinstance(lease, bool) or not isinstance(lease, int | float) or not 0 < lease < 1e12:
        raise InvalidArgument(f"lease must be a number of ms above 0, not {lease!r}")
    return float(lease)


@dataclass
class HeartbeatReport:
    """What one :meth:`FleetCommands.heartbeat` did."""

    recovered: list[str] = field(default_factory=list)
    """Tasks taken back from lost workers, now ``pending`` with a restart counted."""
    lost: dict[str, str | None] = field(default_factory=dict)
    """The worker each recovered task was lost from."""
    parked: list[str] = field(default_factory=list)
    """Recovered tasks the restart limit parks (rule 9)."""


class FleetCommands(LogGuard):
    """The fleet side of the :class:`~.scheduler.Scheduler` (a mixin), which stops with
    its log (:class:`~.log_guard.LogGuard`)."""

    if TYPE_CHECKING:
        store: Store
        clock: Clock
        world: World
        worker: str
        lease_ms: float
        parked: list[str]
        _lock: threading.RLock

        def refresh(self) -> int: ...
        def _context(self) -> Context: ...
        def _reading(self) -> float: ...
        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def _catch_up(self) -> None: ...

    _leases: Leases | None = None
    _liveness: Liveness | None = None
    _liveness_key: str | None = None
    _pruned_at: float | None = None
    _renewed_at: float | None = None
    _beat_at: float | None = None
    _lease_optional = False
    peers: frozenset[str] = frozenset()
    """Other workers whose lease was current at the last heartbeat."""

    @property
    def leases(self) -> Leases:
        """The store's lease table."""
        if self._leases is None:
            self._leases = Leases(self.store)
        return self._leases

    def heartbeat(self) -> HeartbeatReport:
        """Renew this worker's lease and recover the tasks of workers whose lease expired."""
        with self._lock:
            liveness = self._liveness
            if self._liveness_key is None and liveness is not None and liveness.unreachable:
                self._hold_liveness()  # the server refused one more connection at open
            self._renew_lease(force=True)
            self._beat_at = self._renewed_at
            return self._recover_lost(at_open=False, own=self._fenced_meanwhile())

    def recover_gone(self, *, wait: bool = True) -> HeartbeatReport:
        """Recover, at once, the running tasks of workers whose process is gone (their
        liveness lock is free) though their lease still runs. Reads the lease table
        only while another worker holds a running task here: its cost follows the live
        work. A :class:`~.worker.Worker` asks twice a second, with ``wait=False``.

        On PostgreSQL a lock must be seen free twice, ``confirm_s`` apart
        (:mod:`..store.advisory`): ``wait`` looks again once that can tell (it takes that
        long only when a lock was seen free); without it, a later call tells."""
        if self._fenced_meanwhile():
            with self._lock:
                return self._recover_lost(at_open=False, own=True)
        with self._lock:
            self._catch_up()  # a task another worker reserved since this one last read
            holders = self._holders() - {self.worker}
        if not holders:
            return HeartbeatReport()
        leases = self.leases.all()
        now = self._reading()
        current = {
            worker
            for worker in holders
            if (lease := leases.get(worker)) is not None and not lease.expired(now)
        }
        if not current or current <= self._alive(leases, now, among=current, wait=wait):
            return HeartbeatReport()  # every holder whose lease runs is alive
        with self._lock:
            return self._recover_lost(at_open=False)

    def next_liveness_look(self) -> float | None:
        """When (``time.monotonic()``) a lock seen free can tell whether its worker is
        gone; ``None`` when none is in doubt."""
        return self._liveness.due() if self._liveness is not None else None

    def _lock_lost(self) -> bool:
        """Whether this worker's liveness lock was found lost and is not held again:
        it reserves nothing meanwhile (a peer may soon take what it reserves)."""
        return self._liveness is not None and self._liveness.lost_for() is not None

    def _fenced(self) -> bool:
        """Whether this worker has been without its liveness lock long enough for a peer
        to call it gone and take its tasks: its invocations' decisions are refused
        (:class:`LeaseLost`), nothing is recorded for them."""
        liveness = self._liveness
        lost_for = liveness.lost_for() if liveness is not None else None
        return lost_for is not None and lost_for >= liveness.confirm_s  # type: ignore[union-attr]

    def _fenced_meanwhile(self) -> bool:
        """Whether the liveness lock is held again after an outage that fenced this
        worker: its running tasks, whose invocations' decisions were refused, are then
        recovered as at a restart (a peer may have recovered some already)."""
        liveness = self._liveness
        if liveness is None or liveness.lost_for() is not None:
            return False
        outage = liveness.take_outage()
        if not outage or outage < liveness.confirm_s:
            return False
        log.warning(
            "worker %s: was without its liveness lock for %.1f s; its running tasks are "
            "recovered, as after a restart",
            self.worker,
            outage,
        )
        return True

    def _liveness_of(self) -> Liveness:
        if self._liveness is None:
            location = self.store.location
            self._liveness = liveness_for(location.kind, location.path, location.env)
        return self._liveness

    def _hold_liveness(self) -> None:
        """Take this worker's liveness lock (a writer's open): peers read its key from
        the lease row, so it is taken before the first renewal."""
        if self.store.read_only:
            return
        liveness = self._liveness_of()
        if liveness.hold(self.worker):
            self._liveness_key = liveness.key(self.worker)
        else:
            log.info(
                "worker %s: holds no liveness lock; peers recover its tasks when its lease "
                "lapses, not at once",
                self.worker,
            )

    def live_workers(self) -> frozenset[str]:
        """The workers whose lease is current now (this one's too, once renewed) and
        whose process is not gone, read from the lease table as it stands (a lock seen
        free is looked at again once that can tell: on PostgreSQL, 0.8 s on). A store
        whose lease table cannot be read raises :class:`StoreError`: no worker is taken
        for lost on a failed read."""
        return frozenset(self._alive(self.leases.all(), self._reading(), wait=True))

    def _alive(
        self,
        leases: dict[str, Lease],
        now: float,
        among: set[str] | None = None,
        *,
        wait: bool = False,
    ) -> set[str]:
        """Of ``leases``, the workers whose lease is current at ``now``, less those (of
        ``among``, if given) whose process is gone (their liveness lock is free; ``wait``:
        looked at again if need be, :meth:`~..store.liveness.Liveness.gone`)."""
        alive = {worker for worker, lease in leases.items() if not lease.expired(now)}
        keys = {
            worker: lease.liveness
            for worker, lease in leases.items()
            if worker in alive
            and worker != self.worker
            and lease.liveness
            and (among is None or worker in among)
        }
        return alive - self._liveness_of().gone(keys, wait=wait) if keys else alive

    def _heartbeat_if_due(self) -> None:
        if self.clock() >= self.next_heartbeat():
            self.heartbeat()

    def next_heartbeat(self) -> float:
        """When the next heartbeat is due (scheduler clock): a third of a lease after the
        last one. Commands renew the lease too, but only a heartbeat looks for lost
        workers, so this counts from the last heartbeat."""
        beat = self._beat_at if self._beat_at is not None else self.clock()
        return beat + self.lease_ms / 3

    def _renew_lease(self, *, force: bool = False) -> None:
        if self.log_problem is not None:  # every decision renews first: none, nor a lease,
            raise LogReplaced(self.log_problem)  # into a store whose log is another
        now = self._reading()  # the clock's own reading (leases compare readings), checked
        renewed = self._renewed_at
        if not force and renewed is not None and now - renewed < self.lease_ms / 4:
            return
        try:
            self.leases.renew(self.worker, now, self.lease_ms, self._liveness_key)
        except StoreError:
            if not self._lease_optional:
                raise
            return  # a store opened read-only: its commands are refused on their own
        self._renewed_at = now
        if force and (self._pruned_at is None or now - self._pruned_at >= PRUNE_EVERY_MS):
            self._pruned_at = now
            self._drop_long_gone(now)

    def _drop_long_gone(self, now: float) -> None:
        """Drop the lease rows (and lock files) of workers gone for more than a day."""
        try:
            dropped = self.leases.drop_expired(now - GONE_FOR_MS)
        except StoreError as error:
            log.info("worker %s: old lease rows not dropped: %s", self.worker, error)
            return
        keys = {worker: key for worker, key in dropped.items() if key}
        if keys:
            self._liveness_of().forget(keys)

    def _lost(self, *, at_open: bool, own: bool) -> Callable[[str | None], bool]:
        """Which workers' running tasks are recovered now: of those that held one when
        the leases were read, those whose lease expired or whose process is gone (their
        liveness lock is free); this one's own when ``own``. A worker that held none
        then is not judged: the decision folds the store again, and a worker that wrote
        its lease and reserved a task since was judged by leases read before it had one."""
        now = self._reading()
        try:
            leases = self.leases.all()
        except StoreError:
            leases = {}  # a read-only store: no lease can be read, as before fleets
        judged = self._holders()
        alive = self._alive(leases, now, among=judged, wait=at_open)
        self.peers = frozenset(alive - {self.worker})

        def lost(worker: str | None) -> bool:
            if worker == self.worker:
                return own  # reopened under its own name (or fenced): its work is lost
            # A task reserved since was reserved by a live worker: the next beat judges it.
            return worker is None or (worker in judged and worker not in alive)

        return lost

    def _holders(self) -> set[str]:
        """The workers that hold a running task here (only theirs is liveness asked)."""
        return {
            task.worker
            for task_id in self.world.live
            if (task := self.world.get(task_id)) is not None
            and task.status == "running"
            and task.worker is not None
        }

    def _recover_lost(self, *, at_open: bool, own: bool | None = None) -> HeartbeatReport:
        """Recover the running tasks of lost workers (:meth:`_lost`; ``own``: this
        worker's too, as at an open under its name, the default there)."""
        report = HeartbeatReport()
        for attempt in range(RECOVERY_ATTEMPTS):
            self.refresh()
            lost = self._lost(at_open=at_open, own=at_open if own is None else own)
            holders = [
                task_id
                for task_id in self.world.live
                if (task := self.world.get(task_id)) is not None
                and task.status == "running"
                and lost(task.worker)
            ]
            if not holders and not at_open:
                return report
            try:
                report.parked, recovered = self._decide(_recover, lost)
            except ConflictError:
                # Another worker recovered (or its owner renewed and decided) first.
                if attempt == RECOVERY_ATTEMPTS - 1:
                    raise
                continue
            report.recovered = sorted(recovered)
            report.lost = recovered
            self.parked = [*self.parked, *report.parked]
            return report
        return report

    def _warn_if_name_is_live(self) -> None:
        """A worker name must be unique among live processes: opening under the name of
        a worker whose lease is current recovers that worker's tasks as a restart would."""
        try:
            lease = self.leases.all().get(self.worker)
        except StoreError:
            return
        if lease is not None and not lease.expired(self._context().now):
            # INFO, not WARNING: a restart after a crash within the lease looks the same.
            log.info(
                "worker %s: a lease under this name is still current (renewed at %s); "
                "if another process runs as %s, its running tasks are recovered now. "
                "Give each live worker its own name.",
                self.worker,
                lease.renewed_at,
                self.worker,
            )

    def _release_lease(self) -> None:
        """Drop the lease at a clean close: this worker holds no task any more."""
        try:
            if self._renewed_at is not None:
                self.leases.release(self.worker)
                self._renewed_at = None
        finally:
            if self._liveness is not None:
                self._liveness.release()


def _recover(
    draft: Draft, ctx: Context, lost: Callable[[str | None], bool]
) -> tuple[list[str], dict[str, str | None]]:
    """Rule 9's recovery (one place: :func:`..tasks.restarts.recover`), reporting
    which tasks it recovered and from which worker."""
    parked = decide.recover(draft, ctx, lost)
    recovered = {e.task_id: e.worker for e in draft.events if isinstance(e, TaskRecovered)}
    return parked, recovered
