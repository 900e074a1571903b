"""The SQLite recorder: eventsourcing's SQLite infrastructure, tuned for one store per
file. A factory (:class:`TunedSQLiteFactory`) that builds a datastore with one
connection behind a lock, connections with a real statement cache, WAL mode and the
store's synchronous level, and an application recorder with the fast paths: a
transaction's rows written with one ``executemany``, the read guards checked in the
same transaction, and rows read back as plain tuples.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    PersistenceError,
    ProgrammingError,
    StoredEvent,
)
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteApplicationRecorder,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteDatastore,
    SQLiteFactory,
    SQLiteTransaction,
)

from .guards import (
    APPENDED_SINCE,
    STAMPED_LATER,
    check_guards,
    depended_sql,
    guard_sql,
    later_stamp,
    unseen_sql,
)
from .transcoder import Row

STATEMENT_CACHE = 64


class _TunedSQLitePool(SQLiteConnectionPool):
    """eventsourcing's pool, with the synchronous level set on each connection."""

    synchronous = "FULL"
    read_only = False
    """Reading only: the journal mode is left as it is (setting WAL would write)."""

    def _create_connection(self) -> SQLiteConnection:
        # eventsourcing's own connection settings, but for the statement cache: it
        # passes cached_statements=True, a cache of one statement, so BEGIN and the
        # INSERT evict each other and every append prepares its INSERT again.
        try:
            conn = sqlite3.connect(
                database=self.db_name,
                uri=True,
                check_same_thread=False,
                isolation_level=None,
                cached_statements=STATEMENT_CACHE,
                timeout=self.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
            )
        except (sqlite3.Error, TypeError) as error:
            raise InterfaceError(error) from error
        if not self.read_only and not self.is_sqlite_memory_mode and not self.is_journal_mode_wal:
            # A new file gives back the pages an archive frees (issue 45: removal.py's
            # incremental_vacuum); a file with pages already is left exactly as it is.
            with contextlib.suppress(sqlite3.DatabaseError):  # a damaged file: said later
                if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
                    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            mode = conn.execute("PRAGMA journal_mode;").fetchone()[0]
            if mode.lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL;")
                self.journal_mode_was_changed_to_wal = True
            self.is_journal_mode_wal = True
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        return SQLiteConnection(sqlite_conn=conn, max_age=self.max_age)


class _LockedTransaction:
    """``with datastore.transaction(commit=...) as cursor``, as a class: eventsourcing's
    :class:`SQLiteTransaction` entered on the datastore's one connection under its lock
    (the library wraps the same in two generator context managers and a pool)."""

    __slots__ = ("commit", "cursor", "datastore", "transaction")

    def __init__(self, datastore: _OneConnectionDatastore, commit: bool) -> None:
        self.datastore = datastore
        self.transaction: SQLiteTransaction | None = None
        self.cursor: Any = None
        self.commit = commit

    def __enter__(self) -> Any:
        datastore = self.datastore
        datastore._lock.acquire()
        try:
            connection = datastore._connection or datastore._connect()
            self.transaction = SQLiteTransaction(connection, commit=self.commit)
            self.cursor = self.transaction.__enter__()
        except BaseException:
            datastore._lock.release()
            raise
        return self.cursor

    def __exit__(self, *exc: Any) -> None:
        try:
            assert self.transaction is not None
            self.transaction.__exit__(*exc)  # commits, or rolls back and raises
        finally:
            self.cursor.__exit__()
            self.datastore._lock.release()


class _OneConnectionDatastore(SQLiteDatastore):
    """eventsourcing's SQLite datastore with one connection per store, behind a lock.

    eventsourcing's pool hands out one of up to fifteen connections through
    semaphores, conditions and a writer lock on every transaction; a store's
    commands are serialized anyway (by the scheduler's lock, and by SQLite's one
    writer), so one connection, opened on first use, serves every transaction.
    """

    def __init__(self, pool: _TunedSQLitePool, single_row_tracking: bool, id_type: Any) -> None:
        super().__init__(pool.db_name, lock_timeout=pool.lock_timeout)
        self.pool.close()
        self.pool = pool
        self.single_row_tracking = single_row_tracking
        self.originator_id_type = id_type
        self._lock = threading.RLock()
        self._connection: SQLiteConnection | None = None

    def transaction(self, *, commit: bool) -> Any:
        """eventsourcing's transaction (BEGIN; COMMIT or ROLLBACK, its errors) on the one
        connection, holding the lock."""
        return _LockedTransaction(self, commit)

    @contextlib.contextmanager
    def get_connection(self, *, commit: bool) -> Iterator[SQLiteConnection]:
        with self._lock:
            yield self._connection or self._connect()

    def _connect(self) -> SQLiteConnection:
        self._connection = self.pool._create_connection()
        return self._connection

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
        self.pool.close()


class _BulkSQLiteApplicationRecorder(SQLiteApplicationRecorder):
    """eventsourcing's SQLite application recorder, writing a transaction's rows with one
    ``executemany`` (the library executes one INSERT per row to read each ``lastrowid``).

    The positions (notification ids, the rowids) of the rows just written are read
    back as ``max(rowid)`` inside the same write transaction: once the first INSERT
    holds SQLite's write lock no other writer can add a row, so the rows of one
    ``executemany`` take consecutive rowids ending there. Conflicts are the same
    unique-key violation, raised and rolled back by eventsourcing's transaction.
    """

    @property
    def _one(self) -> _OneConnectionDatastore:
        datastore = self.datastore
        assert isinstance(datastore, _OneConnectionDatastore)
        return datastore

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """eventsourcing's transaction (BEGIN; the rows; COMMIT, or ROLLBACK and its
        errors), run straight on the store's one connection: no wrapper objects."""
        datastore = self._one
        with datastore._lock:
            connection = datastore._connection or datastore._connect()
            conn = connection._sqlite_conn
            cursor = conn.cursor()
            try:
                cursor.execute("BEGIN")  # as eventsourcing's: an error here is not mapped
                try:
                    try:
                        positions = self._insert_events(cursor, stored_events, **kwargs)
                    except BaseException:
                        conn.rollback()
                        raise
                    conn.commit()
                except sqlite3.Error as error:
                    raise _persistence_error(error) from error
            finally:
                cursor.close()
            return positions

    def _insert_events(
        self, c: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        params = [
            (
                s.originator_id if s.originator_id.__class__ is str else _text_id(s.originator_id),
                s.originator_version,
                s.topic,
                s.state,
            )
            for s in stored_events
        ]
        if len(params) == 1:
            c.execute(self.insert_events_statement, params[0])
            positions = [c.lastrowid]
        else:
            c.executemany(self.insert_events_statement, params)
            c.execute(self.select_max_notification_id_statement)
            last: int = c.fetchone()[0]
            positions = list(range(last - len(stored_events) + 1, last + 1))
        check_guards(c, self.guard_statement, kwargs.get("guards"))
        later = later_stamp(
            c, self.depended_statement, kwargs.get("depended", ()), kwargs.get("earliest_at")
        )
        if later is not None:  # raised inside the transaction: it rolls back
            raise IntegrityError(f"{STAMPED_LATER} (at {later})")
        unseen = kwargs.get("unseen")
        if unseen is not None:
            # Under the write lock: rows between the decision's view and this append's.
            since, topics = unseen
            statement = unseen_sql(self.events_table_name, "rowid", "?", len(topics))
            c.execute(statement, (since, positions[0], *topics))
            if c.fetchone() is not None:
                raise IntegrityError(APPENDED_SINCE)
        head = self._head
        if head is not None:
            # Under the write lock no row is past ours (rolled back: fewer rows still).
            self._head = (head[0], head[1], max(head[2], positions[-1]))
        return positions

    @property
    def guard_statement(self) -> str:
        return guard_sql(self.events_table_name, "?")

    @property
    def depended_statement(self) -> str:
        return depended_sql(self.events_table_name, "?")

    def select_stream_rows(
        self, stream_id: str, after: int = 0
    ) -> list[tuple[int, int, str, bytes]]:
        """One stream's rows after version ``after``, by version: ``(position, version,
        topic, state)``."""
        rows: list[tuple[int, int, str, bytes]] = self._select(
            f"SELECT rowid, originator_version, topic, state FROM {self.events_table_name} "
            "WHERE originator_id = ? AND originator_version > ? ORDER BY originator_version",
            (stream_id, after),
        )
        return rows

    def select_rows(self, start: int, limit: int, stop: int | None = None) -> list[Row]:
        """Rows from position ``start`` (up to ``stop``) as plain tuples ``(position,
        originator_id, originator_version, topic, state)``: no ``Notification`` objects.

        Reading to the end of the log (no ``stop``) from past the last row this
        connection knows of reads nothing when no other connection committed since it
        learned that (SQLite's ``data_version``; this connection's own appends move the
        known head): a command's refresh then costs one pragma."""
        datastore = self._one
        with datastore._lock:
            connection = datastore._connection or datastore._connect()
            version: int | None = None
            if stop is None:
                version = self._data_version(connection)
                head = self._head
                if (
                    head is not None
                    and head[0] is connection
                    and head[1] == version
                    and start > head[2]
                ):
                    return []
                statement, params = self.select_rows_statement, [start, limit]
            else:
                statement, params = self.select_rows_until_statement, [start, stop, limit]
            rows: list[Row] = self._select(statement, params)
            if version is not None and len(rows) < limit:
                # Every row committed at ``version`` was seen: none is past this one.
                self._head = (connection, version, rows[-1][0] if rows else start - 1)
            return rows

    _head: tuple[Any, int, int] | None = None
    """``(connection, data_version, position)``: as of that data version of that
    connection (and its own appends since), the log holds no row past ``position``."""

    def _data_version(self, connection: Any) -> int:
        try:
            version: int = connection._sqlite_conn.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error as error:
            raise _persistence_error(error) from error
        return version

    def _select(self, statement: str, params: Sequence[Any]) -> Any:
        """One SELECT on the store's connection, under its lock, in autocommit: a single
        statement reads one consistent snapshot, so no BEGIN/ROLLBACK around it. Errors
        are eventsourcing's, as its transaction raises them."""
        datastore = self._one
        with datastore._lock:
            connection = datastore._connection or datastore._connect()
            cursor = connection._sqlite_conn.cursor()
            cursor.row_factory = None
            try:
                cursor.execute(statement, params)
                return cursor.fetchall()
            except sqlite3.Error as error:
                raise _persistence_error(error) from error
            finally:
                cursor.close()

    @property
    def select_rows_statement(self) -> str:
        return (
            f"SELECT rowid, originator_id, originator_version, topic, state "
            f"FROM {self.events_table_name} WHERE rowid>=? ORDER BY rowid LIMIT ?"
        )

    @property
    def select_rows_until_statement(self) -> str:
        return (
            f"SELECT rowid, originator_id, originator_version, topic, state "
            f"FROM {self.events_table_name} WHERE rowid>=? AND rowid<=? ORDER BY rowid LIMIT ?"
        )


_ERRORS: tuple[tuple[type[sqlite3.Error], type[PersistenceError]], ...] = (
    (sqlite3.InterfaceError, InterfaceError),
    (sqlite3.DataError, DataError),
    (sqlite3.OperationalError, OperationalError),
    (sqlite3.IntegrityError, IntegrityError),
    (sqlite3.InternalError, InternalError),
    (sqlite3.ProgrammingError, ProgrammingError),
    (sqlite3.NotSupportedError, NotSupportedError),
    (sqlite3.DatabaseError, DatabaseError),
)


def _persistence_error(error: sqlite3.Error) -> PersistenceError:
    """The eventsourcing error its SQLite transaction raises for ``error``."""
    for raw, ours in _ERRORS:
        if isinstance(error, raw):
            return ours(error)
    return PersistenceError(error)


def _text_id(originator_id: Any) -> Any:
    return originator_id.hex if isinstance(originator_id, UUID) else originator_id


class TunedSQLiteFactory(SQLiteFactory):
    application_recorder_class = _BulkSQLiteApplicationRecorder

    def __init__(self, env: Any, synchronous: str, *, read_only: bool = False) -> None:
        super().__init__(env)
        old = self.datastore
        pool = _TunedSQLitePool(db_name=old.pool.db_name, lock_timeout=old.pool.lock_timeout)
        pool.synchronous = synchronous
        pool.read_only = read_only
        old.close()
        self.datastore = _OneConnectionDatastore(
            pool, old.single_row_tracking, old.originator_id_type
        )
