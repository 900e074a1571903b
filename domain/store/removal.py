"""A history act's one transaction (the Retention issue): the act's event appended and
the rows it takes deleted (an archive, a prune) or rewritten (an erasure) together, so
a crash leaves the store as it was or as the act left it, never between.

The act's event is sealed into its stream's chain like any append (:mod:`.chain`);
the transaction takes the writers' turn (SQLite: the store's write lock, then
``BEGIN IMMEDIATE``; PostgreSQL: the EXCLUSIVE lock every append takes), inserts it
(a second act decided on the same version of the history stream breaks its key:
:class:`~..errors.ConflictError`, nothing done), deletes the positions in ranges and
checks that exactly the rows counted went, rewrites erased rows by position and drops
the snapshots an erasure's span holds: one piece of code (:class:`_Rows`) in either
store's SQL.
``crash`` is called at each step (the kill tests' hook).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import ConflictError, StoreError
from ..tasks.events import TaskEvent

if TYPE_CHECKING:
    from .store import Store

SNAPSHOTS = "tasktrail_snapshots"  # history/table.py's (the store room does not import it)
Ranges = Sequence[tuple[int, int]]
"""Positions as inclusive ``(first, last)`` ranges, in order."""


def record_act(
    store: Store,
    events: Sequence[TaskEvent],
    versions: Sequence[int],
    *,
    delete: Ranges = (),
    count: int = 0,
    rewrite: Sequence[tuple[int, bytes]] = (),
    snapshots: tuple[int, int] | None = None,
    crash: Callable[[str], None] | None = None,
) -> list[int]:
    """Append ``events`` (as ``versions`` of their streams), delete the ``count`` rows of
    the ``delete`` ranges, set the stored state of each ``rewrite`` position and drop the
    snapshots at positions within ``snapshots`` (they may hold what was erased), in one
    transaction; the positions of the events."""
    rows = store._sealer.seal(events, versions, datetime.now(UTC))
    params = [(r.originator_id, r.originator_version, r.topic, r.state) for r in rows]
    recorder: Any = store.app.recorder
    step = crash or (lambda _: None)
    try:
        if store.kind == "sqlite":
            with store.turn():
                positions = _sqlite(recorder, params, delete, count, rewrite, snapshots, step)
            if delete:
                _copy_back(recorder)
            recorder._head = None  # its own commit: the known head moved without a version
        else:
            positions = _postgres(recorder, params, delete, count, rewrite, snapshots, step)
    except (sqlite3.IntegrityError, _UniqueViolation()) as error:
        raise ConflictError(sorted({str(r.originator_id) for r in rows}), str(error)) from None
    except (sqlite3.Error, _PostgresError()) as error:
        raise StoreError(f"cannot write to store {store.location}: {error}") from None
    store._sealer.appended()
    store.news.signal()
    step("committed")
    return positions


def _sqlite(
    recorder: Any,
    params: list[tuple[Any, ...]],
    delete: Ranges,
    count: int,
    rewrite: Sequence[tuple[int, bytes]],
    snapshots: tuple[int, int] | None,
    step: Callable[[str], None],
) -> list[int]:
    table = recorder.events_table_name
    datastore = recorder.datastore
    with datastore._lock:
        connection = datastore._connection or datastore._connect()
        conn = connection._sqlite_conn
        cursor = conn.cursor()
        if rewrite:  # erased values: their old bytes zeroed in the file, not left free
            cursor.execute("PRAGMA secure_delete = ON")
        try:
            cursor.execute("BEGIN IMMEDIATE")
            try:
                positions = []
                for param in params:
                    cursor.execute(recorder.insert_events_statement, param)
                    positions.append(int(cursor.lastrowid))
                step("appended")
                held = (
                    snapshots is not None
                    and cursor.execute(
                        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (SNAPSHOTS,),
                    ).fetchone()
                )
                rows = _Rows(table, "rowid", "?", SNAPSHOTS if held else None)
                rows.take(cursor, delete, count, rewrite, snapshots)
                step("deleted")
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
            if delete:
                _give_back(cursor)
            if rewrite:  # and out of the WAL: its frames copied back, the file truncated
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            if rewrite:
                cursor.execute("PRAGMA secure_delete = OFF")
            cursor.close()
    return positions


@dataclass(frozen=True)
class _Rows:
    """What an act does to the rows it takes, in either store's SQL: the event table,
    its position column, the parameter mark, and the snapshot table (``None``: none)."""

    table: str
    position: str
    mark: str
    snapshots: str | None

    def take(
        self,
        cursor: Any,
        delete: Ranges,
        count: int,
        rewrite: Sequence[tuple[int, bytes]],
        snapshots: tuple[int, int] | None,
    ) -> None:
        """Delete the ``delete`` ranges (exactly ``count`` rows, else nothing is done),
        set each ``rewrite`` row's state, and drop the snapshots within ``snapshots``."""
        table, at, mark = self.table, self.position, self.mark
        gone = 0
        for first, last in delete:
            cursor.execute(
                f"DELETE FROM {table} WHERE {at} BETWEEN {mark} AND {mark}", (first, last)
            )
            gone += cursor.rowcount
        if gone != count:
            raise StoreError(f"{gone} rows to delete, {count} expected: nothing done")
        for position, state in rewrite:
            cursor.execute(
                f"UPDATE {table} SET state = {mark} WHERE {at} = {mark}", (state, position)
            )
        if snapshots is not None and self.snapshots is not None:
            cursor.execute(
                f"DELETE FROM {self.snapshots} WHERE position BETWEEN {mark} AND {mark}", snapshots
            )


VACUUM_PAGES = 4096
"""Pages (16 MiB at 4 KiB) one incremental vacuum gives back, a transaction each."""


def _give_back(cursor: Any) -> None:
    """The pages an act freed, given back to the file system (a file made with
    ``auto_vacuum = INCREMENTAL``, as every store since issue 45), a bounded step at a
    time so no step holds the write lock long. A file made before: ``tasktrail archive
    --vacuum`` converts it once (docs/scaling.md)."""
    if cursor.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:
        return
    free = cursor.execute("PRAGMA freelist_count").fetchone()[0]
    for _ in range(-(-free // VACUUM_PAGES)):
        # As a script: stepped to its end (a plain execute frees one page a call), and
        # one transaction a step, one fsync, not one a page.
        cursor.executescript(f"BEGIN IMMEDIATE; PRAGMA incremental_vacuum({VACUUM_PAGES}); COMMIT;")


def _copy_back(recorder: Any) -> None:
    """The WAL frames an act wrote (its deletes, its vacuum step: a few hundred pages)
    copied back into the file now, outside the writers' turn (a passive checkpoint
    waits for no writer and holds none back): left in the WAL, they made every fourth
    act's commit, or a worker's, pay SQLite's automatic checkpoint, about 20 ms with
    the turn held."""
    datastore = recorder.datastore
    with datastore._lock, contextlib.suppress(sqlite3.Error):  # the act is committed: a
        # checkpoint that could not run now leaves them to SQLite's own, as before
        connection = datastore._connection or datastore._connect()
        connection._sqlite_conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def vacuum(store: Store) -> tuple[int, int]:
    """Give a store's free pages back to the file system once: SQLite converts a file
    made before issue 45 to ``auto_vacuum = INCREMENTAL`` (a ``VACUUM``: the whole file
    rewritten, the writers' turn held throughout); PostgreSQL runs ``VACUUM`` on the
    table (its space reused, not returned: docs/scaling.md). The file's bytes (or
    the table's) before and after."""
    recorder: Any = store.app.recorder
    if store.kind != "sqlite":
        table = recorder._table
        size = f"SELECT pg_total_relation_size('{table}')"
        with recorder.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(size + " AS bytes")
            before = int(curs.fetchone()["bytes"])
            curs.execute(f"VACUUM {table}")
            curs.execute(size + " AS bytes")
            return before, int(curs.fetchone()["bytes"])
    datastore = recorder.datastore
    with store.turn(), datastore._lock:
        conn = (datastore._connection or datastore._connect())._sqlite_conn
        pages = conn.execute("PRAGMA page_size").fetchone()[0]
        before = conn.execute("PRAGMA page_count").fetchone()[0] * pages
        conn.executescript("PRAGMA auto_vacuum = INCREMENTAL; VACUUM;")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return before, conn.execute("PRAGMA page_count").fetchone()[0] * pages


def _postgres(
    recorder: Any,
    params: list[tuple[Any, ...]],
    delete: Ranges,
    count: int,
    rewrite: Sequence[tuple[int, bytes]],
    snapshots: tuple[int, int] | None,
    step: Callable[[str], None],
) -> list[int]:
    table = recorder._table
    with recorder.datastore.get_connection() as conn, conn.cursor() as curs:
        try:
            curs.execute("BEGIN")
            for statement in recorder.lock_table_statements:
                curs.execute(statement)
            if recorder.notify:
                recorder._notify_channel(curs)
            positions = []
            for param in params:
                curs.execute(
                    f"INSERT INTO {table} (originator_id, originator_version, topic, state) "
                    "VALUES (%s, %s, %s, %s) RETURNING notification_id",
                    param,
                )
                positions.append(int(curs.fetchone()["notification_id"]))
            step("appended")
            held: str | None = f'"{recorder.datastore.schema}".{SNAPSHOTS}'
            if snapshots is not None:
                curs.execute("SELECT to_regclass(%s) IS NOT NULL AS present", (held,))
                held = held if curs.fetchone()["present"] else None
            rows = _Rows(table, "notification_id", "%s", held)
            rows.take(curs, delete, count, rewrite, snapshots)
            step("deleted")
            curs.execute("COMMIT")
        except BaseException:
            if conn.info.transaction_status != 0:  # not idle: end it before the pool has it
                conn.execute("ROLLBACK")
            raise
    return positions


def _UniqueViolation() -> type[BaseException]:
    try:
        import psycopg

        return psycopg.errors.UniqueViolation
    except ImportError:  # no PostgreSQL driver: no such error either
        return sqlite3.IntegrityError


def _PostgresError() -> type[BaseException]:
    try:
        import psycopg

        return psycopg.Error
    except ImportError:
        return sqlite3.Error


__all__ = ["Ranges", "record_act", "vacuum"]
