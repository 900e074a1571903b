"""Archive (or prune) finished task trees: ``Scheduler.archive`` and ``tasktrail archive``.

One read of the log finds the units that may leave (:mod:`.trees`); they are grouped
into acts of at most ``batch`` events. A second read of the rows (with the blocks of
earlier acts in their place, :mod:`..store.gaps`) counts each event's leaf in the full
log's tree, writes each act's events to its segment (:mod:`.segments`) and gathers the
blocks they fill (:mod:`.blocks`). Then, act by act: the segment is fsynced into
place, and one transaction appends the act's event and deletes its rows
(:mod:`..store.removal`). A dry run writes nothing and says what would move.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConflictError, InvalidArgument
from ..store.gaps import history_version
from ..store.removal import record_act
from ..store.seals import LogTree
from ..store.store import Store
from .blocks import BlockBuilder, row_leaf
from .events import HistoryArchived, HistoryPruned
from .segments import SegmentWriter
from .trees import TreeScan, Unit

DEFAULT_BATCH = 20_000
"""Events an act of ``tasktrail archive`` takes at most (a segment each): the segment
``history --archive`` of one of its tasks reads and checks whole, in well under a second."""
Crash = Callable[[str], None]


@dataclass
class ArchivedAct:
    """One act: its segment (``None``: pruned, or a dry run), what it took."""

    segment: str | None
    trees: list[str]
    events: int
    stored_bytes: int
    segment_bytes: int
    first: int
    last: int
    position: int | None = None
    """The act's position in the store (``None``: a dry run)."""


@dataclass
class ArchiveReport:
    """What an archive (or its dry run) moved."""

    acts: list[ArchivedAct] = field(default_factory=list)
    dry_run: bool = False

    @property
    def events(self) -> int:
        """Events moved (or that would move)."""
        return sum(act.events for act in self.acts)

    @property
    def trees(self) -> int:
        """Trees moved (or that would move)."""
        return sum(len(act.trees) for act in self.acts)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON."""
        return {
            "dry_run": self.dry_run,
            "trees": self.trees,
            "events": self.events,
            "stored_bytes": sum(a.stored_bytes for a in self.acts),
            "segment_bytes": sum(a.segment_bytes for a in self.acts),
            "acts": [a.__dict__ for a in self.acts],
        }


class _Counting(io.RawIOBase):
    """A sink that counts what a dry run's compressor writes."""

    def __init__(self) -> None:
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.size += len(data)
        return len(data)


def scan(store: Store) -> TreeScan:
    """The units of a store's log, with each row's leaf (one read of it)."""
    found = TreeScan()
    found.read(store)
    return found


def archive(
    store: Store,
    *,
    before: float,
    to: str | Path | None,
    kind: str | None = None,
    dry_run: bool = False,
    batch: int = DEFAULT_BATCH,
    limit: int | None = None,
    at: float | None = None,
    actor: str | None = None,
    why: str | None = None,
    crash: Crash | None = None,
    units: Sequence[Unit] | None = None,
    scanned: TreeScan | None = None,
) -> ArchiveReport:
    """Move every unit that may leave (ended before ``before``, ms) to segments in ``to``
    (``None``: prune them, no segment), ``batch`` events an act, at most ``limit``
    events in all; ``dry_run``: only say what would move. ``units`` (of ``scanned``, a
    scan of the log up to now): those, not all that may leave."""
    folder = Path(to) if to is not None else None
    if folder is not None and not dry_run and not folder.is_dir():
        raise InvalidArgument(f"the archive folder {folder} is not a folder (make it first)")
    trees = scanned if scanned is not None else scan(store)
    chosen = list(units) if units is not None else list(trees.movable(before, kind))
    groups = _grouped(chosen, batch, limit)
    report = ArchiveReport(dry_run=dry_run)
    if not groups:
        return report
    version = history_version(store)
    plans = [_Plan(group, version + n + 1, folder, dry_run) for n, group in enumerate(groups)]
    for plan in plans:  # each act's rows, read by their streams (indexed), in log order
        rows = [
            (position, stream, version, topic, bytes(state))
            for unit in plan.units
            for stream in unit.streams
            for position, version, topic, state in store.stream_rows(stream)
        ]
        for row in sorted(rows):
            try:
                leaf = trees.leaf_of(row[0])
            except KeyError:  # appended since the scan (an erasure): scan again, then act
                raise ConflictError([row[1]], "the log moved since it was scanned") from None
            plan.add(row, leaf)
    when = at if at is not None else time.time() * 1000
    for plan in plans:
        report.acts.append(plan.record(store, when, actor, why, crash))
        if not dry_run:
            trees.took(plan.ranges)
    return report


def _grouped(units: list[Unit], batch: int, limit: int | None) -> list[list[Unit]]:
    groups: list[list[Unit]] = []
    size = taken = 0
    for unit in units:
        if limit is not None and taken + unit.events > limit and taken:
            break
        if not groups or (size + unit.events > batch and groups[-1]):
            groups.append([])
            size = 0
        groups[-1].append(unit)
        size += unit.events
        taken += unit.events
    return groups


class _Plan:
    """One act in the making: its units, segment, blocks and positions."""

    def __init__(self, units: list[Unit], version: int, folder: Path | None, dry: bool) -> None:
        self.units = units
        self.version = version
        self.dry = dry
        self.writer: SegmentWriter | None = None
        if folder is not None:  # a dry run's compresses into a sink that counts
            sink = _Counting() if dry else None
            self.writer = SegmentWriter(None if dry else folder, version, sink)  # type: ignore[arg-type]
        self.tree = LogTree()
        self.blocks = BlockBuilder()
        self.ranges: list[tuple[int, int]] = []
        self.count = 0
        self.stored = 0
        self.first = 0

    def add(self, row: tuple[int, str, int, str, bytes], leaf: int) -> None:
        position, stream_id, version, topic, state = row
        state = bytes(state)
        if self.writer is not None:
            self.writer.add((position, stream_id, version, topic, state))
        else:
            self.tree.add(position, stream_id, version, topic, state)
        self.blocks.add(leaf, row_leaf(position, stream_id, version, topic, state), position)
        if self.ranges and self.ranges[-1][1] == position - 1:
            self.ranges[-1] = (self.ranges[-1][0], position)
        else:
            self.ranges.append((position, position))
        self.first = self.first or position
        self.count += 1
        self.stored += len(state)

    def record(
        self, store: Store, at: float, actor: str | None, why: str | None, crash: Crash | None
    ) -> ArchivedAct:
        trees = sorted(root for unit in self.units for root in unit.roots)
        streams = tuple(sorted(s for unit in self.units for s in unit.streams))
        blocks = [[b.first_leaf, b.size, b.first, b.last, b.hash.hex()] for b in self.blocks.done()]
        last = self.ranges[-1][1] if self.ranges else 0
        act = ArchivedAct(None, trees, self.count, self.stored, 0, self.first, last)
        common: dict[str, Any] = {
            "task_id": "",
            "at": at,
            "actor": actor,
            "why": why,
            "trees": tuple(trees),
            "streams": streams,
            "events": self.count,
            "blocks": blocks,
        }
        event: HistoryArchived | HistoryPruned
        if self.writer is not None:
            seal = self.writer.seal(store.chain_key, store.key_id)
            act.segment = seal["name"]
            if self.dry:
                act.segment_bytes = self.writer.close_sink()
                return act
            if crash is not None:
                crash("written")  # the segment whole, not yet fsynced nor in place
            path = self.writer.finish(seal)
            act.segment_bytes = path.stat().st_size
            if crash is not None:
                crash("segment")
            event = HistoryArchived(segment=seal["name"], seal=seal, **common)
        else:
            seal = {
                "pruned": 1,
                "count": self.tree.count,
                "first": self.first,
                "last": last,
                "root": self.tree.root().hex(),
                "key_id": store.key_id,
            }
            if self.dry:
                return act
            event = HistoryPruned(seal=seal, **common)
        act.position = record_act(
            store, [event], [self.version], delete=self.ranges, count=self.count, crash=crash
        )[0]
        return act


__all__ = ["DEFAULT_BATCH", "ArchiveReport", "ArchivedAct", "archive", "scan"]
