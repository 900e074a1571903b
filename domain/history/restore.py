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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..store.store import Store
from ..tasks.evolve import evolve, evolve_stream
from ..world import Loader, World
from .codec import SnapshotUnreadable, collector_paused, encode_world, world_from
from .envelope import (
    body_key,
    heads_problem,
    held_versions,
    keyed_snapshot,
    open_body,
    read_heads,
    seal_body,
)
from .sealed import seal_upto
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
    snapshot taken on the way: the world is then the fold up to ``restored.position``).

    A snapshot is used only once its body matches its digest, every value decodes into
    its declared type, its parts agree, and the heads it recorded match the log
    (:mod:`.envelope`); and if the events after it do not fold onto it, it is passed
    over too. Each one passed over is noted in :attr:`Restored.problems` (and logged):
    no snapshot's content makes this raise."""
    problems: list[str] = []
    starts = _starts(store, until, problems) if snapshots else iter(())
    for start in starts:
        try:
            return _reported(_fold(store, start, until, on_event), store)
        except _Unfit as unfit:  # the tail does not follow from it: a false snapshot
            problems.append(
                f"snapshot at position {start.snapshot} does not fit the events after it: {unfit}"
            )
    whole = World()
    whole.whole = True  # folded from position 0: nothing dropped until it is compacted
    return _reported(_fold(store, Restored(whole, 0, problems=problems), until, on_event), store)


def _fold(
    store: Store, restored: Restored, until: int | None, on_event: Callable[[Restored], None] | None
) -> Restored:
    world = restored.world
    world.loader = stream_loader(store, lambda: restored.position)
    from_snapshot = restored.snapshot is not None
    for recorded in store.read(after=restored.position, until=until):
        try:
            world.apply_stored(recorded.position, recorded.event, recorded.originator_version)
        except Exception as error:
            if not from_snapshot:
                raise
            # A state no fold makes, that the checks let by. (Were it the log's own
            # fault, the fold from position 0 meets it again and raises it.)
            raise _Unfit(_said(error)) from None
        restored.position = recorded.position
        restored.folded += 1
        if on_event is not None:
            on_event(restored)
    return restored


class _Unfit(Exception):
    """The events after a snapshot do not fold onto it."""


def _starts(store: Store, until: int | None, problems: list[str]) -> Iterator[Restored]:
    """The snapshots at or before ``until`` that pass their checks, latest first (each
    sharing ``problems``, where those that fail are noted)."""
    table = SnapshotTable(store)
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
        world = _checked(store, position, stored.body, problems)
        if world is not None:
            yield Restored(world, position, snapshot=position, problems=problems)


def _checked(store: Store, position: int, body: bytes, problems: list[str]) -> World | None:
    """The world of the snapshot at ``position`` once it passes every check, else
    ``None`` with the reason noted."""
    if keyed_snapshot(store, position) and store.chain_key is None:
        # Keyed: its digest is an HMAC under the store's key, which this reader lacks.
        problems.append(f"snapshot at position {position} is keyed and no key was given")
        return None
    try:
        with collector_paused():
            data, heads = open_body(body, body_key(store, position))
            world = world_from(data)
            mismatch = heads_problem(store, world, heads, position)
    except SnapshotUnreadable as error:
        problems.append(f"snapshot at position {position} is unreadable: {error}")
        return None
    except Exception as error:  # never trusted, never fatal: a snapshot is derived data
        problems.append(f"snapshot at position {position} is unreadable: {_said(error)}")
        return None
    if mismatch is not None:
        problems.append(f"snapshot at position {position} does not match the log: {mismatch}")
        return None
    return world


def failing(store: Store) -> dict[int, str]:
    """The snapshots of this format an open would pass over (past the log's end, or
    failing a check), each with why: what ``snapshot --prune`` drops."""
    table = SnapshotTable(store)
    head = store.head()
    found: dict[int, str] = {}
    for kept in table.kept():
        if kept.format == -1:
            found[kept.position] = "its format is not a number"
            continue
        if kept.format != FORMAT:
            continue  # an earlier format's: prune's own rule, a later one's: its release's
        if kept.position > head:
            found[kept.position] = f"it is past the log's end ({head})"
            continue
        stored = table.at(kept.position)
        problems: list[str] = []
        if stored is not None and _checked(store, kept.position, stored.body, problems) is None:
            found[kept.position] = problems[0].split(": ", 1)[-1]
    return found


def _said(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def _reported(restored: Restored, store: Store) -> Restored:
    for problem in restored.problems:
        log.warning("%s: %s; passed over", store.location, problem)
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
    return SnapshotTable(store).write(position, snapshot_body(store, world, position), spacing)


def snapshot_body(
    store: Store, world: World, position: int, world_bytes: bytes | None = None
) -> bytes:
    """The body a snapshot of ``world`` (compacted, the fold of ``store`` up to
    ``position``) stores: the world (``world_bytes``, if given, else
    :func:`~.codec.encode_world`'s), the log's heads of the streams it holds, the seal
    of the log up to ``position`` (:mod:`.sealed`), the digest of all (:mod:`.envelope`)."""
    heads = read_heads(store, held_versions(world), position)
    world_bytes = world_bytes if world_bytes is not None else encode_world(world)
    key = body_key(store, position)
    seal = seal_upto(store, position).to_dict()
    return seal_body(world_bytes, heads, key, seal)


def snapshot_differs(
    world: World,
    body: bytes,
    store: Store | None = None,
    position: int | None = None,
    *,
    archived: bool = False,
) -> str | None:
    """How a stored snapshot differs from the compacted fold ``world`` at its position
    (``None``: it equals it): unreadable (its digest, its types, its parts), heads that
    are not the log's (given the ``store`` and the snapshot's ``position``), or holding
    another world. ``world`` is compacted in place."""
    try:
        data, heads = open_body(body, body_key(store, position))
        stored = world_from(data)
        mismatch = (
            heads_problem(store, stored, heads, position)
            if store is not None and position is not None
            else None
        )
    except SnapshotUnreadable as error:
        return f"unreadable: {error}"
    except Exception as error:  # whatever the row holds, verify reports it
        return f"unreadable: {_said(error)}"
    if mismatch is not None:
        return f"does not match the log: {mismatch}"
    if {stream: version for stream, (version, _) in heads.items()} != held_versions(stored):
        return "its heads are not those of the streams it holds"
    world.compact()
    from .codec import WORLD_PARTS

    for part in WORLD_PARTS:
        if archived and part in _COUNTERS:
            continue  # history archived before it: a fold with or without it counts apart
        ours, theirs = getattr(world, part), getattr(stored, part)
        if archived and part == "indexes":
            ours, theirs = _ordered(ours), _ordered(theirs)
        if ours != theirs:
            return f"its {part} differ from the fold's"
    return None


_COUNTERS = ("counts", "folded")


def _ordered(indexes: dict[str, Any]) -> dict[str, Any]:
    """A world's indexes with the submission numbers of its live tasks as their order:
    what stays the same whether a fold read the events an archive took or not."""
    ordered = {name: index for name, index in indexes.items() if name != "task_seq"}
    order = ordered.get("live_order")
    if isinstance(order, dict):
        ordered["live_order"] = sorted(order, key=lambda task_id: (order[task_id], task_id))
    return ordered
