"""Keep read models current: fold the log, write each batch and its position together.

The projector folds the store's log through the same ``evolve`` the scheduler
uses (one in-memory :class:`~tasktrail.domain.World`), hands each event to
every projection whose tracked position is behind it, and commits a batch's
rows *and* the projections' new positions in one SQLite transaction. A crash
anywhere rolls the whole batch back; the next catch-up starts from the last
committed position, so there is never a duplicate row or a gap.

Why not eventsourcing's ``ProjectionRunner``: it follows a recorder through
``subscribe()``, which eventsourcing's SQLite application recorder does not
offer, and it commits one tracking record per event; here the same loop polls
SQLite and PostgreSQL stores alike and writes thousands of rows per commit.
The tracked position is the store's notification id, exactly eventsourcing's
``Tracking.notification_id``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tasktrail.domain import Store, World, open_store
from tasktrail.domain.history import DEFAULT_EVERY, Restored, restore, stream_loader
from tasktrail.domain.retention.across import ArchiveView, archive_folder, warn_of
from tasktrail.domain.store.store import Recorded

from .audit import AuditTrail, amends_previous
from .base import Changes, Coalescer, Projection, write_changes
from .ledger import Ledgers
from .live import LiveMirror
from .wakeups import PendingWakeups

POSITIONS = "projection_positions"
DEFAULT_BATCH = 5_000
COMPACT_EVERY = DEFAULT_EVERY
"""Events folded between two compactions of the projector's world."""

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while catching up."""

CrashHook = Callable[[str], None]
"""Called between the statements of a batch (``"rows"``, ``"positions"``): tests
raise from it to simulate a crash at that point."""


def default_projections() -> list[Projection]:
    """The read models tasktrail keeps: live mirror, pending wakeups, ledgers, audit trail."""
    return [LiveMirror(), PendingWakeups(), Ledgers(), AuditTrail()]


@dataclass
class CatchUp:
    """What one catch-up did."""

    read: int = 0
    """Events folded from the store."""
    written: dict[str, int] = field(default_factory=dict)
    """Events applied to each projection (those past its tracked position)."""
    position: int = 0
    seconds: float = 0.0

    @property
    def noop(self) -> bool:
        """Whether no projection changed."""
        return not any(self.written.values())


class Projector:
    """Follows one store and keeps its read models in a SQLite file.

    ``archive``: the store's archive folder (``tasktrail project --archive``): its
    segments' events are folded in place, as if never moved; a segment that fails its
    check is read as a gap and is an :class:`ArchiveWarning` at the catch-up that read it.
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        projections: Sequence[Projection] | None = None,
        batch_size: int = DEFAULT_BATCH,
        archive: str | os.PathLike[str] | None = None,
    ) -> None:
        folder = archive_folder(archive) if archive is not None else None  # before opening
        self._owns_store = not isinstance(store, Store)
        self.store = store if isinstance(store, Store) else open_store(store)
        self._kept_archive = self.store.archive
        self._across = None if folder is None else ArchiveView(self.store, folder)
        if self._across is not None:
            self.store.archive = self._across
        self._warned = 0  # the archive's findings warned of so far
        self.path = Path(out)
        import sqlite_utils  # loaded with the first read-model file (see base.py)

        self.db = sqlite_utils.Database(self.path)
        self.db.enable_wal()
        # Read models are derived data: WAL at NORMAL stays consistent through any
        # crash (rows and positions commit together), and a power cut can only lose
        # the last batches, which the next catch-up folds again from the store.
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.projections = list(projections) if projections is not None else default_projections()
        names = [p.name for p in self.projections]
        if len(set(names)) != len(names):
            raise ValueError(f"projection names must be unique: {names}")
        self.batch_size = batch_size
        self.world = World()
        self.folded = 0
        """The store position the in-memory fold has reached."""
        self.world.loader = stream_loader(self.store, lambda: self.folded)
        self.compacted = 0
        """The position the world was last compacted at (ended work dropped)."""
        self.restored: Restored | None = None
        """How the world was rebuilt when this projector resumed (``None``: it was
        not, the fold started at position 0)."""
        self.crash_hook: CrashHook | None = None
        self._create()

    def _create(self) -> None:
        with self.db.atomic():
            positions = self.db.table(POSITIONS)
            if not positions.exists():
                positions.create({"name": str, "position": int, "version": int}, pk="name")
            elif "version" not in positions.columns_dict:  # an earlier release's file
                positions.add_column("version", int)
            tracked = {row["name"]: row["version"] or 1 for row in positions.rows}
            for projection in self.projections:
                if tracked.get(projection.name, projection.version) != projection.version:
                    # Its rows meant something else then: fold it again from position 0.
                    for spec in projection.tables:
                        if self.db.table(spec.name).exists():
                            self.db.table(spec.name).drop()
                    positions.delete(projection.name)
                for spec in projection.tables:
                    spec.create(self.db)

    def positions(self) -> dict[str, int]:
        """Each projection's tracked position (0 before its first batch)."""
        stored = {row["name"]: row["position"] for row in self.db.table(POSITIONS).rows}
        return {p.name: stored.get(p.name, 0) for p in self.projections}

    def catch_up(self, *, progress: Progress | None = None) -> CatchUp:
        """Apply every event the read models have not seen yet; returns what it did."""
        started = time.perf_counter()
        report = CatchUp(written={p.name: 0 for p in self.projections})
        positions = self.positions()
        head = self.store.head()
        behind = min(positions.values(), default=head)
        if behind >= head:
            report.position = head
            return report
        if behind > 0 and erased_since(self.store, behind):
            return self.rebuild(progress=progress)  # rows of erased values: folded again
        if self.folded == 0 and behind > 0:
            self._resume(behind)
        batch: list[Recorded] = []
        for recorded in self.store.read(after=self.folded):
            # A full batch ends before the next event, unless that one amends the
            # audit row of the last (a fork's two events stay in one batch).
            if len(batch) >= self.batch_size and not amends_previous(recorded.event):
                self._apply_batch(batch, positions, report)
                batch = []
                if progress is not None:
                    progress(self.folded, head)
            batch.append(recorded)
        if batch:
            self._apply_batch(batch, positions, report)
        if progress is not None:
            progress(self.folded, max(head, self.folded))
        report.position = self.folded
        report.seconds = time.perf_counter() - started
        if self._across is not None:
            warn_of(self._across.findings[self._warned :], stacklevel=2)
            self._warned = len(self._across.findings)
        return report

    def _resume(self, position: int) -> None:
        """Rebuild the world as of ``position`` (the read models' oldest tracked one)
        from the latest snapshot at or before it and the events between: a projector
        resuming folds only what its read models have not seen, not the whole log."""
        restored = restore(self.store, until=position)
        self.restored = restored
        self.world = restored.world
        # A dropped stream is read back as of this fold's position, never ahead of it.
        self.world.loader = stream_loader(self.store, lambda: self.folded)
        self.folded = self.compacted = restored.position

    def _apply_batch(
        self, batch: list[Recorded], positions: dict[str, int], report: CatchUp
    ) -> None:
        changes = {p.name: Changes() for p in self.projections}
        world = self.world
        # Projections that coalesce and are behind the whole batch are applied once per
        # stream at its end (the same rows); the others once per event they are behind.
        first = batch[0].position
        coalescer = Coalescer(p for p in self.projections if positions[p.name] < first)
        per_event = [p for p in self.projections if p not in coalescer.projections]
        coalesce = coalescer.add if coalescer.projections else None
        for recorded in batch:
            event = recorded.event
            position = recorded.position
            before, after = world.apply_stored(position, event, recorded.originator_version)
            for projection in per_event:
                if position > positions[projection.name]:
                    projection.apply(
                        changes[projection.name], position, event, before, after, world
                    )
                    report.written[projection.name] += 1
            if coalesce is not None:
                coalesce(event.stream_id(), position, event, before)
        coalescer.flush(world, lambda projection: changes[projection.name])
        for projection in coalescer.projections:
            report.written[projection.name] += len(batch)
        last = batch[-1].position
        behind = [p for p in self.projections if positions[p.name] < last]
        if behind:
            with self.db.atomic():
                for projection in behind:
                    write_changes(self.db, projection, changes[projection.name])
                if self.crash_hook is not None:
                    self.crash_hook("rows")
                self.db.table(POSITIONS).insert_all(
                    [{"name": p.name, "position": last, "version": p.version} for p in behind],
                    replace=True,
                )
                if self.crash_hook is not None:
                    self.crash_hook("positions")
            for projection in behind:
                positions[projection.name] = last
        self.folded = last
        report.read += len(batch)
        if last - self.compacted >= COMPACT_EVERY:
            # The world holds live work only, as a scheduler's does: a long catch-up
            # or a follow of months does not keep every ended task in memory.
            world.compact()
            self.compacted = last

    def rebuild(self, *, progress: Progress | None = None) -> CatchUp:
        """Drop every read model and fold the whole log again from position 0."""
        with self.db.atomic():
            # Not drop(ignore=True): it also swallows "database is locked", and a
            # rebuild under another writer's lock would report success having done nothing.
            names = [spec.name for p in self.projections for spec in p.tables]
            for name in [*names, POSITIONS]:
                if self.db.table(name).exists():
                    self.db.table(name).drop()
        self.world = World()
        self.world.loader = stream_loader(self.store, lambda: self.folded)
        self.folded = self.compacted = 0
        self.restored = None
        self._create()
        return self.catch_up(progress=progress)

    def follow(
        self,
        *,
        interval: float = 0.5,
        stop: Callable[[], bool] | None = None,
        on_batch: Callable[[CatchUp], None] | None = None,
    ) -> None:
        """Catch up, then poll the store every ``interval`` seconds until ``stop()``."""
        while True:
            report = self.catch_up()
            if on_batch is not None and report.read:
                on_batch(report)
            if stop is not None and stop():
                return
            time.sleep(interval)

    def table_checksums(self) -> dict[str, str]:
        """A checksum of each read-model table's rows, in key order (for comparisons)."""
        import hashlib

        sums = {}
        for projection in self.projections:
            for spec in projection.tables:
                digest = hashlib.sha256()
                order = ", ".join(f"[{c}]" for c in projection.keys(spec.name))
                for row in self.db.execute(f"SELECT * FROM [{spec.name}] ORDER BY {order}"):
                    digest.update(repr(row).encode())
                sums[spec.name] = digest.hexdigest()[:16]
        return sums

    def close(self) -> None:
        """Close the read-model file (and the store, if this projector opened it)."""
        self.db.close()
        if self._owns_store:
            self.store.close()
        else:
            self.store.archive = self._kept_archive  # the caller's store, as it was given

    def __enter__(self) -> Projector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


LEGACY_SUFFIX = ".views.db"
"""The default read-model name of earlier releases, ``STORE.views.db``: Datasette names a
database after its file, and a second dot in the name needs a ``~2E`` in every URL."""


def default_out(location: str | os.PathLike[str]) -> Path:
    """Where ``tasktrail project STORE`` writes by default: ``STORE-views.db`` beside a
    SQLite store (``tasktrail-views.db`` for a URL). A read-model file an earlier
    release wrote under the old name, ``STORE.views.db``, is kept in use while it is
    there and the new one is not (:func:`is_legacy_out` says so)."""
    text = os.fspath(location)
    if "://" in text:
        return Path("tasktrail-views.db")
    path = Path(text)
    out = path.with_name(path.stem + "-views.db")
    legacy = path.with_name(path.stem + LEGACY_SUFFIX)
    if not out.exists() and legacy.exists():
        return legacy
    return out


def is_legacy_out(out: Path) -> bool:
    """Whether :func:`default_out` chose a read-model file of the earlier name."""
    return out.name.endswith(LEGACY_SUFFIX)


def erased_since(store: Store, position: int) -> bool:
    """Whether an erasure act (issue 45) was recorded after ``position``: read models
    folded before it hold the values it erased, and are folded again whole."""
    from tasktrail.domain.store.gaps import ERASED_TOPIC, history_acts

    return any(act.topic == ERASED_TOPIC and act.position > position for act in history_acts(store))
