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

This module is the :class:`Store` facade and :func:`open_store`; beside it are
:mod:`.location` (parsing a path or URL), :mod:`.transcoder` (events to stored
bytes and back), :mod:`.sqlite` (the tuned SQLite recorder), :mod:`.postgres`
(the PostgreSQL recorder) and :mod:`.guards` (read guards, shared by both).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from eventsourcing.application import Application
from eventsourcing.persistence import (
    InfrastructureFactory,
    Mapper,
    PersistenceError,
    RecordConflictError,
    StoredEvent,
)

from ..errors import ConflictError, InvalidArgument, StoreError
from ..tasks.events import TaskEvent
from .location import StoreLocation, parse_location
from .sqlite import TunedSQLiteFactory
from .transcoder import OrjsonTranscoder, Row, TaskMapper, decode_event, encode_event

Durability = Literal["full", "normal"]
SQLITE_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}
READ_PAGE = 10_000
OPEN_ATTEMPTS = 3
POSTGRES_CREATION_RACES = frozenset({"23505", "42P07", "42710", "XX000"})
"""unique_violation, duplicate_table, duplicate_object, internal_error: what
concurrent ``CREATE ... IF NOT EXISTS`` on a fresh PostgreSQL schema raise."""


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
                    factory = TunedSQLiteFactory(location.env, SQLITE_SYNCHRONOUS[durability])
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
    "Recorded",
    "Store",
    "open_store",
]
