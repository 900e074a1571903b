"""What a :class:`~.worker.Worker` tells its host: each callback called safely, and the
reports of a tick (a changed wake, blocked and unblocked tasks, parkings, failed
migrations), as the seed schedulers tell their listeners. A mixin of the Worker."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..tasks.definitions import blocked_reason
from ..tasks.restart_limit import restart_limit_of
from .changes import Changes

if TYPE_CHECKING:
    from .scheduler import Scheduler

log = logging.getLogger("tasktrail.worker")

WakeCallback = Callable[[dict[str, Any]], None]
TaskCallback = Callable[[str, str], None]


class WorkerReports:
    """The Worker's host callbacks (a mixin: the Worker sets the attributes)."""

    if TYPE_CHECKING:
        scheduler: Scheduler
        on_wake: WakeCallback | None
        on_parked: TaskCallback | None
        on_blocked: TaskCallback | None
        on_unblocked: TaskCallback | None
        on_migration_failed: TaskCallback | None
        _last_wake: dict[str, Any] | None
        _blocked: dict[str, str]
        _blocked_changes: Changes
        _blocked_basis: tuple[Any, ...]
        _parked_reported: int
        _reported_migrations: dict[str, Any]

    def _call(self, callback: Callable[..., None] | None, *args: Any) -> bool:
        """Call a host callback; whether it returned (a missing one counts as returned)."""
        if callback is None:
            return True
        try:
            callback(*args)
        except Exception:  # a host's callback must not stop the worker
            log.exception("host callback %r failed", callback)
            return False
        return True

    def _report_wake(self) -> None:
        if self.on_wake is None:
            return  # nobody to tell: no read of the log, no look at every live task
        wake = self.scheduler.wake()
        # Only a delivered wake counts (pi-durable): one the callback raised on is
        # offered again at the next tick, changed or not.
        if wake != self._last_wake and self._call(self.on_wake, dict(wake)):
            self._last_wake = wake

    def _report_blocked(self) -> None:
        """Report each live task whose blocked reason (rule 13) changed to a new one,
        and each reported task that is blocked no more (pi-durable tells its blocked
        listeners of an unblocking change, such as a registry change, as of a block).

        Only the tasks that changed since the last tick are asked again (a reason is a
        function of the task's state, its kind's definition, the restart limit and the
        failed migrations): all of them when one of the last three changed, or the
        scheduler holds another world."""
        s = self.scheduler
        failed = s.failed_migrations
        now: dict[str, str | None] = {}
        with s._lock:  # the heartbeat thread may fold events meanwhile
            world, registry = s.world, s.registry
            limit = restart_limit_of(world)  # the limit the world folded records
            basis = (limit, failed, *registry)
            changed = self._blocked_changes.since(world)
            kept = self._blocked_basis
            if (
                changed is None
                or len(kept) != len(basis)
                or kept[:2] != basis[:2]
                or any(a is not b for a, b in zip(kept[2:], basis[2:], strict=True))
            ):
                changed = set(world.live) | set(self._blocked)
            self._blocked_basis = basis
            for task_id in changed:
                task = world.tasks.get(task_id)
                if task is None or task.status == "terminal":
                    now[task_id] = None
                else:
                    now[task_id] = blocked_reason(task, registry, limit, failed)
        blocked = self._blocked
        for task_id, why in now.items():
            if why is not None and blocked.get(task_id) != why:
                blocked[task_id] = why
                log.info("blocked %s: %s", task_id, why)
                self._call(self.on_blocked, task_id, why)
        for task_id, why in now.items():
            if why is None and task_id in blocked:
                was = blocked.pop(task_id)
                log.info("unblocked %s (was %s)", task_id, was)
                self._call(self.on_unblocked, task_id, was)

    def _report_parked(self) -> None:
        s = self.scheduler
        parked = s.parked
        for task_id in parked[self._parked_reported :]:
            log.info("parked %s at the restart limit", task_id)
            self._call(self.on_parked, task_id, "restart_limit")
        self._parked_reported = len(parked)
        for task_id in s.failed_migrations:
            # Reported once per definition: a newer one that fails too is news.
            definition = s._failed_migrations.get(task_id)
            if self._reported_migrations.get(task_id) is not definition:
                self._reported_migrations[task_id] = definition
                log.info("migration failed for %s", task_id)
                self._call(self.on_migration_failed, task_id, "migration_failed")
        with s._lock:  # the heartbeat thread may fold events meanwhile
            # A task that ended is not reported again: forgotten, it cannot grow the map.
            ended = [t for t in self._reported_migrations if t not in s.world.live]
        for task_id in ended:
            del self._reported_migrations[task_id]
