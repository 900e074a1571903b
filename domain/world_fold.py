"""One event folded into a :class:`~.world.World`: the inner step of every fold (a
replay, a refresh, a scheduler's own appends), and so most of a replay's time.

:func:`apply_event` evolves the stream's state, keeps the world's own task indexes
(:func:`index_task`: status counts, waiters, sleeping, live tasks and children) and
calls the registered indexers that react to the event's class
(:func:`~.hooks.indexers_for`). Kept apart from ``world.py`` so that the step can be
written for speed: the task indexes inlined, no attribute read twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .hooks import _DISPATCH, indexers_for
from .tasks.evolve import evolve, evolve_stream

if TYPE_CHECKING:
    from .tasks.state import TaskState


class FoldedWorld(Protocol):
    """What the fold step keeps of a :class:`~.world.World`: its own task indexes and
    streams. Declared here, not imported, so that ``world.py`` imports this module and
    never the reverse."""

    tasks: dict[str, TaskState]
    live_children: dict[str, set[str]]
    waiters: dict[str, set[str]]
    sleeping: set[str]
    live: set[str]
    streams: dict[str, Any]
    stream_versions: dict[str, int]
    folded: int
    counts: dict[str, int]
    absent: set[str]
    unknown: set[str]
    watchers: list[set[str]]


def apply_event(
    world: FoldedWorld, event: Any, cls: type, stream_id: str, previous: Any, folded: Any
) -> Any:
    """Fold ``event`` (of class ``cls``, on ``stream_id``, whose state is ``previous``)
    into ``world``; ``folded``: its state after the event, if the caller has it.
    Returns that state. :func:`index_task`, inlined."""
    world.folded += 1
    state: Any
    if cls.task_stream:  # type: ignore[attr-defined]
        state = folded if folded is not None else evolve(previous, event)
        task_id = state.id
        world.tasks[task_id] = state
        for watcher in world.watchers:  # readers that look again only at what changed
            watcher.add(task_id)
        if world.unknown:
            world.unknown.discard(task_id)
        status = state.status
        counts = world.counts
        if previous is None:
            counts[status] = counts.get(status, 0) + 1
            previous_status = None
        else:
            previous_status = previous.status
            # A count of 1 leaves and comes back last, as count(-1) then count(+1) does
            # (a snapshot writes the counts in their order).
            if previous_status != status or counts.get(status) == 1:
                left = counts.get(previous_status, 0) - 1
                if left:
                    counts[previous_status] = left
                else:
                    del counts[previous_status]
                counts[status] = counts.get(status, 0) + 1
        if previous_status == "waiting":
            waiters = world.waiters
            for awaited in previous.on:
                waiting = waiters.get(awaited)
                if waiting is not None:
                    waiting.discard(task_id)
                    if not waiting:
                        del waiters[awaited]
        if status == "waiting":
            for awaited in state.on:
                world.waiters.setdefault(awaited, set()).add(task_id)
        if status == "sleeping":
            world.sleeping.add(task_id)
        elif previous_status == "sleeping" or previous_status is None:
            world.sleeping.discard(task_id)  # only a sleeping task is in the set
        if status != "terminal":  # TaskState.live
            world.live.add(task_id)
            owner = state.owner_id
            if previous is None and owner is not None:
                world.live_children.setdefault(owner, set()).add(task_id)
        else:
            _ended(world, task_id, state.owner_id)
    else:
        state = folded if folded is not None else evolve_stream(previous, event)
        world.streams[stream_id] = state
        versions = world.stream_versions
        versions[stream_id] = versions.get(stream_id, 0) + 1
        if world.absent:
            world.absent.discard(stream_id)
    indexers = _DISPATCH.get(cls)
    if indexers is None:
        indexers = indexers_for(cls)
    for indexer in indexers:
        indexer(world, event, previous, state)
    return state


def count(world: FoldedWorld, status: str, change: int) -> None:
    """Move the count of tasks in ``status`` by ``change``."""
    counts = world.counts
    left = counts.get(status, 0) + change
    if left:
        counts[status] = left
    else:
        del counts[status]  # no zero entries: one world's counts equal another's


def index_task(world: FoldedWorld, previous: TaskState | None, state: TaskState) -> None:
    """Move a task from ``previous`` to ``state`` in the world's own indexes."""
    task_id = state.id
    for watcher in world.watchers:
        watcher.add(task_id)
    if previous is not None:
        count(world, previous.status, -1)
    count(world, state.status, 1)
    if previous is not None and previous.status == "waiting":
        for awaited in previous.on:
            waiting = world.waiters.get(awaited)
            if waiting is not None:
                waiting.discard(task_id)
                if not waiting:
                    del world.waiters[awaited]
    if state.status == "waiting":
        for awaited in state.on:
            world.waiters.setdefault(awaited, set()).add(task_id)
    if state.status == "sleeping":
        world.sleeping.add(task_id)
    else:
        world.sleeping.discard(task_id)
    owner = state.owner_id
    if state.live:
        world.live.add(task_id)
        if previous is None and owner is not None:
            world.live_children.setdefault(owner, set()).add(task_id)
    else:
        _ended(world, task_id, owner)


def _ended(world: FoldedWorld, task_id: str, owner: str | None) -> None:
    world.live.discard(task_id)
    if owner is not None:
        children = world.live_children.get(owner)
        if children is not None:
            children.discard(task_id)
            if not children:
                del world.live_children[owner]
