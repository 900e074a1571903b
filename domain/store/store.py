"""Where events are kept: one function opens a store from a path or a URL.

``open_store("trail.db")`` opens (or creates) a SQLite file in WAL mode, the
default; ``open_store("postgresql://user@host:5432/db")`` a PostgreSQL
database. Both are eventsourcing recorders behind an eventsourcing
``Application``; tasktrail adds an orjson transcoder, a mapper that stores each
event under its stable topic, and typed errors.

Durability (SQLite): ``"full"`` (the default) syncs the WAL on every commit, so
a command that returned survives a power cut. ``"normal"`` syncs only at
checkpoints: still safe against a crash of the process, but a power cut or OS
crash may lose the last commits. PostgreSQL is always synchronous.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit
from uuid import UUID

import orjson
from eventsourcing.application import Application
from eventsourcing.persistence import (
    InfrastructureFactory,
    InterfaceError,
    Mapper,
    PersistenceError,
    RecordConflictError,
    StoredEvent,
    Transcoder,
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

from ..errors import (
    ConflictError,
    CorruptEvent,
    InvalidArgument,
    NewerEventVersion,
    StoreError,
    UnknownEventTopic,
)
from ..tasks.events import EVENT_TYPES, TaskEvent, TaskSubmitted, event_from_payload, event_payload
from .aggregate import envelope

Durability = Literal["full", "normal"]
SQLITE_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}
READ_PAGE = 10_000
STATEMENT_CACHE = 64
Row = tuple[int, str, int, str, bytes]
"""A stored row: position, originator id, originator version, topic, state."""
OPEN_ATTEMPTS = 3
POSTGRES_CREATION_RACES = frozenset({"23505", "42P07", "42710", "XX000"})
"""unique_violation, duplicate_table, duplicate_object, internal_error: what
concurrent ``CREATE ... IF NOT EXISTS`` on a fresh PostgreSQL schema raise."""


class OrjsonTranscoder(Transcoder):
    """JSON with orjson: compact, fast, and stable bytes for the same data."""

    def encode(self, obj: Any) -> bytes:
        return orjson.dumps(obj)

    def decode(self, data: bytes) -> Any:
        return orjson.loads(data)


def decode_event(
    topic: str, originator_id: str, state: bytes, position: int | None = None
) -> TaskEvent:
    """Rebuild the tasktrail event of one stored row; errors name the position."""
    if not isinstance(topic, str):
        raise CorruptEvent(position, f"a row of task {originator_id} has no topic")
    if topic not in EVENT_TYPES:
        raise UnknownEventTopic(position, topic)
    try:
        payload = orjson.loads(state)
    except orjson.JSONDecodeError as error:
        raise CorruptEvent(
            position, f"{topic} of task {originator_id}: not JSON ({error})"
        ) from None
    return decode_payload(topic, originator_id, payload, position)


def decode_payload(
    topic: str, originator_id: str, payload: Any, position: int | None = None
) -> TaskEvent:
    """Rebuild an event from its decoded stored fields, upcasting an event an earlier
    version recorded (``upcast_vN_vM``)."""
    cls = EVENT_TYPES.get(topic)
    if cls is None:
        raise UnknownEventTopic(position, topic)
    if not isinstance(payload, dict):
        raise CorruptEvent(position, f"{topic} of task {originator_id}: payload is not an object")
    payload.pop("timestamp", None)
    from_version = payload.pop("class_version", 1)
    if isinstance(from_version, bool) or not isinstance(from_version, int) or from_version < 1:
        raise CorruptEvent(
            position, f"{topic} of task {originator_id}: class_version {from_version!r}"
        )
    if from_version > cls.class_version:
        raise NewerEventVersion(position, topic, from_version, cls.class_version)
    try:
        while from_version < cls.class_version:
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(payload)
            from_version += 1
        return event_from_payload(cls, originator_id, payload)
    except (TypeError, KeyError, ValueError) as error:
        raise CorruptEvent(position, f"{topic} of task {originator_id}: {error}") from None


def encode_event(event: TaskEvent, timestamp: datetime) -> bytes:
    """The stored bytes of one event: its fields, the recording time, its class version."""
    payload = event_payload(event)
    payload["timestamp"] = timestamp
    if type(event).class_version > 1:
        payload["class_version"] = type(event).class_version
    return orjson.dumps(payload)


class TaskMapper(Mapper[str]):
    """Stores each tasktrail event under its own topic, in orjson."""

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        fact: TaskEvent = domain_event.fact
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=type(fact).topic,
            state=encode_event(fact, domain_event.timestamp),
        )

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        originator_id = str(stored_event.originator_id)
        fact = decode_event(stored_event.topic, originator_id, stored_event.state)
        timestamp = datetime.fromisoformat(orjson.loads(stored_event.state)["timestamp"])
        return envelope(fact, stored_event.originator_version, timestamp)


class _TunedSQLitePool(SQLiteConnectionPool):
    """eventsourcing's pool, with the synchronous level set on each connection."""

    synchronous = "FULL"

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
        if not self.is_sqlite_memory_mode and not self.is_journal_mode_wal:
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

    def _insert_events(
        self, c: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        params = [
            (_text_id(s.originator_id), s.originator_version, s.topic, s.state)
            for s in stored_events
        ]
        if len(params) == 1:
            c.execute(self.insert_events_statement, params[0])
            position = c.lastrowid
            check_guards(c, self.guard_statement, kwargs.get("guards"))
            return [position]
        c.executemany(self.insert_events_statement, params)
        c.execute(self.select_max_notification_id_statement)
        last: int = c.fetchone()[0]
        check_guards(c, self.guard_statement, kwargs.get("guards"))
        return list(range(last - len(stored_events) + 1, last + 1))

    @property
    def guard_statement(self) -> str:
        return guard_sql(self.events_table_name, "?")

    def select_rows(self, start: int, limit: int, stop: int | None = None) -> list[Row]:
        """Rows from position ``start`` (up to ``stop``) as plain tuples ``(position,
        originator_id, originator_version, topic, state)``: no ``Notification`` objects."""
        statement = self.select_rows_statement
        params: tuple[int, ...] = (start, limit)
        if stop is not None:
            statement = self.select_rows_until_statement
            params = (start, stop, limit)
        with self.datastore.transaction(commit=False) as c:
            cursor = c.sqlite_cursor
            cursor.row_factory = None
            cursor.execute(statement, params)
            rows: list[Row] = cursor.fetchall()
            return rows

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


def guard_sql(table: str, mark: str) -> str:
    # Copy the event that follows the version a decision read: if another writer
    # appended it, the copy breaks the (stream, version) key, and the store's own
    # conflict handling rolls the whole append back. Run after the append's
    # INSERTs, it sees every committed row: the write lock is held by then
    # (SQLite's, or the EXCLUSIVE table lock eventsourcing takes on PostgreSQL).
    columns = "originator_id, originator_version, topic, state"
    return (
        f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {table} "
        f"WHERE originator_id = {mark} AND originator_version = {mark}"
    )


def check_guards(cursor: Any, statement: str, guards: Mapping[str, int] | None) -> None:
    """Run a decision's read guards in the append's transaction (see :func:`guard_sql`)."""
    if guards:
        cursor.executemany(statement, [(stream, version + 1) for stream, version in guards.items()])


def _text_id(originator_id: Any) -> Any:
    return originator_id.hex if isinstance(originator_id, UUID) else originator_id


class _TunedSQLiteFactory(SQLiteFactory):
    application_recorder_class = _BulkSQLiteApplicationRecorder

    def __init__(self, env: Any, synchronous: str) -> None:
        super().__init__(env)
        old = self.datastore
        pool = _TunedSQLitePool(db_name=old.pool.db_name, lock_timeout=old.pool.lock_timeout)
        pool.synchronous = synchronous
        old.close()
        self.datastore = _OneConnectionDatastore(
            pool, old.single_row_tracking, old.originator_id_type
        )


class TaskApplication(Application[str]):
    """The eventsourcing application that holds task streams."""

    name = "tasktrail"

    def __init__(
        self, env: dict[str, str], factory: InfrastructureFactory[Any] | None = None
    ) -> None:
        self._prebuilt_factory = factory
        try:
            super().__init__(env)
        except BaseException:
            # Half built: release its connections now, not whenever it is collected
            # (a psycopg pool closed from its own worker thread cannot join it).
            _close_quietly(getattr(self, "factory", None))
            raise

    def construct_factory(self, env: Any) -> InfrastructureFactory[Any]:
        if self._prebuilt_factory is not None:
            return self._prebuilt_factory
        return super().construct_factory(env)

    def construct_mapper(self) -> Mapper[str]:
        return TaskMapper(transcoder=OrjsonTranscoder())


@dataclass(frozen=True)
class StoreLocation:
    """Where a store is: ``kind`` ``sqlite`` (with a file path) or ``postgresql``."""

    kind: Literal["sqlite", "postgresql"]
    target: str
    env: dict[str, str]

    def __str__(self) -> str:
        return self.target


def parse_location(location: str | os.PathLike[str]) -> StoreLocation:
    """Turn a path or a ``postgresql://`` URL into the settings of a store."""
    text = os.fspath(location) if isinstance(location, str | os.PathLike) else None
    if not isinstance(text, str) or not text.strip():
        raise StoreError("a store location must be a file path or a postgresql:// URL")
    if text.startswith(("postgresql://", "postgres://")):
        try:
            parts = urlsplit(text)
        except ValueError as error:  # the text is not shown: it may hold a password
            raise StoreError(f"a postgresql:// URL that cannot be parsed: {error}") from None
        dbname = unquote(parts.path.lstrip("/"))
        if not dbname or "/" in dbname:
            raise StoreError(
                f"{_redact(text)}: the URL must name one database, as postgresql://host/dbname"
            )
        try:
            port = parts.port or 5432
        except ValueError:
            raise StoreError(f"{_redact(text)}: the port is not a number") from None
        query = parse_qs(parts.query)
        env = {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": dbname,
            "POSTGRES_HOST": parts.hostname or "127.0.0.1",
            "POSTGRES_PORT": str(port),
            "POSTGRES_USER": unquote(parts.username or "postgres"),
            "POSTGRES_PASSWORD": unquote(parts.password or ""),
            "POSTGRES_CONNECT_TIMEOUT": query.get("connect_timeout", ["5"])[0],
            "ORIGINATOR_ID_TYPE": "text",
            # Imported only when a PostgreSQL store is opened.
            "APPLICATION_RECORDER_TOPIC": "tasktrail.domain.store.postgres:GuardedPostgresRecorder",
        }
        if "schema" in query:
            env["POSTGRES_SCHEMA"] = query["schema"][0]
        return StoreLocation("postgresql", _redact(text), env)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise StoreError(
            f"unsupported store URL scheme {scheme!r}: use a SQLite file path or postgresql://"
        )
    path = Path(text).expanduser()
    if path.is_dir():
        raise StoreError(f"{path}: is a directory; give a file path for a SQLite store")
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "SQLITE_DBNAME": str(path),
        "SQLITE_LOCK_TIMEOUT": "30",
        "ORIGINATOR_ID_TYPE": "text",
    }
    return StoreLocation("sqlite", str(path), env)


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return parts._replace(netloc=netloc).geturl()
    return url


@dataclass(frozen=True, slots=True)
class Recorded:
    """One event read back from a store, with its position in the store's log."""

    position: int
    event: TaskEvent
    originator_version: int


class Store:
    """An event store of tasks: append events atomically, read them back in order."""

    def __init__(self, location: StoreLocation, *, durability: Durability = "full") -> None:
        if not isinstance(durability, str) or durability not in SQLITE_SYNCHRONOUS:
            raise StoreError(f"durability must be 'full' or 'normal', not {durability!r}")
        self.location = location
        self.durability = durability
        for attempt in range(1, OPEN_ATTEMPTS + 1):
            try:
                factory: InfrastructureFactory[Any] | None = None
                if location.kind == "sqlite":
                    factory = _TunedSQLiteFactory(location.env, SQLITE_SYNCHRONOUS[durability])
                self.app = TaskApplication(location.env, factory)
                # Reading the head proves the file is a database and the server answers.
                self.app.recorder.max_notification_id()
                return
            except StoreError:
                raise
            except Exception as error:  # psycopg's pool raises its own types on connect
                _close_quietly(getattr(self, "app", None))
                if attempt < OPEN_ATTEMPTS and _creation_race(error):
                    # Another process created the tables at the same moment; they are there now.
                    time.sleep(0.05 * attempt)
                    continue
                raise StoreError(f"cannot open store {location}: {_describe(error)}") from None

    @property
    def kind(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.location.kind

    def append(
        self,
        events: Sequence[TaskEvent],
        versions: Sequence[int],
        *,
        guards: Mapping[str, int] | None = None,
    ) -> list[int]:
        """Append events atomically, each as version ``versions[i]`` of its task.

        ``guards`` maps streams the deciding command read but does not write to
        the version it read: if another writer appended to one of them since,
        the decision was taken on stale state. Returns the positions. If
        another writer appended any of these versions first, or to a guarded
        stream, raises :class:`ConflictError` and appends none.
        """
        if not events:
            return []
        # The rows eventsourcing's mapper would store (TaskMapper's bytes exactly), built
        # directly: no envelope objects, no Recording and Notification objects back.
        now = datetime.now(UTC)
        try:
            rows = [
                StoredEvent(e.stream_id(), v, type(e).topic, encode_event(e, now))
                for e, v in zip(events, versions, strict=True)
            ]
        except TypeError as error:  # a value orjson cannot encode: nothing was written
            raise InvalidArgument(f"an event holds a value that is not JSON: {error}") from None
        try:
            written = {row.originator_id for row in rows}
            read_guards = {k: v for k, v in (guards or {}).items() if k not in written}
            positions = self.app.recorder.insert_events(rows, guards=read_guards)
        except RecordConflictError as error:
            streams = sorted({e.stream_id() for e in events})
            raise ConflictError(streams, _describe(error)) from None
        except PersistenceError as error:  # locked out, read-only, corrupt, disconnected
            raise StoreError(f"cannot write to store {self.location}: {_describe(error)}") from None
        except TypeError as error:  # a value orjson cannot encode: nothing was written
            raise InvalidArgument(f"an event holds a value that is not JSON: {error}") from None
        assert positions is not None and len(positions) == len(rows)
        return list(positions)

    def head(self) -> int:
        """The position of the last event (0 for an empty store)."""
        try:
            return self.app.recorder.max_notification_id() or 0
        except PersistenceError as error:
            raise StoreError(f"cannot read store {self.location}: {_describe(error)}") from None

    def read(self, after: int = 0, *, until: int | None = None) -> Iterator[Recorded]:
        """Every event after position ``after`` (up to ``until``), in log order."""
        for position, originator_id, version, topic, state in self.rows(after, until=until):
            event = decode_event(topic, originator_id, state, position)
            yield Recorded(position, event, version)

    def rows(self, after: int = 0, *, until: int | None = None) -> Iterator[Row]:
        """The stored rows after position ``after`` (up to ``until``), in log order, as
        ``(position, originator_id, originator_version, topic, state)``, undecoded."""
        start = after + 1
        recorder = self.app.recorder
        select_rows = getattr(recorder, "select_rows", None)
        while True:
            try:
                if select_rows is not None:  # SQLite: plain tuples straight from the cursor
                    page: list[Row] = select_rows(start, READ_PAGE, until)
                else:
                    page = [
                        (n.id, str(n.originator_id), n.originator_version, n.topic, n.state)
                        for n in recorder.select_notifications(
                            start=start, limit=READ_PAGE, stop=until
                        )
                    ]
            except PersistenceError as error:
                raise StoreError(
                    f"cannot read store {self.location} after position {start - 1}: "
                    f"{_describe(error)}"
                ) from None
            yield from page
            if len(page) < READ_PAGE:
                return
            start = page[-1][0] + 1

    def stream(self, stream_id: str) -> list[TaskEvent]:
        """Every event of one stream (a task's, by its id), oldest first."""
        try:
            stored = self.app.recorder.select_events(stream_id)
        except PersistenceError as error:
            raise StoreError(f"cannot read store {self.location}: {_describe(error)}") from None
        return [decode_event(s.topic, stream_id, s.state) for s in stored]

    def aggregate(self, stream_id: str) -> Any:
        """The eventsourcing aggregate of one stream (a :class:`Task` for a task id)."""
        return self.app.repository.get(stream_id)

    def close(self) -> None:
        """Release the store's connections."""
        self.app.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(location: str | os.PathLike[str], *, durability: Durability = "full") -> Store:
    """Open (creating if needed) the store at a SQLite path or a ``postgresql://`` URL."""
    return Store(parse_location(location), durability=durability)


def _creation_race(error: BaseException) -> bool:
    """Whether opening failed because another process created the same tables at once
    (PostgreSQL: a unique or duplicate error in its catalog, "tuple concurrently updated")."""
    seen: BaseException | None = error
    while seen is not None:
        if getattr(seen, "sqlstate", None) in POSTGRES_CREATION_RACES:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _close_quietly(resource: Any) -> None:
    """Close an application or factory that failed to open; its own errors do not matter."""
    if resource is not None:
        # Already broken: the error that matters is the one being raised.
        with contextlib.suppress(Exception):
            resource.close()


def _describe(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


__all__ = [
    "Durability",
    "OrjsonTranscoder",
    "Recorded",
    "Store",
    "StoreLocation",
    "TaskSubmitted",
    "decode_event",
    "decode_payload",
    "encode_event",
    "open_store",
    "parse_location",
]
