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

import os
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

import orjson
from eventsourcing.application import Application
from eventsourcing.persistence import (
    InfrastructureFactory,
    Mapper,
    OperationalError,
    PersistenceError,
    RecordConflictError,
    StoredEvent,
    Transcoder,
)
from eventsourcing.sqlite import SQLiteConnection, SQLiteConnectionPool, SQLiteFactory

from .aggregate import envelope
from .errors import ConflictError, CorruptEvent, InvalidArgument, StoreError, UnknownEventTopic
from .events import EVENT_TYPES, TaskEvent, TaskSubmitted, event_from_payload, event_payload

Durability = Literal["full", "normal"]
SQLITE_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}
READ_PAGE = 10_000


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
    """Rebuild an event from its decoded stored fields, upcasting older class versions."""
    cls = EVENT_TYPES.get(topic)
    if cls is None:
        raise UnknownEventTopic(position, topic)
    if not isinstance(payload, dict):
        raise CorruptEvent(position, f"{topic} of task {originator_id}: payload is not an object")
    payload.pop("timestamp", None)
    from_version = payload.pop("class_version", 1)
    while from_version < cls.class_version:
        getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(payload)
        from_version += 1
    try:
        return event_from_payload(cls, originator_id, payload)
    except TypeError as error:
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
        connection = super()._create_connection()
        connection._sqlite_conn.execute(f"PRAGMA synchronous={self.synchronous}")
        return connection


class _TunedSQLiteFactory(SQLiteFactory):
    def __init__(self, env: Any, synchronous: str) -> None:
        super().__init__(env)
        old = self.datastore.pool
        pool = _TunedSQLitePool(db_name=old.db_name, lock_timeout=old.lock_timeout)
        pool.synchronous = synchronous
        old.close()
        self.datastore.pool = pool


class TaskApplication(Application[str]):
    """The eventsourcing application that holds task streams."""

    name = "tasktrail"

    def __init__(
        self, env: dict[str, str], factory: InfrastructureFactory[Any] | None = None
    ) -> None:
        self._prebuilt_factory = factory
        super().__init__(env)

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
    text = os.fspath(location)
    if not isinstance(text, str) or not text.strip():
        raise StoreError("a store location must be a file path or a postgresql:// URL")
    if text.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(text)
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
        if durability not in SQLITE_SYNCHRONOUS:
            raise StoreError(f"durability must be 'full' or 'normal', not {durability!r}")
        self.location = location
        self.durability = durability
        try:
            factory: InfrastructureFactory[Any] | None = None
            if location.kind == "sqlite":
                factory = _TunedSQLiteFactory(location.env, SQLITE_SYNCHRONOUS[durability])
            self.app = TaskApplication(location.env, factory)
            # Reading the head proves the file is a database and the server answers.
            self.app.recorder.max_notification_id()
        except StoreError:
            raise
        except (PersistenceError, sqlite3.Error, OSError) as error:
            raise StoreError(f"cannot open store {location}: {_describe(error)}") from None
        except Exception as error:  # psycopg's pool raises its own types on connect
            raise StoreError(f"cannot open store {location}: {_describe(error)}") from None

    @property
    def kind(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.location.kind

    def append(self, events: Sequence[TaskEvent], versions: Sequence[int]) -> list[int]:
        """Append events atomically, each as version ``versions[i]`` of its task.

        Returns their positions. If another writer appended any of these
        versions first, raises :class:`ConflictError` and appends none.
        """
        if not events:
            return []
        now = datetime.now(UTC)
        envelopes = [envelope(e, v, now) for e, v in zip(events, versions, strict=True)]
        try:
            recordings = self.app.save(*envelopes)
        except RecordConflictError as error:
            streams = sorted({e.stream_id() for e in events})
            raise ConflictError(streams, _describe(error)) from None
        except OperationalError as error:
            raise StoreError(f"cannot write to store {self.location}: {_describe(error)}") from None
        except TypeError as error:  # a value orjson cannot encode: nothing was written
            raise InvalidArgument(f"an event holds a value that is not JSON: {error}") from None
        return [r.notification.id for r in recordings]

    def head(self) -> int:
        """The position of the last event (0 for an empty store)."""
        return self.app.recorder.max_notification_id() or 0

    def read(self, after: int = 0, *, until: int | None = None) -> Iterator[Recorded]:
        """Every event after position ``after`` (up to ``until``), in log order."""
        start = after + 1
        while True:
            page = self.app.recorder.select_notifications(start=start, limit=READ_PAGE, stop=until)
            for notification in page:
                event = decode_event(
                    notification.topic,
                    str(notification.originator_id),
                    notification.state,
                    notification.id,
                )
                yield Recorded(notification.id, event, notification.originator_version)
            if len(page) < READ_PAGE:
                return
            start = page[-1].id + 1

    def stream(self, stream_id: str) -> list[TaskEvent]:
        """Every event of one stream (a task's, by its id), oldest first."""
        stored = self.app.recorder.select_events(stream_id)
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
