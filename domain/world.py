"""The set of tasks a scheduler decides over, and a draft of one decision.

:class:`World` holds every task's state with the indexes the rules need (live children
by owner, waiters by awaited task, sleeping tasks). It changes only through
:meth:`World.apply`, which uses :func:`~.evolve.evolve`.

:class:`Draft` is one decision in progress: it reads through to a world and applies the
events the decision emits to an overlay, so a rule that depends on an earlier event of
the same decision (a cascade after a mark, an owner released after its last task ended)
sees it. A refused decision drops its draft; the world is untouched.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from .errors import CorruptEvent
from .hooks import COMPACTORS as COMPACTORS
from .hooks import INDEXERS as INDEXERS
from .hooks import RESTORABLE as RESTORABLE
from .hooks import RETIRERS as RETIRERS
from .hooks import STREAM_INDEXERS as STREAM_INDEXERS
from .hooks import Compactor as Compactor
from .hooks import Indexer as Indexer
from .hooks import Loader as Loader
from .hooks import Retirer as Retirer
from .hooks import register_compactor as register_compactor
from .hooks import register_indexer as register_indexer
from .hooks import register_retirer as register_retirer
from .tasks.events import TaskEvent, TaskSubmitted
from .tasks.evolve import evolve, evolve_stream
from .tasks.state import TaskState
from .world_fold import apply_event, count, index_task


class World:
    """The tasks of one store, folded from its events, with the indexes rules read.

    A full fold holds every task. A scheduler's world holds the live work: after
    :meth:`compact`, an ended task or a finished stream that nothing live refers to
    is dropped from memory, and :meth:`get` / :meth:`stream` read it back from the
    store through :attr:`loader` (one indexed read) when a rule asks for it.
    """

    def __init__(self) -> None:
        self.tasks: dict[str, TaskState] = {}
        self.live_children: dict[str, set[str]] = {}
        self.waiters: dict[str, set[str]] = {}
        self.sleeping: set[str] = set()
        self.live: set[str] = set()
        self.streams: dict[str, Any] = {}
        """States of streams other than tasks' own (dispatch runs, say), by stream id."""
        self.stream_versions: dict[str, int] = {}
        self.indexes: dict[str, Any] = {}
        """Indexes registered with :func:`register_indexer`, by the name each chose."""
        self.watchers: list[set[str]] = []  # readers' sets of changed tasks (.app.changes)
        self.folded = 0
        """How many events this world folded (a snapshot's included)."""
        self.counts: dict[str, int] = {}
        """How many tasks are in each status (every task, dropped ones included)."""
        self.loader: Loader | None = None
        """Reads a dropped stream back from the store (``None``: a full fold, nothing dropped)."""
        self.absent: set[str] = set()
        """Non-task streams the loader found empty (not read again until one is created)."""
        self.unknown: set[str] = set()
        """Task ids the loader found in no store (a new id: one read, not one per look)."""
        self.whole = False
        """Whether it holds every stream of the log up to its position (folded from
        position 0, never compacted): then the loader is never asked, since what it
        could read back this world holds (a store's new ids cost no read)."""

    def get(self, task_id: str) -> TaskState | None:
        """The task's current state, or ``None`` for an id no event created (that this
        world has folded): a dropped, ended task is read back from the store."""
        state = self.tasks.get(task_id)
        if state is not None or self.loader is None or self.whole or task_id in self.unknown:
            return state
        loaded = self.loader(task_id, True, None)
        if loaded is None:
            # Only an append creates it, and every append is folded into this world
            # (ours, or another writer's at refresh) before this set is asked again.
            self.unknown.add(task_id)
        # Only an ended task is ever dropped: a live one the store holds and this
        # world does not is newer than the world (refresh folds it in, indexed).
        if loaded is None or loaded[0].status != "terminal":
            return None
        task: TaskState = loaded[0]
        self.tasks[task_id] = task
        return task

    def stream(self, stream_id: str) -> Any:
        """A non-task stream's state (``None`` if it has no events): a dropped,
        finished stream is read back from the store."""
        state = self.streams.get(stream_id)
        if (
            state is not None
            or self.loader is None
            or self.whole
            or stream_id in self.stream_versions
            or stream_id in self.absent
        ):
            return state
        loaded = self.loader(stream_id, False, None)
        if loaded is None:
            self.absent.add(stream_id)
            return None
        self.streams[stream_id], self.stream_versions[stream_id] = loaded
        return loaded[0]

    def copy(self, *, to_compact: bool = False) -> World:
        """A copy to change apart from this world (the states are immutable and shared;
        the indexes are copied whole). It reads nothing back: no loader.
        ``to_compact``: a copy only :meth:`compact` will change, whose indexes are
        copied one level deep (compactors replace what they trim, never edit it)."""
        other = World()
        other.tasks = dict(self.tasks)
        other.live_children = {k: set(v) for k, v in self.live_children.items()}
        other.waiters = {k: set(v) for k, v in self.waiters.items()}
        other.sleeping, other.live = set(self.sleeping), set(self.live)
        other.streams, other.stream_versions = dict(self.streams), dict(self.stream_versions)
        copier = copy.copy if to_compact else _index_copy
        other.indexes = {k: copier(v) for k, v in self.indexes.items()}
        other.counts, other.folded, other.whole = dict(self.counts), self.folded, self.whole
        return other

    def retired(self, stream_id: str, state: Any) -> bool:
        """Whether a non-task stream is finished with: nothing live needs it in memory."""
        for retirer in RETIRERS:
            verdict = retirer(self, stream_id, state)
            if verdict is not None:
                return verdict
        return False

    def compact(self) -> None:
        """Drop what ended work left: every terminal task that no live task owns,
        awaits or is owned by, and every retired stream; each compactor trims its
        index. Deterministic: a full fold compacted equals a scheduler's world
        compacted at the same position."""
        self.whole = False  # what it drops, the loader reads back
        keep = set(self.waiters) | set(self.live_children)
        for task_id in self.live:
            owner = self.tasks[task_id].owner_id
            if owner is not None:
                keep.add(owner)
        self.tasks = {
            task_id: task
            for task_id, task in self.tasks.items()
            if task.status != "terminal" or task_id in keep
        }
        for task_id in keep:
            if task_id not in self.tasks:
                self.get(task_id)  # dropped before something live referred to it again
        for stream_id, state in list(self.streams.items()):
            if state is None or self.retired(stream_id, state):
                del self.streams[stream_id]
                del self.stream_versions[stream_id]
        self.absent.clear()
        self.unknown.clear()
        for compactor in COMPACTORS:
            compactor(self)

    def version_of(self, stream_id: str, task_stream: bool = True) -> int:
        """How many events the stream holds: the version its next event follows."""
        if task_stream:
            task = self.get(stream_id)
            return task.events if task is not None else 0
        if stream_id not in self.stream_versions:
            self.stream(stream_id)  # a dropped stream goes on from its stored version
        return self.stream_versions.get(stream_id, 0)

    def held_version(self, stream_id: str, task_stream: bool = True) -> int:
        """:meth:`version_of` of what is in memory (0 for a dropped or unknown stream)."""
        if task_stream:
            task = self.tasks.get(stream_id)
            return task.events if task is not None else 0
        return self.stream_versions.get(stream_id, 0)

    def apply(self, event: TaskEvent, folded: Any = None) -> Any:
        """Fold one event in and keep the indexes current; returns the stream's new state.

        ``folded``: the stream's state after ``event`` when the caller has folded it
        already from this world's state (a decision's :class:`Draft` has), so that
        ``evolve`` does not run twice.
        """
        cls = type(event)
        if cls.task_stream:
            return apply_event(
                self, event, cls, event.task_id, self.tasks.get(event.task_id), folded
            )
        stream_id = event.stream_id()
        return apply_event(self, event, cls, stream_id, self.streams.get(stream_id), folded)

    def apply_stored(self, position: int, event: TaskEvent, version: int) -> tuple[Any, Any]:
        """Fold one event read from a store, checking it is the next of its stream.

        Returns the stream's state before and after it. An event that skips a
        version, or that cannot follow its stream's state (one after a
        terminal event, say), raises :class:`~.errors.CorruptEvent` at
        ``position`` and leaves the world as it was.
        """
        cls = type(event)
        task_stream: bool = cls.task_stream
        if task_stream:
            stream_id = event.task_id  # a task's stream is named by its id
            before = self.tasks.get(stream_id)
            have = before.events if before is not None else 0
        else:
            stream_id = event.stream_id()
            before = self.streams.get(stream_id)
            have = self.stream_versions.get(stream_id, 0)
        if have == 0 and version > 1:
            have = self.version_of(stream_id, task_stream)  # dropped: read back first
            before = self.tasks.get(stream_id) if task_stream else self.streams.get(stream_id)
        if version != have + 1:
            raise CorruptEvent(
                position, f"stream {stream_id} jumps from version {have} to {version}"
            )
        try:
            after = apply_event(self, event, cls, stream_id, before, None)
        except ValueError as error:
            raise CorruptEvent(position, str(error)) from None
        return before, after

    def restore_task(self, task_id: str, state: TaskState | None, event: TaskEvent) -> None:
        """Put a task back to ``state`` (``None``: no event created it), indexes too,
        as when a batch the store refused is undone; ``event`` is the last one of the
        task folded in. Every indexer of task streams must be :data:`RESTORABLE`."""
        previous = self.tasks.get(task_id)
        if previous is not None:
            # Out of every index, as if it had ended; then in again as ``state``.
            index_task(self, previous, replace(previous, status="terminal"))
            count(self, "terminal", -1)  # it did not end: only its count moved
        if state is None:
            self.tasks.pop(task_id, None)
        else:
            self.tasks[task_id] = state
            index_task(self, None, state)
        for indexer in INDEXERS:
            indexer(self, event, previous, state)


_ATOMS = frozenset({str, int, float, bool, type(None)})


def _index_copy(index: Any) -> Any:
    """A copy of one index to change apart: a flat set or dict of plain values (most
    of a world's, of every live task) copied one level, in a fraction of what a deep
    copy costs a batch's view; anything else deep."""
    kind = type(index)
    if kind in _ATOMS:
        return index
    if kind is set and _ATOMS.issuperset(map(type, index)):
        return set(index)
    plain = kind is dict and _ATOMS.issuperset(map(type, index.values()))
    if plain and _ATOMS.issuperset(map(type, index)):
        return dict(index)
    return copy.deepcopy(index)


class Draft:
    """One decision over a world: reads through, applies its own events to an overlay."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.changed: dict[str, TaskState] = {}
        self.changed_streams: dict[str, Any] = {}
        self.new_children: dict[str, list[str]] = {}
        self.events: list[TaskEvent] = []
        self.states: list[Any] = []
        """The stream's state after each of :attr:`events` (for :meth:`World.apply`)."""
        self.read: dict[str, int] = {}
        """The version of each live task this decision read from the world: the
        store refuses the decision if another writer appended to one of them
        since (its read guards), as it refuses one that writes a stale version."""
        self.across: set[str] = set()
        """The topics of the events this decision counted in every stream (see
        :meth:`read_across`)."""

    def get(self, task_id: str) -> TaskState | None:
        """The task as this decision sees it so far."""
        state = self.changed.get(task_id)
        if state is not None:
            return state
        state = self.world.get(task_id)
        # A terminal task never changes again: reading it needs no guard.
        if state is not None and state.status != "terminal":
            self.read[task_id] = state.events
        return state

    def peek(self, task_id: str) -> TaskState | None:
        """The task as this decision sees it so far, read without a guard: for a scan
        that picks the tasks it acts on (those it reads again with :meth:`get`)."""
        return self.changed.get(task_id) or self.world.get(task_id)

    def read_across(self, *event_types: type[TaskEvent]) -> None:
        """Note that this decision counted events of these classes in every stream (the
        daily cap counts the day's runs of every task): no stream's version guards such
        a count, so the store refuses the decision if an event of one of them was
        appended after the log position the world had folded (its unseen guard)."""
        self.across.update(event_type.topic for event_type in event_types)

    def guards(self) -> dict[str, int]:
        """The tasks this decision read but does not write, with the versions it read."""
        # What it writes is what it changed: emit keys a task's state by the event's
        # stream id, emit_stream a stream's.
        changed, streams = self.changed, self.changed_streams
        return {
            task_id: v
            for task_id, v in self.read.items()
            if task_id not in changed and task_id not in streams
        }

    def get_stream(self, stream_id: str) -> Any:
        """A non-task stream's state as this decision sees it so far (``None`` if new)."""
        if stream_id in self.changed_streams:
            return self.changed_streams[stream_id]
        return self.world.stream(stream_id)

    def guard_stream(self, stream_id: str) -> None:
        """Note that this decision went by a non-task stream it does not write (the
        restart limit): the store refuses it if another writer appended to that stream
        since the world folded it, as for a task it read (:meth:`guards`)."""
        if stream_id not in self.changed_streams:
            self.read[stream_id] = self.world.held_version(stream_id, task_stream=False)

    def emit_stream(self, event: TaskEvent) -> Any:
        """Add an event of a non-task stream; returns that stream's state after it."""
        stream_id = event.stream_id()
        state = evolve_stream(self.get_stream(stream_id), event)
        self.changed_streams[stream_id] = state
        self.events.append(event)
        self.states.append(state)
        return state

    def emit(self, event: TaskEvent) -> TaskState:
        """Add an event to the decision and return the task's state after it."""
        if not type(event).task_stream:
            raise TypeError(f"{type(event).__name__} is not a task-stream event; use emit_stream")
        state = evolve(self.get(event.task_id), event)
        self.changed[state.id] = state
        self.events.append(event)
        self.states.append(state)
        if type(event) is TaskSubmitted and event.owner_id is not None:
            self.new_children.setdefault(event.owner_id, []).append(state.id)
        return state

    def peek_live_children(self, task_id: str) -> list[TaskState]:
        """The live tasks ``task_id`` owns directly, in id order, peeked (no guard)."""
        owned = set(self.world.live_children.get(task_id, ()))
        owned.update(self.new_children.get(task_id, ()))
        peeked = (self.peek(child_id) for child_id in sorted(owned))
        return [child for child in peeked if child is not None and child.live]

    def live_children(self, task_id: str) -> list[str]:
        """The live tasks ``task_id`` owns directly, in id order, each read under a guard."""
        live = [child.id for child in self.peek_live_children(task_id)]
        for child_id in live:
            self.get(child_id)
        return live

    def live_descendants(self, task_id: str) -> Iterator[TaskState]:
        """Every live task below ``task_id`` in the ownership tree, parents first."""
        stack = list(reversed(self.live_children(task_id)))
        while stack:
            child_id = stack.pop()
            child = self.get(child_id)
            if child is None:
                continue
            yield child
            stack.extend(reversed(self.live_children(child_id)))

    def ancestors(self, task_id: str) -> Iterator[TaskState]:
        """The owners above ``task_id``, nearest first.

        Only the nearest is read under a guard, so a decision's guards do not grow
        with the depth of its tree: a writer that makes a higher owner cancelling
        marks every live task below it in the same append (rule 6's cascade), the
        nearest owner included, and that write is what the guard catches.
        """
        seen = {task_id}
        state, read = self.get(task_id), self.get  # the nearest owner guarded, then peeked
        while state is not None and state.owner_id is not None and state.owner_id not in seen:
            owner_id = state.owner_id
            seen.add(owner_id)
            state, read = read(owner_id), self.peek
            if state is not None:
                yield state


def stream_in_view(source: World | Draft, stream_id: str) -> Any:
    """A non-task stream's state as ``source`` sees it: a decision's view (its own
    events included, a dropped stream read back) or what the world holds (``None``
    for a stream it does not hold)."""
    if isinstance(source, Draft):
        return source.get_stream(stream_id)
    return source.streams.get(stream_id)
