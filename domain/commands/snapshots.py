"""Snapshots of a scheduler's world: taken every so many events and at close,
read at open (:mod:`..history`). A mixin of the :class:`~.scheduler.Scheduler`."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument, StoreError
from ..history import DEFAULT_EVERY, restore, stream_loader, take_snapshot
from ..history.in_place import hold_in_place
from ..store.store import Store
from ..world import World

log = logging.getLogger("tasktrail.snapshots")


class SnapshotCommands:
    """Taking and reading snapshots (a mixin of the scheduler)."""

    if TYPE_CHECKING:
        store: Store
        world: World
        _world: World
        position: int
        closing: bool
        snapshot_every: int | None
        snapshot_at: int
        snapshot_problems: list[str]
        _batch: Any
        _lock: threading.RLock

        def refresh(self) -> int: ...
        def check_log(self) -> int: ...
        def _watch_log(self) -> None: ...

    def snapshot(self) -> int:
        """Save the world as of the store's head as a snapshot now; returns its position."""
        with self._lock:
            if self._batch is not None:
                raise InvalidArgument(
                    "a snapshot cannot be taken inside a batch: its events are not stored yet"
                )
            self.refresh()
            self.check_log()  # never a snapshot of one log into another
            take_snapshot(
                self.store, self.world, self.position, self.snapshot_every or DEFAULT_EVERY
            )
            self.snapshot_at = self.position
            return self.position

    def _restore(self, in_place: bool = False) -> None:
        """Hold the store's world: its latest good snapshot and the events after it
        (``in_place``: into the world object held now, that others may hold too)."""
        restored = restore(self.store)
        if in_place:
            hold_in_place(self._world, restored.world)
        else:
            self._world = restored.world
        self._world.loader = stream_loader(self.store, lambda: self.position)
        self.position = restored.position
        self.snapshot_at = restored.snapshot or 0
        self.snapshot_problems = restored.problems
        self._watch_log()  # which log it holds: a schema dropped under it is seen
        if restored.folded == 0 and self.position:
            # The store's latest time (stamps never run backwards) is its last event's:
            # read it, as folding the tail would have.
            for _ in self.store.read(after=self.position - 1):
                pass

    def _snapshot_due(self) -> None:
        every = self.snapshot_every
        if every is not None and self.position - self.snapshot_at >= every and not self.closing:
            self._snapshot_quietly()

    def _snapshot_quietly(self) -> None:
        """Take a snapshot; one that fails is logged, never fails the command (it is
        derived data: the next open folds a little more)."""
        try:
            self.snapshot()
        except StoreError as error:
            log.warning("%s: no snapshot taken: %s", self.store.location, error)
            self.snapshot_at = self.position  # not again on every command
        except Exception:  # a bug in the snapshot's making must not fail a command
            log.exception("%s: no snapshot taken", self.store.location)
            self.snapshot_at = self.position
