"""Where snapshots are kept: a table of their own in the store's database.

A snapshot is derived data: the world as of one log position, written so that
opening a store folds only the events after it. It lives beside the log
(``tasktrail_snapshots``: position, format, time written, body), never in it,
and is never the truth: :mod:`.restore` reports and ignores one that is
missing, corrupt or of another format, and ``tasktrail verify`` checks each
against the fold. A read-only open reads the table if it is there and creates
nothing. Snapshots of this format are kept about a writer's spacing apart (``replay
--until P`` starts from the nearest at or before ``P``, so it folds at most about that
many events; :func:`redundant`), however often one is written; a write drops, in its own
transaction, one that spacing does not need and those of an earlier format below it,
which nothing reads any more. Nothing that only reads ever drops one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from ..errors import StoreError
from ..store.creation import lock_creation

if TYPE_CHECKING:
    from ..store.store import Store

TABLE = "tasktrail_snapshots"
FORMAT = 7
"""The body's format; a snapshot of another format is ignored (folded past).

Bumped whenever the fold makes something else of the same events, not only when the
body's layout changes: a snapshot is trusted at open, so one an earlier fold made must
be passed over (``tests/test_snapshot_format.py`` holds a reference log's fold to
digests recorded per format). 2: each object's values in its class's field order;
3: the run ledger's task markers and Turn folds of seed fidelity rounds three to six;
4: a runtime-cleanup obligation's claim (``Obligation.claimed_by``, round nine); 5: the
body carries the chain heads of the streams it holds and its own digest (issue 30:
checked before a snapshot is trusted, :mod:`.envelope`); the world inside is format 4's;
6: a task's ``priority`` folded from its submission's (rule 19; a format-5 snapshot would
hold 0 for a submission an import recorded with another), and the keys' streams;
7: a task's asks (``TaskState.asks``, rules 30-32) and the ``open_asks`` index; a task's
   output streams (``TaskState.streams``, rules 28 and 29); a task's flow-control keys
   (``TaskState.flow``, rules 33-36), the limit, rate and debounce keys' streams and the
   ``flow_running`` and ``flow_counts`` indexes.
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
        events = getattr(store.app.recorder, "events_table_name", "stored_events")
        self._events = f'"{schema}".{events}' if schema else events
        self._created = False
        self._indexed = False

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
        if self._created and self._indexed:
            return
        blob = "BYTEA" if self._postgres else "BLOB"
        with self._cursor(commit=True) as cursor:
            if self._postgres:  # concurrent creations race in PostgreSQL's catalog
                lock_creation(cursor, self._datastore.schema)
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table} ("
                "position BIGINT PRIMARY KEY, format INTEGER NOT NULL, "
                f"written_at DOUBLE PRECISION NOT NULL, body {blob} NOT NULL)"
            )
            # What a write drops is found by format (a table an earlier release made
            # has no such index: made here, at its first write by this one).
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {TABLE}_by_format ON {self._table} (format, position)"
            )
        self._created = self._indexed = True

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
        found = bool(_first(row))
        self._created = found and not self._read_only
        return found

    def write(self, position: int, body: bytes, spacing: int | None = None) -> list[int]:
        """Save the world as of ``position`` (a snapshot of this format already there
        is kept: the fold to one position is one world; one of another format is
        replaced), and drop, in the same transaction, the snapshots of an earlier
        format below it (:meth:`prune`) and, given the writer's ``spacing`` (events
        between two snapshots), the previous one where it is not needed to keep that
        spacing (:func:`redundant`); returns the positions dropped."""
        self._ensure()
        m = self._mark
        with self._cursor(commit=True) as cursor:
            cursor.execute(
                f"INSERT INTO {self._table} (position, format, written_at, body) "
                f"VALUES ({m}, {m}, {m}, {m}) ON CONFLICT (position) DO UPDATE SET "
                "format = excluded.format, written_at = excluded.written_at, "
                f"body = excluded.body WHERE {TABLE}.format <> excluded.format",
                (position, FORMAT, time.time() * 1000.0, body),
            )
            dropped = self._drop_outdated(cursor, position)
            if spacing is not None:
                dropped += self._thin(cursor, position, spacing)
            return sorted(dropped)

    def _thin(self, cursor: Any, position: int, spacing: int) -> list[int]:
        """Drop the newest snapshot of this format below ``position`` when the one
        before it is within ``spacing`` of ``position`` (with no snapshot before it,
        none is dropped: the newest two stay): two indexed rows read, whatever the
        table holds."""
        m = self._mark
        cursor.execute(
            f"SELECT position FROM {self._table} WHERE format = {m} AND position < {m} "
            "ORDER BY position DESC LIMIT 2",
            (FORMAT, position),
        )
        below = [_first(row) for row in cursor.fetchall()]
        if len(below) < 2:
            return []  # the newest two are kept: an open falls back on the one before
        previous, before = below
        if not redundant(before, previous, position, spacing):
            return []
        cursor.execute(f"DELETE FROM {self._table} WHERE position = {m}", (previous,))
        return [previous]

    def prune(self) -> list[int]:
        """Drop the snapshots of an earlier format below the newest of this format, as
        a write does, and return their positions (for a table an earlier release
        filled). It drops none of this format (each write keeps those at its spacing,
        which ``replay --until P`` starts near). Never called by a read (``verify``
        opens read-only)."""
        if not self._exists():
            return []
        self._ensure()  # the index an earlier release's table lacks
        m = self._mark
        with self._cursor(commit=True) as cursor:
            if not self._postgres:
                # Take SQLite's write lock before reading (a write statement, though it
                # deletes nothing): read first, the delete would fail ("database is
                # locked") once another writer committed a snapshot meanwhile.
                cursor.execute(f"DELETE FROM {self._table} WHERE position IS NULL")
            cursor.execute(f"SELECT max(position) FROM {self._table} WHERE format = {m}", (FORMAT,))
            newest = _first(cursor.fetchone(), default=0)
            return self._drop_outdated(cursor, newest)

    def drop(self, positions: list[int]) -> list[int]:
        """Drop the snapshots at ``positions`` (those an open passes over); returns the
        positions of those that were there."""
        if not positions or not self._exists():
            return []
        m = self._mark
        dropped = []
        with self._cursor(commit=True) as cursor:
            for position in positions:
                cursor.execute(
                    f"SELECT position FROM {self._table} WHERE position = {m}", (position,)
                )
                if cursor.fetchone() is not None:
                    cursor.execute(f"DELETE FROM {self._table} WHERE position = {m}", (position,))
                    dropped.append(position)
        return sorted(dropped)

    def _drop_outdated(self, cursor: Any, below: int) -> list[int]:
        """Drop the snapshots of an earlier format below ``below`` (where one of this
        format is): opening and replay pass over them, so once one of this format is
        above them nothing reads them. A later format's is left to its release. Found
        through the (format, position) index: the cost follows what is dropped, not
        the snapshots kept."""
        m = self._mark
        where = f"WHERE format < {m} AND position < {m}"
        cursor.execute(f"SELECT position FROM {self._table} {where}", (FORMAT, below))
        dropped = sorted(_first(row) for row in cursor.fetchall())
        if dropped:
            cursor.execute(f"DELETE FROM {self._table} {where}", (FORMAT, below))
        return dropped

    def positions(self) -> list[int]:
        """The positions of every snapshot kept, oldest first."""
        if not self._exists():
            return []
        with self._cursor(commit=False) as cursor:
            cursor.execute(f"SELECT position FROM {self._table} ORDER BY position")
            rows = cursor.fetchall()
        # A hand-edited SQLite row may hold a position that is no integer: not one.
        return [value for value in (_column(row) for row in rows) if value.__class__ is int]

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
            position, format_, written_at, length = _values(row)
            if position.__class__ is int:
                found.append(
                    KeptSnapshot(position, _integer(format_), _time(written_at), _integer(length))
                )
        return found

    def count(self) -> int:
        """How many rows the table holds (malformed ones included)."""
        if not self._exists():
            return 0
        with self._cursor(commit=False) as cursor:
            cursor.execute(f"SELECT count(*) FROM {self._table}")
            return _first(cursor.fetchone(), default=0)

    def drop_malformed(self) -> int:
        """Drop the rows whose columns are not of their types (only a hand-edited SQLite
        table holds such: PostgreSQL's columns refuse them), which no read takes as a
        snapshot; returns how many."""
        if self._postgres or not self._exists():
            return 0
        where = (
            "WHERE typeof(position) <> 'integer' OR typeof(format) <> 'integer' "
            "OR typeof(body) <> 'blob' OR typeof(written_at) NOT IN ('real', 'integer')"
        )
        with self._cursor(commit=True) as cursor:
            cursor.execute(f"SELECT count(*) FROM {self._table} {where}")
            count = _first(cursor.fetchone(), default=0)
            if count:
                cursor.execute(f"DELETE FROM {self._table} {where}")
        return count

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

    def rows_at(self, versions: dict[str, int]) -> dict[tuple[str, int], tuple[int, bytes]]:
        """The log's rows at each stream's version and the one after it (by indexed
        lookups: the cost follows how many streams are asked for, not the log), as
        ``(stream, version) -> (position, the stored state's last bytes)``."""
        wanted = [
            (stream, v) for stream, version in versions.items() for v in (version, version + 1)
        ]
        found: dict[tuple[str, int], tuple[int, bytes]] = {}
        tail = 80  # a digest and its key end every sealed state (store/chain.py)
        with self._cursor(commit=False) as cursor:
            if self._postgres:
                for start in range(0, len(wanted), 5000):
                    chunk = wanted[start : start + 5000]
                    cursor.execute(
                        "SELECT e.notification_id, e.originator_id, e.originator_version, "
                        f"substring(e.state from greatest(octet_length(e.state) - {tail - 1}, 1)) "
                        f"FROM {self._events} e JOIN unnest(%s::text[], %s::int[]) AS w(id, v) "
                        "ON e.originator_id = w.id AND e.originator_version = w.v",
                        ([s for s, _ in chunk], [v for _, v in chunk]),
                    )
                    for row in cursor.fetchall():
                        position, stream, version, state = _values(row)
                        found[(stream, version)] = (int(position), bytes(state))
                return found
            # One statement: SQLite walks the pairs and looks each up by its key.
            cursor.execute(
                f"SELECT e.rowid, e.originator_id, e.originator_version, substr(e.state, -{tail}) "
                f"FROM json_each(?) AS w JOIN {self._events} e "
                "ON e.originator_id = json_extract(w.value, '$[0]') "
                "AND e.originator_version = json_extract(w.value, '$[1]')",
                (orjson.dumps(wanted).decode(),),
            )
            for position, stream, version, state in cursor.fetchall():
                found[(stream, version)] = (int(position), _as_bytes(state))
        return found


def _values(row: Any) -> tuple[Any, ...]:
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)


def _as_bytes(value: Any) -> bytes:
    """A stored state as bytes (a hand-edited SQLite row may hold it as text)."""
    return value.encode("utf-8", "surrogateescape") if isinstance(value, str) else bytes(value)


def redundant(before: int, previous: int, position: int, spacing: int) -> bool:
    """Whether the snapshot at ``previous`` is not needed once one is written at
    ``position``: the one kept below it (``before``) is within ``spacing`` events of
    ``position``, so a replay to any position between them still folds at most
    ``spacing`` events past the nearest snapshot it starts from.

    Applied at every write, the rule keeps snapshots about ``spacing`` apart however
    often a writer takes one (one at every close of a host that opens for each
    command): any two kept ones that are not the newest two are more than ``spacing``
    apart with the one between them, so a log of ``head`` events keeps at most
    ``2 * head / spacing + 3``; and the newest two are always kept (an open passes over
    the newest to the one before when it cannot be read)."""
    return position - before <= spacing


def _first(row: Any, default: int | None = None) -> int:
    """A row's first column as an int (psycopg's rows are dicts, sqlite3's tuples);
    ``default`` for a NULL (an aggregate over no rows)."""
    value = next(iter(row.values())) if isinstance(row, dict) else row[0]
    if value is None and default is not None:
        return default
    return int(value)


def _column(row: Any) -> Any:
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


def _integer(value: Any) -> int:
    """A column that should hold an integer: -1 when a hand-edited row holds none (a
    format no tasktrail reads)."""
    return value if value.__class__ is int else -1


def _time(value: Any) -> float:
    return float(value) if value.__class__ in (int, float) else float("nan")


def _snapshot(row: Any) -> StoredSnapshot:
    position, format_, written_at, body = _values(row)
    return StoredSnapshot(position, _integer(format_), _time(written_at), _as_bytes(body))
