"""A unit of work: many commands decided as usual, appended in one transaction.

``with scheduler.batch():`` changes one thing about the commands inside it:
where their events go. Each command still decides (a refused one raises and adds
nothing); a command that returns has its events folded into the batch's own view of
the world at once, so the next command of the batch (and :meth:`task`) sees them. But
nothing reaches the store until the block exits: then every event of the batch is
appended in **one** transaction, in the order the commands decided them, with the
positions and versions the unbatched path would have given them.

A batch belongs to the thread, or asyncio task, that opened it (a
:class:`~contextvars.ContextVar`; what runs in a copy of its context, as
``asyncio.to_thread`` does, joins it too). Its commands decide on a **view**: the
scheduler's world as it stood at the batch's first command (copied then), with the
batch's own decisions on it; other writers' events are not folded into it. Every
other thread's commands go on deciding on the scheduler's world, through the usual
path (group commit), and return once recorded: they neither join the batch nor see
what it decided before it is appended.

A command inside a batch has *returned*, not *recorded*: it is durable only when the
batch exits without error. If the block raises, nothing of the batch is appended.
When the block exits, the batch is appended with the versions it decided and the
guards of what it read; when another writer (another process, or another thread of
this one) appended first to something a decision of the batch wrote or read, the
store refuses the whole append (:class:`~.errors.ConflictError`) and the error is
raised to the batch's owner alone: its commands returned to it already, so they are
never decided again behind its back, and nothing of another writer's is overwritten.
Either way, the invocations whose reservation the batch made are ended, and the
scheduler's world was never touched: it is the store's.

Batches nest in one context (the outermost one appends). Telemetry sees a command's
events when the command returns, as without a batch. :meth:`~.scheduler.Scheduler.history`
reads the store, so it shows a batch's events only after the batch exits.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any
from weakref import WeakSet

from ..errors import ConflictError, RuleViolation, StoreError
from ..history import stream_loader
from ..history.in_place import hold_in_place
from ..tasks.events import TaskEvent
from ..world import World

if TYPE_CHECKING:
    from ..store.store import Store
    from ..tasks.invocation import Invocation

OpenBatches = tuple[tuple[object, "OpenBatch"], ...]
_OPEN: ContextVar[OpenBatches] = ContextVar("tasktrail_open_batches", default=())
"""The batches open in this context, each with its scheduler (few: one a scheduler)."""
UNRECORDED: WeakSet[Invocation] = WeakSet()
"""Invocations whose reservation an open batch made, not appended yet (the batch's to
end if it is not): a group the store refused ends none of them."""


class Batch:
    """Events decided and not appended yet, with their versions and the guards of
    what their decisions read."""

    def __init__(self) -> None:
        self.events: list[TaskEvent] = []
        self.versions: list[int] = []
        self.guards: dict[str, int] = {}
        self.across: set[str] = set()
        """The topics its commands counted in every stream (``Draft.read_across``)."""

    def add(
        self,
        events: list[TaskEvent],
        versions: list[int],
        guards: dict[str, int] | None = None,
        across: set[str] | None = None,
    ) -> None:
        """Queue one command's events (already folded into the world it decided on),
        the versions of the tasks it read (the earliest read of each is the guard) and
        the topics it counted in every stream."""
        self.events.extend(events)
        self.versions.extend(versions)
        if across:
            self.across |= across
        for task_id, version in (guards or {}).items():
            self.guards.setdefault(task_id, version)

    def clear(self) -> None:
        """Forget what was queued (appended, or never to be)."""
        self.events, self.versions, self.guards, self.across = [], [], {}, set()

    def __len__(self) -> int:
        return len(self.events)


class OpenBatch(Batch):
    """A ``with scheduler.batch():`` block's batch, and the world its commands see."""

    def __init__(self) -> None:
        super().__init__()
        self.view: World | None = None
        """The world as the batch's decisions left it (made at its first command)."""
        self.base = 0
        """The scheduler's position :attr:`view` was copied at (or last taken again)."""
        self.position = 0
        """The position the batch's first decision read at: what it counted in every
        stream is guarded from there (``unseen``)."""
        self.reserved: list[Invocation] = []
        """The invocations its reservations made, not recorded until it is appended."""


class BatchCommands:
    """:meth:`batch`, and the world each context decides on, mixed into
    :class:`~.scheduler.Scheduler`."""

    store: Store
    position: int
    events_written: int
    conflicts: int
    _world: World
    _closed: bool
    _lock: Any
    _invocations: dict[str, Invocation]
    _resumed: set[str]

    if TYPE_CHECKING:

        def refresh(self) -> int: ...
        def _fold_new(self, own: Collection[int] = ()) -> int: ...
        def _snapshot_due(self) -> None: ...
        def _follows_on(self, positions: Sequence[int]) -> bool: ...

    @property
    def world(self) -> World:
        """The world this context's commands decide on and read: the scheduler's (the
        store's, as folded), or inside a batch the batch's own view of it."""
        batch = self._batch
        if batch is None:
            return self._world
        view = batch.view
        return view if view is not None else self._view(batch)

    @world.setter
    def world(self, world: World) -> None:
        self._world = world

    @property
    def _batch(self) -> OpenBatch | None:
        """The batch this context opened on this scheduler, if one is open."""
        for owner, batch in _OPEN.get():
            if owner is self:
                return batch
        return None

    def _deciding_on(self) -> tuple[World, OpenBatch | None]:
        """:attr:`world` and :attr:`_batch` at once (one context lookup)."""
        for owner, batch in _OPEN.get():
            if owner is self:
                view = batch.view
                return (view if view is not None else self._view(batch)), batch
        return self._world, None

    @contextmanager
    def batch(self) -> Iterator[Batch]:
        """A unit of work: the commands inside decide as usual; their events are
        appended in one transaction when the block exits (see :mod:`.batch`). It is
        this thread's (or asyncio task's): other threads' commands do not join it."""
        batch = self._batch
        if batch is not None:  # nested: the outermost one appends
            yield batch
            return
        batch = OpenBatch()
        token = _OPEN.set((*_OPEN.get(), (self, batch)))
        try:
            yield batch
        except BaseException:
            _leave(token, batch)
            self._discard(batch)
            raise
        _leave(token, batch)
        self._append_batch(batch)
        with self._lock:
            # A writer that decides in batches only takes its periodic snapshot here
            # (inside a batch none is due): else an open, and replay --until, would
            # fold all it wrote since its last close.
            self._snapshot_due()
            self.store.kept_rows.drop()  # the seal hashed them from memory: not kept on

    def _view(self, batch: OpenBatch) -> World:
        """Copy the scheduler's world for ``batch`` to decide on (its first command)."""
        with self._lock:
            if batch.view is None:
                batch.view = self._copied_world()
                batch.base = batch.position = self.position
            return batch.view

    def _copied_world(self) -> World:
        """The scheduler's world as it stands, apart: a dropped stream read back as of
        its position (the copy's own), never later."""
        view = self._world.copy()
        base = self.position
        view.loader = stream_loader(self.store, lambda: base)
        return view

    def _take_view_again(self, batch: OpenBatch) -> bool:
        """A command of ``batch`` named a task its view does not know: fold what other
        writers appended into the scheduler's world, and take the view again from it
        with the batch's decisions on top. ``False``, changing nothing, when nothing
        new was there or the batch's decisions do not fold onto it (the batch's
        append will be refused then: what they decided on changed)."""
        if self.refresh() == 0:
            return False
        view = self._copied_world()
        try:
            for event in batch.events:
                view.apply(event)
        except Exception:  # an event that cannot follow the newer state
            return False
        batch.view, batch.base = view, self.position
        return True

    def _append_at_close(self) -> None:
        """A close inside a batch's block: the batch is appended (it decided the close's
        stops) and taken off this context; the block's later commands are refused."""
        batch = self._batch
        if batch is not None:
            _OPEN.set(tuple(pair for pair in _OPEN.get() if pair[1] is not batch))
            self._append_batch(batch, closing=True)

    def _append_batch(self, batch: OpenBatch, *, closing: bool = False) -> None:
        """Append ``batch`` in one transaction and fold it into the scheduler's world;
        on any failure nothing of it is appended and the error is raised here."""
        with self._lock:
            if not batch.events:
                UNRECORDED.difference_update(batch.reserved)
                return
            try:
                if self._closed and not closing:
                    # Closed by another thread: its store is closed, its lease given up.
                    raise RuleViolation(2, "the scheduler closed before the batch exited")
                # Its decisions read the world as folded up to batch.position.
                unseen = (batch.position, batch.across) if batch.across else None
                positions = self.store.append(
                    batch.events,
                    batch.versions,
                    guards=batch.guards,
                    unseen=unseen,
                    since=self.position,
                )
            except BaseException as error:
                self._discard(batch)
                if isinstance(error, ConflictError):
                    self.conflicts += 1
                    with suppress(StoreError):  # the next command reads the store again
                        self.refresh()  # deciding again sees the winner's events
                raise
            self.events_written += len(positions)
            UNRECORDED.difference_update(batch.reserved)
            view = batch.view
            if view is not None and self._follows_on(positions) and self.position == batch.base:
                # Nothing came between the view's base and the append: the view is the
                # world the log now folds to.
                view.loader = self._world.loader
                changed = (e.task_id for e in batch.events if type(e).task_stream)
                hold_in_place(self._world, view, changed)
                self.position = positions[-1]
            else:
                # Others' events came first: fold them and the batch's in log order
                # (appended: should the read fail, the next refresh folds them).
                with suppress(StoreError):
                    self._fold_new(positions)
            batch.clear()

    def _discard(self, batch: OpenBatch) -> None:
        """Drop ``batch`` unappended: the invocations its reservations made end (a
        task that was resumed here is still resumed)."""
        with self._lock:
            for invocation in batch.reserved:
                invocation.ended = True
                task_id = invocation.task_id
                if self._invocations.get(task_id) is invocation:
                    del self._invocations[task_id]
                    if invocation.resumed:
                        self._resumed.add(task_id)
            UNRECORDED.difference_update(batch.reserved)
            batch.clear()
            batch.view = None


def _leave(token: Token[OpenBatches], batch: OpenBatch) -> None:
    """Take ``batch`` off the context that opened it."""
    try:
        _OPEN.reset(token)
    except (ValueError, RuntimeError):  # left in another context, or taken off already
        _OPEN.set(tuple(pair for pair in _OPEN.get() if pair[1] is not batch))
