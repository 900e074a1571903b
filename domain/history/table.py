"""Where snapshots are kept: a table of their own in the store's database.

A snapshot is derived data: the world as of one log position, written so that
opening a store folds only the events after it. It lives beside the log
(``tasktrail_snapshots``: position, format, time written, body), never in it,
and is never the truth: :mod:`.restore` reports and ignores one that is
missing, corrupt or of another format, and ``tasktrail verify`` checks each
against the fold. A read-only open reads the table if it is there and creates
nothing. The table stays bounded: each write drops, in its own transaction, the
snapshots it supersedes (:mod:`.retention`); nothing that only reads ever does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from .retention import superseded

if TYPE_CHECKING:
    from ..store.store import Store

TABLE = "tasktrail_snapshots"
FORMAT = 4
"""The body's format; a snapshot of another format is ignored (folded past).

Bumped whenever the fold makes something else of the same events, not only when the
body's layout changes: a snapshot is trusted at open, so one an earlier fold made must
be passed over (``tests/test_snapshot_format.py`` holds a reference log's fold to
digests recorded per format). 2: each object's values in its class's field order;
3: the run ledger's task markers and Turn folds of seed fidelity rounds three to six;
4: a runtime-cleanup obligation's claim (``Obligation.claimed_by``, round nine).
"""


@dataclass(frozen=True)
class StoredSnapshot:
    """One row of the snapshot table."""

    position: int
    format: int
    written_at: float
    body: bytes


@dataclass(frozen=True)
class KeptSnapshot:
    """One snapshot as listed: where, of which format, when written, how big."""

    position: int
    format: int
    written_at: float
    """Wall-clock milliseconds since the epoch (not the scheduler clock)."""
    size: int
    """The body's bytes."""


class SnapshotTable:
    """The snapshot table of one store (SQLite or PostgreSQL)."""

    def __init__(self, store: Store) -> None:
        self._postgres = store.location.kind == "postgresql"
        self._mark = "%s" if self._postgres else "?"
        self._read_only = store.read_only
        # eventsourcing's recorders for SQLite and PostgreSQL both keep a datastore.
        self._datastore: Any = getattr(store.app.recorder, "datastore")  # noqa: B009
        schema = getattr(self._datastore, "schema", "") if self._postgres else ""
        self._table = f'"{schema}".{TABLE}' if schema else TABLE
        self._created = False

    @contextmanager
    def _cursor(self, commit: bool) -> Iterator[Any]:
        try:
            with self._datastore.transaction(commit=commit) as cursor:
                yield cursor
        except StoreError:
            raise
        except Exception as error:  # sqlite3 / psycopg errors: locked, read-only, gone
            raise StoreError(f"cannot use the snapshot table: {error}") from None

    def _ensure(self) -> None:
        if self._created:
            return
        blob = "BYTEA" if self._postgres else "BLOB"
        with self._cursor(commit=True) as cursor:
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table} ("
                "position BIGINT PRIMARY KEY, format INTEGER NOT NULL, "
                f"written_at DOUBLE PRECISION NOT NULL, body {blob} NOT NULL)"
            )
        self._created = True

    def _exists(self) -> bool:
        if self._created:
            return True
        with self._cursor(commit=False) as cursor:
            if self._postgres:
                cursor.execute("SELECT to_regclass(%s) IS NOT NULL AS found", (self._table,))
            else:
                cursor.execute(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
                    (TABLE,),
                )
            row = cursor.fetchone()
        found = bool(next(iter(row.values())) if isinstance(row, dict) else row[0])
        self._created = found and not self._read_only
        return found

    def write(self, position: int, body: bytes) -> list[int]:
        """Save the world as of ``position`` (a snapshot of this format already there
        is kept: the fold to one position is one world; one of another format is
        replaced), and drop, in the same transaction, the snapshots it supersedes
        (:meth:`prune`); returns their positions."""
        self._ensure()
        m = self._mark
        with self._cursor(commit=True) as cursor:
            self._lock(cursor)
            cursor.execute(
                f"INSERT INTO {self._table} (position, format, written_at, body) "
                f"VALUES ({m}, {m}, {m}, {m}) ON CONFLICT (position) DO UPDATE SET "
                "format = excluded.format, written_at = excluded.written_at, "
                f"body = excluded.body WHERE {TABLE}.format <> excluded.format",
                (position, FORMAT, time.time() * 1000.0, body),
            )
            return self._drop_superseded(cursor)

    def prune(self) -> list[int]:
        """Drop the snapshots the kept ones supersede, as a write does, and return
        their positions: every one of an earlier format below the newest of this
        format, and of this format those :func:`.retention.superseded` names (the
        newest two and a geometric spacing of older ones stay). For a table an earlier
        release filled; never called by a read (``verify`` opens read-only)."""
        if not self._exists():
            return []
        with self._cursor(commit=True) as cursor:
            self._lock(cursor)
            return self._drop_superseded(cursor)

    def _lock(self, cursor: Any) -> None:
        """Take the table's write lock before reading what to drop: two writers pruning
        at once must not each decide on a view without the other's snapshot."""
        if self._postgres:
            # Conflicts with itself, not with readers (ACCESS SHARE).
            cursor.execute(f"LOCK TABLE {self._table} IN SHARE ROW EXCLUSIVE MODE")
        else:
            # SQLite: a write statement takes the database's write lock (waiting out
            # another writer) though it deletes nothing. Read first, a prune's delete
            # would fail ("database is locked") once a writer committed meanwhile.
            cursor.execute(f"DELETE FROM {self._table} WHERE position IS NULL")

    def _drop_superseded(self, cursor: Any) -> list[int]:
        cursor.execute(f"SELECT position, format FROM {self._table}")
        rows = [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in cursor.fetchall()]
        current = [int(position) for position, format_ in rows if format_ == FORMAT]
        # An earlier format's snapshot is passed over at open: once one of this format
        # is kept above it, nothing reads it. (A later format's is left to its release.)
        newest = max(current, default=0)
        dropped = [int(p) for p, format_ in rows if format_ < FORMAT and p < newest]
        dropped += superseded(current)
        if dropped:
            cursor.executemany(
                f"DELETE FROM {self._table} WHERE position = {self._mark}", [(p,) for p in dropped]
            )
        return sorted(dropped)

    def positions(self) -> list[int]:
        """The positions of every snapshot kept, oldest first."""
        if not self._exists():
            return []
        with self._cursor(commit=False) as cursor:
            cursor.execute(f"SELECT position FROM {self._table} ORDER BY position")
            rows = cursor.fetchall()
        return [_first(row) for row in rows]

    def kept(self) -> list[KeptSnapshot]:
        """Every snapshot kept, oldest first, without its body (its size instead)."""
        if not self._exists():
            return []
        size = "octet_length(body)" if self._postgres else "length(body)"
        with self._cursor(commit=False) as cursor:
            cursor.execute(
                f"SELECT position, format, written_at, {size} FROM {self._table} ORDER BY position"
            )
            rows = cursor.fetchall()
        found = []
        for row in rows:
            position, format_, written_at, length = (
                tuple(row.values()) if isinstance(row, dict) else tuple(row)
            )
            found.append(KeptSnapshot(int(position), int(format_), float(written_at), int(length)))
        return found

    def at(self, position: int) -> StoredSnapshot | None:
        """The snapshot at exactly ``position``, if one is kept."""
        if not self._exists():
            return None
        with self._cursor(commit=False) as cursor:
            cursor.execute(
                f"SELECT position, format, written_at, body FROM {self._table} "
                f"WHERE position = {self._mark}",
                (position,),
            )
            row = cursor.fetchone()
        return _snapshot(row) if row is not None else None


def _first(row: Any) -> int:
    """A row's first column as an int (psycopg's rows are dicts, sqlite3's tuples)."""
    return int(next(iter(row.values())) if isinstance(row, dict) else row[0])


def _snapshot(row: Any) -> StoredSnapshot:
    values = tuple(row.values()) if isinstance(row, dict) else tuple(row)
    position, format_, written_at, body = values
    return StoredSnapshot(int(position), int(format_), float(written_at), bytes(body))
