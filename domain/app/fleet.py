"""A fleet member: the worker's name, its lease, and recovery scoped to lost workers.

Several schedulers may share one store (SPEC section 8). Each is a *worker* with
a name; a reservation records the worker on the task (``TaskState.worker``). A
worker holds a lease in the store's lease table (:mod:`..store.leases`) and
renews it on every command cycle (at most every quarter lease, so that renewals
cost no more than a write every few seconds) and on :meth:`FleetCommands.heartbeat`.

Rule 9 for a fleet: opening recovers the running tasks of this worker's own name
(a restart of the same worker) and of workers whose lease expired; a heartbeat
recovers those of expired workers. A task a live worker holds is never touched.
Two workers recovering at once recover each task once: both decide on the
store's current state, and the loser of the append race decides again.
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

from ..errors import ConflictError, InvalidArgument, StoreError
from ..store.leases import Leases
from ..tasks import decide
from ..tasks.context import Context
from ..tasks.events import TaskRecovered
from ..turns.runtime import Runtime
from ..world import Draft

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


class FleetCommands:
    """The fleet side of the :class:`~.scheduler.Scheduler` (a mixin)."""

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

    _leases: Leases | None = None
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
            self._renew_lease(force=True)
            self._beat_at = self._renewed_at
            return self._recover_lost(at_open=False)

    def serve(self, *, runtime: Runtime | None = None, poll_ms: float = 100.0) -> None:
        """Run this scheduler as a fleet worker until SIGTERM or SIGINT, then close it:
        a :class:`~.worker.Worker` with signal handlers (call from the main thread).
        For host callbacks or a stop from another thread, make a ``Worker`` yourself."""
        from .worker import Worker  # the loop drives the scheduler: imported when served

        worker = Worker(self, runtime=runtime, poll_ms=poll_ms)  # type: ignore[arg-type]
        worker.install_signal_handlers()
        worker.run()

    def live_workers(self) -> frozenset[str]:
        """The workers whose lease is current now (this one's too, once renewed), read
        from the lease table as it stands. A store whose lease table cannot be read
        raises :class:`StoreError`: no worker is taken for lost on a failed read."""
        return frozenset(self.leases.alive(self._reading()))

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
        now = self._reading()  # the clock's own reading (leases compare readings), checked
        renewed = self._renewed_at
        if not force and renewed is not None and now - renewed < self.lease_ms / 4:
            return
        try:
            self.leases.renew(self.worker, now, self.lease_ms)
        except StoreError:
            if not self._lease_optional:
                raise
            return  # a store opened read-only: its commands are refused on their own
        self._renewed_at = now

    def _lost(self, *, at_open: bool) -> Callable[[str | None], bool]:
        """Which workers' running tasks are recovered now."""
        now = self._reading()
        try:
            alive = self.leases.alive(now)
        except StoreError:
            alive = set()  # a read-only store: no lease can be read, as before fleets
        self.peers = frozenset(alive - {self.worker})

        def lost(worker: str | None) -> bool:
            if worker == self.worker:
                return at_open  # reopened under its own name: its old process is gone
            return worker is None or worker not in alive

        return lost

    def _recover_lost(self, *, at_open: bool) -> HeartbeatReport:
        report = HeartbeatReport()
        for attempt in range(RECOVERY_ATTEMPTS):
            self.refresh()
            lost = self._lost(at_open=at_open)
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
        if self._renewed_at is not None:
            self.leases.release(self.worker)
            self._renewed_at = None


def _recover(
    draft: Draft, ctx: Context, lost: Callable[[str | None], bool]
) -> tuple[list[str], dict[str, str | None]]:
    """Rule 9's recovery (one place: :func:`..tasks.restarts.recover`), reporting
    which tasks it recovered and from which worker."""
    parked = decide.recover(draft, ctx, lost)
    recovered = {e.task_id: e.worker for e in draft.events if isinstance(e, TaskRecovered)}
    return parked, recovered
