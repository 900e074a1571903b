"""A unit of work: many commands decided as usual, appended in one transaction.

``with scheduler.batch():`` changes one thing about the commands inside it:
where their events go. Each command still decides on the scheduler's world,
which already holds the events of the batch's earlier commands; a refused
command still raises and adds nothing; a command that returns has its events
folded into the world at once, so the next command (and :meth:`task`) sees
them. But nothing reaches the store until the block exits: then every event
of the batch is appended in **one** transaction (group commit), in the order
the commands decided them, with the positions and versions the unbatched path
would have given them.

A command inside a batch has *returned*, not *recorded*: it is durable only
when the batch exits without error. If the block raises, or the store refuses
the append (another writer took one of the versions first:
:class:`~.errors.ConflictError`; or :class:`~.errors.StoreError`), nothing of
the batch is appended, the world is put back to what the store holds (the
truth): a batch of task events only has each task it wrote folded again from
that task's stream (one indexed read a task); a batch with events of other
streams (runs, wakeups, ...) has the world folded again from the whole store.
Then the error propagates. Invocations whose reservation the batch made are ended.

Every command of the scheduler between enter and exit joins the batch,
whichever thread issues it; batches nest (the outermost one appends).
Telemetry sees a command's events when the command returns, as without a
batch. :meth:`~.scheduler.Scheduler.history` reads the store, so it shows a
batch's events only after the batch exits.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..history import stream_loader
from ..tasks.events import TaskEvent
from ..tasks.live_index import LIVE_ORDER, TASK_SEQ
from ..tasks.state import TaskState
from ..world import INDEXERS, RESTORABLE, World

if TYPE_CHECKING:
    from ..store.store import Store
    from ..tasks.invocation import Invocation


class Batch:
    """The events a batch has decided so far, and their versions."""

    def __init__(self, invocations: set[str], order: dict[str, int], seq: int) -> None:
        self.order = dict(order)
        self.seq = seq
        """The live tasks' submission numbers when the batch began (see :meth:`_undo`)."""
        self.events: list[TaskEvent] = []
        self.versions: list[int] = []
        self.guards: dict[str, int] = {}
        self.across: set[str] = set()
        """The topics its commands counted in every stream (``Draft.read_across``)."""
        self.depth = 0
        self.invocations = invocations
        """The tasks with a live invocation here when the batch began."""
        self.before: dict[str, TaskState | None] | None = None
        """A group commit's (:mod:`.group_commit`): each task's state before the group
        first wrote it (telemetry sees the events once appended; a refused group is put
        back from them). A group's :attr:`order` holds just the tasks it wrote."""

    def add(
        self,
        events: list[TaskEvent],
        versions: list[int],
        guards: dict[str, int] | None = None,
        across: set[str] | None = None,
    ) -> None:
        """Queue one command's events (already folded into the world), the versions
        of the tasks it read (the earliest read of each is the guard) and the topics
        it counted in every stream."""
        self.events.extend(events)
        self.versions.extend(versions)
        if across:
            self.across |= across
        for task_id, version in (guards or {}).items():
            self.guards.setdefault(task_id, version)

    def __len__(self) -> int:
        return len(self.events)


class BatchCommands:
    """:meth:`batch`, mixed into :class:`~.scheduler.Scheduler`."""

    store: Store
    world: World
    position: int
    events_written: int
    _lock: Any
    _invocations: dict[str, Invocation]
    _batch: Batch | None = None

    if TYPE_CHECKING:

        def refresh(self) -> int: ...
        def _fold_new(self, own: Collection[int] = ()) -> int: ...

        def _is_running(self, task_id: str) -> bool: ...
        def _restore(self, in_place: bool = False) -> None: ...
        def _snapshot_due(self) -> None: ...

    @contextmanager
    def batch(self) -> Iterator[Batch]:
        """A unit of work: the commands inside decide as usual; their events are
        appended in one transaction when the block exits (see :mod:`.batch`)."""
        with self._lock:
            batch = self._batch
            if batch is None:
                indexes = self.world.indexes
                batch = self._batch = Batch(
                    set(self._invocations),
                    indexes.get(LIVE_ORDER, {}),
                    indexes.get(TASK_SEQ, 0),
                )
            batch.depth += 1
        try:
            yield batch
        except BaseException:
            with self._lock:
                batch.depth -= 1
                if batch.depth == 0:
                    self._batch = None
                    if batch.events:
                        self._reload(batch)
            raise
        with self._lock:
            batch.depth -= 1
            if batch.depth == 0:
                self._flush_batch()
                # A writer that decides in batches only takes its periodic snapshot here
                # (inside a batch none is due): else an open, and replay --until, would
                # fold all it wrote since its last close.
                self._snapshot_due()

    def _flush_batch(self) -> None:
        """Append the open batch's events in one transaction (a no-op without a batch)."""
        with self._lock:
            batch, self._batch = self._batch, None
            if batch is None or not batch.events:
                return
            # A batch's commands decided on the world as folded up to self.position.
            unseen = (self.position, batch.across) if batch.across else None
            positions: list[int] | None = None
            try:
                positions = self.store.append(
                    batch.events,
                    batch.versions,
                    guards=batch.guards,
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
                    self._fold_in_log_order(batch, positions)
            except BaseException:
                if positions is None:
                    self._reload(batch)
                raise
            finally:
                batch.events, batch.versions, batch.guards = [], [], {}
                batch.across = set()

    def _fold_in_log_order(self, batch: Batch, positions: list[int]) -> None:
        """Others' events landed before the batch's: the world must hold the log's order
        (a snapshot of it must equal the fold), so the batch's events are taken out and
        folded again after theirs, from the store. Appended already: a read that fails
        leaves them for the next refresh (or, where it failed first, out of order)."""
        try:
            if not self._undo(batch):
                self._restore(in_place=True)
            self._fold_new(positions)
        except StoreError:
            pass

    def _reload(self, batch: Batch) -> None:
        """Fold the world again from the store: a batch that was not appended left
        events in it that the store does not hold. Invocations the batch's reservations
        made here end (an invocation it ended stays ended)."""
        if not self._undo(batch):
            self._restore(in_place=True)  # whoever holds the world sees the store's
        self.refresh()
        for task_id in list(self._invocations):
            if task_id not in batch.invocations or not self._is_running(task_id):
                self._invocations.pop(task_id).ended = True

    def _undo(self, batch: Batch) -> bool:
        """Put each task ``events`` wrote back to its stored state at :attr:`position`
        (the refresh after folds in what came later). Returns ``False``, changing
        nothing, when that cannot be done task by task: ``events`` hold events of
        other streams, or an index of task streams is not restorable."""
        events = batch.events
        if not all(type(event).task_stream for event in events):
            return False
        if not all(indexer in RESTORABLE for indexer in INDEXERS):
            return False
        last = {event.task_id: event for event in events}
        stored: dict[str, TaskState | None] = {}
        if batch.before is not None:
            # A group commit kept each task's state before it first wrote it, which is
            # the task as stored at this scheduler's position: no read of the store.
            stored = {task_id: batch.before[task_id] for task_id in last}
        else:
            # Each task as stored, as of this scheduler's position: the world's loader.
            loader = stream_loader(self.store, lambda: self.position)
            for task_id in last:
                loaded = loader(task_id, True, None)
                stored[task_id] = loaded[0] if loaded is not None else None
        for task_id, state in stored.items():
            self.world.restore_task(task_id, state, last[task_id])
        self.world.folded -= len(events)  # folded into the world, never into the store
        # A task the batch ended is live again under its own submission number, and
        # the numbers the batch gave out are given again: as a fold of the store has them.
        indexes = self.world.indexes
        order = indexes.get(LIVE_ORDER, {})
        for task_id, number in batch.order.items():
            if task_id in order:
                order[task_id] = number
        if batch.before is not None:
            indexes[TASK_SEQ] = batch.seq  # a group folds nothing else before its undo
        else:
            others = [n for t, n in order.items() if t not in last]
            indexes[TASK_SEQ] = max([batch.seq, *others])
        return True
