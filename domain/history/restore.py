"""A world as of a position: the latest good snapshot, then the events after it.

Opening a store, ``replay --until`` and a projector resuming all start here.
A snapshot is derived data: one that cannot be read (corrupt, of another
format, past the log's end) is reported in :attr:`Restored.problems` and the
next older one is tried, down to folding from position 0. Every world this
module builds folds with the same :meth:`World.apply_stored` as a full fold,
and reads a stream it dropped back from the store (:func:`stream_loader`), as
of its own position, never ahead of it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..store.store import Store
from ..tasks.evolve import evolve, evolve_stream
from ..world import Loader, World
from .codec import SnapshotUnreadable, decode_world, encode_world
from .table import FORMAT, SnapshotTable

log = logging.getLogger("tasktrail.snapshots")

DEFAULT_EVERY = 20_000
"""Events between two snapshots a writer takes (besides the one at close)."""


@dataclass
class Restored:
    """A world as of :attr:`position`, and how it was built."""

    world: World
    position: int
    snapshot: int | None = None
    """The position of the snapshot it started from (``None``: folded from 0)."""
    folded: int = 0
    """Events folded after the snapshot."""
    problems: list[str] = field(default_factory=list)
    """Snapshots that were there but could not be used, and why."""


def stream_loader(store: Store, position: Callable[[], int]) -> Loader:
    """Read one stream back from ``store``, folded from its events up to ``position()``
    (the world's own position: never ahead of the world that asks)."""

    def load(stream_id: str, task_stream: bool, below: int | None) -> tuple[Any, int] | None:
        upto = position()
        state: Any = None
        version = 0
        step = evolve if task_stream else evolve_stream
        for recorded in store.stream_records(stream_id):
            too_new = below is not None and recorded.originator_version >= below
            if recorded.position > upto or too_new:
                break
            state = step(state, recorded.event)
            version = recorded.originator_version
        return (state, version) if version else None

    return load


def restore(
    store: Store,
    until: int | None = None,
    *,
    snapshots: bool = True,
    on_event: Callable[[Restored], None] | None = None,
) -> Restored:
    """The world of ``store`` as of position ``until`` (its end, if ``None``), from the
    latest usable snapshot at or before it (from position 0 with ``snapshots=False``).
    ``on_event(restored)`` is called after each event folded (progress, or a
    snapshot taken on the way: the world is then the fold up to ``restored.position``)."""
    restored = _start(store, until) if snapshots else Restored(World(), 0)
    world = restored.world
    world.loader = stream_loader(store, lambda: restored.position)
    for recorded in store.read(after=restored.position, until=until):
        world.apply_stored(recorded.position, recorded.event, recorded.originator_version)
        restored.position = recorded.position
        restored.folded += 1
        if on_event is not None:
            on_event(restored)
    return restored


def _start(store: Store, until: int | None) -> Restored:
    """The latest snapshot at or before ``until`` that decodes; problems noted."""
    table = SnapshotTable(store)
    problems: list[str] = []
    head = store.head()
    limit = head if until is None else min(until, head)
    for position in reversed(table.positions()):
        if position > head:
            problems.append(f"snapshot at position {position} is past the log's end ({head})")
            continue
        if position > limit:
            continue
        stored = table.at(position)
        if stored is None:
            continue
        if stored.format != FORMAT:
            problems.append(
                f"snapshot at position {position} is of format {stored.format}, "
                f"this tasktrail reads {FORMAT}"
            )
            continue
        try:
            world = decode_world(stored.body)
        except SnapshotUnreadable as error:
            problems.append(f"snapshot at position {position} is unreadable: {error}")
            continue
        return _reported(Restored(world, position, snapshot=position, problems=problems), store)
    return _reported(Restored(World(), 0, problems=problems), store)


def _reported(restored: Restored, store: Store) -> Restored:
    for problem in restored.problems:
        log.warning("%s: %s; ignored", store.location, problem)
    return restored


def take_snapshot(
    store: Store, world: World, position: int, spacing: int = DEFAULT_EVERY
) -> list[int]:
    """Compact ``world`` (it must be the fold of ``store`` up to ``position``) and save
    it as the snapshot at ``position``; returns the positions of the snapshots it
    superseded, dropped in the same transaction: the previous one where ``spacing``
    (the writer's events between two) does not need it, and those of an earlier
    format below it (:meth:`.table.SnapshotTable.write`)."""
    world.compact()
    return SnapshotTable(store).write(position, encode_world(world), spacing)


def snapshot_differs(world: World, body: bytes) -> str | None:
    """How a stored snapshot differs from the compacted fold ``world`` at its position
    (``None``: it equals it). ``world`` is compacted in place."""
    try:
        stored = decode_world(body)
    except SnapshotUnreadable as error:
        return f"unreadable: {error}"
    world.compact()
    from .codec import WORLD_PARTS

    for part in WORLD_PARTS:
        if getattr(world, part) != getattr(stored, part):
            return f"its {part} differ from the fold's"
    return None
