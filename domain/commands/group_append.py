"""A group commit's one append, and the undo of a group the store refused.

The leader of a group (:mod:`.group_commit`) decides each queued decision on the
scheduler's world itself, folding each one's events in at once, and appends them all
in one transaction. When the store refuses that append, nothing of the group was
written: the world is put back to the store's state from the state of each task
before the group first wrote it (no read), or, for a group with events of other
streams, folded again from the store.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..tasks.live_index import LIVE_ORDER, TASK_SEQ
from ..tasks.state import TaskState
from ..world import INDEXERS, RESTORABLE, World
from .batch import UNRECORDED, Batch

if TYPE_CHECKING:
    from ..store.store import Store
    from ..tasks.invocation import Invocation


class Group(Batch):
    """The decisions one leader took together, and what puts the world back."""

    def __init__(self, invocations: set[str], seq: int) -> None:
        super().__init__()
        self.invocations = invocations
        """The tasks with a live invocation here when the group began."""
        self.seq = seq
        """The live tasks' submission count when the group began (see :meth:`_undo`)."""
        self.order: dict[str, int] = {}
        """The submission number of each live task the group wrote, before it did."""
        self.before: dict[str, TaskState | None] = {}
        """Each task's state before the group first wrote it (telemetry sees the events
        once appended; a refused group is put back from them)."""
        self.streams_before: dict[str, tuple[Any, int]] = {}
        """Each other stream's state and version before the group first wrote it."""

    def keep_stream(self, world: World, stream_id: str) -> None:
        """Note a non-task stream's state before the group's first event of it."""
        if stream_id not in self.streams_before:
            kept = (world.streams.get(stream_id), world.stream_versions.get(stream_id, 0))
            self.streams_before[stream_id] = kept


class GroupAppend:
    """:meth:`_flush_group` and the undo, mixed into :class:`~.scheduler.Scheduler`."""

    store: Store
    position: int
    events_written: int
    _world: World
    _invocations: dict[str, Invocation]
    _group: Group | None = None
    """The group its leader is deciding (under the scheduler's lock)."""

    if TYPE_CHECKING:

        def refresh(self) -> int: ...
        def _fold_new(self, own: Collection[int] = ()) -> int: ...
        def _is_running(self, task_id: str) -> bool: ...
        def _restore(self, in_place: bool = False) -> None: ...

    def _flush_group(self) -> None:
        """Append the open group's events in one transaction (a no-op without one)."""
        group, self._group = self._group, None
        if group is None or not group.events:
            return
        # The group's decisions were taken on the world as folded up to self.position.
        unseen = (self.position, group.across) if group.across else None
        positions: list[int] | None = None
        try:
            positions = self.store.append(
                group.events,
                group.versions,
                guards=group.guards,
                unseen=unseen,
                since=self.position,
            )
            self.events_written += len(positions)
            # Contiguous positions right after ours mean no other writer came between.
            if positions[0] == self.position + 1 and positions[-1] == self.position + len(
                positions
            ):
                self.position = positions[-1]
            else:
                self._fold_in_log_order(group, positions)
        except BaseException:
            if positions is None:
                self._reload(group)
            raise
        finally:
            group.clear()

    def _fold_in_log_order(self, group: Group, positions: list[int]) -> None:
        """Others' events landed before the group's: the world must hold the log's order
        (a snapshot of it must equal the fold), so the group's events are taken out and
        folded again after theirs, from the store. Appended already: a read that fails
        leaves them for the next refresh (or, where it failed first, out of order)."""
        try:
            if not self._undo(group):
                self._restore(in_place=True)
            self._fold_new(positions)
        except StoreError:
            pass

    def _reload(self, group: Group) -> None:
        """Fold the world again from the store: a group that was not appended left
        events in it that the store does not hold. Invocations the group's reservations
        made here end (an invocation it ended stays ended); an open batch's, which the
        store does not hold yet either, are that batch's to end."""
        if not self._undo(group):
            self._restore(in_place=True)  # whoever holds the world sees the store's
        self.refresh()
        for task_id, invocation in list(self._invocations.items()):
            if invocation in UNRECORDED:
                continue
            if task_id not in group.invocations or not self._is_running(task_id):
                self._invocations.pop(task_id).ended = True

    def _undo(self, group: Group) -> bool:
        """Put each task the group wrote back to its state before the group (the
        refresh after folds in what came later). Returns ``False``, changing nothing,
        when that cannot be done task by task: the group holds events of other
        streams, or an index of task streams is not restorable."""
        events = group.events
        # Of other streams, only those whose state is all a fold keeps of them (no index
        # follows them: ``undoable``, the flow keys' streams) are put back in place.
        if not all(type(e).task_stream or getattr(e, "undoable", False) for e in events):
            return False
        if not all(indexer in RESTORABLE for indexer in INDEXERS):
            return False
        world = self._world
        last = {event.task_id: event for event in events if type(event).task_stream}
        for task_id, event in last.items():
            world.restore_task(task_id, group.before[task_id], event)
        for stream_id, (state, version) in group.streams_before.items():
            if state is None:
                world.streams.pop(stream_id, None)
                world.stream_versions.pop(stream_id, None)
            else:
                world.streams[stream_id], world.stream_versions[stream_id] = state, version
        world.folded -= len(events)  # folded into the world, never into the store
        # A task the group ended is live again under its own submission number, and
        # the numbers the group gave out are given again: as a fold of the store has them.
        indexes = world.indexes
        order = indexes.get(LIVE_ORDER, {})
        for task_id, number in group.order.items():
            if task_id in order:
                order[task_id] = number
        indexes[TASK_SEQ] = group.seq  # a group folds nothing else before its undo
        return True
