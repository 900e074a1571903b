"""A scheduler whose log is no longer its store's stops, and writes nothing there.

A PostgreSQL schema dropped under a running scheduler takes its log with it; the next
open of the URL makes a new, empty store in its place. The scheduler must not go on
deciding on the old log's state, nor write any of it (a decision, the close's
``TaskStopped``, a snapshot) into the new store: that store's ``verify`` would fail and
its own tasks would never run here. So it looks (:mod:`..store.log_identity`): a
running :class:`~.worker.Worker` at each idle poll and twice a second besides, every
scheduler before a snapshot and at its close. Once the log is found gone or replaced,
:attr:`LogGuard.log_problem` says so, the worker stops with it, and the close writes
nothing (docs/reliability.md).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from ..errors import LogReplaced, StoreError
from ..store.log_identity import look, replaced
from ..telemetry import live as telemetry

if TYPE_CHECKING:
    from ..store.liveness import Liveness
    from ..store.store import Store
    from ..tasks.invocation import Invocation
    from ..world import World

log = logging.getLogger("tasktrail.worker")


class LogGuard:
    """Looking whether the store still holds the log this scheduler folded (a mixin)."""

    if TYPE_CHECKING:
        store: Store
        world: World
        _resumed: set[str]
        worker: str
        position: int
        closing: bool
        _closed: bool
        _invocations: dict[str, Invocation]
        _liveness: Liveness | None
        _lock: threading.RLock

    _log_table: int | None = None
    log_problem: str | None = None
    """Why the log this scheduler folded is no longer its store's (``None``: it is)."""

    def _watch_log(self) -> None:
        """Note which table holds the log (at open, once it is folded)."""
        try:
            self._log_table = look(self.store)[1]
        except StoreError:
            self._log_table = None  # not known: the position alone tells

    def check_log(self) -> int:
        """The store's head, once it is known to hold the log this scheduler folded;
        else :class:`LogReplaced` (and :attr:`log_problem` says why from then on)."""
        if self.log_problem is not None:
            raise LogReplaced(self.log_problem)
        folded = self.position  # before the look: appends meanwhile only move it on
        try:
            head, table = look(self.store)
            replaced(self.store, folded, self._log_table, head, table)
        except LogReplaced as error:
            self.log_problem = str(error)
            log.error("worker %s stops: %s", self.worker, error)
            raise
        return head

    def _closed_writing_nothing(self) -> bool:
        """At a close: when the log is gone or was replaced, close without a decision,
        a snapshot or a lease row (none of it belongs in the store there now) and say
        so; else nothing (the close goes on, also when the store is away a while)."""
        if self.store.read_only:
            return False
        try:
            self.check_log()
        except LogReplaced:
            pass
        except StoreError:
            return False
        else:
            return False
        with self._lock:
            for invocation in self._invocations.values():
                invocation.ended = True
            self._invocations.clear()
            self.closing = True
            self._closed = True
        telemetry.closed(self)
        try:
            if self._liveness is not None:
                self._liveness.release()
        finally:
            self.store.close()
        return True
