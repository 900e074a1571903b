"""Where events are kept: one function opens a store from a path or a URL.

``open_store("trail.db")`` opens (or creates) a SQLite file in WAL mode, the default;
``open_store("postgresql://user@host:5432/db")`` a PostgreSQL database: eventsourcing
recorders, with tasktrail's orjson transcoder, stable topics and typed errors.
Durability (SQLite): ``"full"`` (the default) syncs the WAL on every commit (a power
cut), ``"normal"`` at checkpoints (a crash of the process). ``read_only=True`` creates
and writes nothing (:mod:`.files`). Every open reads the format marker (:mod:`.meta`), refusing a
newer one; a writer adds a missing one. Every append checks its events against the
stored limits (:mod:`..tasks.fields`), seals each with its digest chained to the previous
event of its stream (:mod:`.chain`), and, inside its transaction, checks that no event
its decision depended on is stamped later (:meth:`Store.stamp` clamps the scheduler's
clock to the latest time the store has read); then it tells the store's :mod:`.news`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from itertools import chain
from typing import Any, Literal, Protocol, cast

from eventsourcing.persistence import InfrastructureFactory, PersistenceError, RecordConflictError

from ..errors import ClockConflict, CorruptEvent, InvalidArgument, StoreError
from ..tasks.events import TaskEvent, event_problem
from .application import TaskApplication, close_quietly, describe
from .chain import Digester, Sealer
from .creation import creation_race
from .files import existing_companions, remove_read_leftovers
from .first_look import made_schema, open_problem, refuse_foreign_file
from .guards import depended_on, refusal, stamped_later_at, unknown_stamps
from .keys import KEY_ID_KEY, ChainKey, keyed_after, resolve_key, settle_key
from .location import NOTIFY_KEY, StoreLocation, parse_location, read_only_location
from .meta import MADE_BY_KEY, Meta, chained_after, store_format
from .news import News
from .prefetch import Prefetched
from .reading import READ_ACROSS
from .recorded import Recorded
from .sqlite import TunedSQLiteFactory
from .transcoder import Row, decode_event, encodable, printable_id, record_checked, row_problem
from .turns import WriterTurns
from .watchers import watch_for
from .wire import ROW_READERS

Durability = Literal["full", "normal"]
SQLITE_SYNCHRONOUS = {"full": "FULL", "normal": "NORMAL"}
READ_PAGE = 10_000
OPEN_ATTEMPTS = 3


class _RowSource(Protocol):
    def select_rows(self, start: int, limit: int, stop: int | None = None) -> list[Row]: ...


class Store:
    """An event store of tasks: append events atomically, read them back in order."""

    def __init__(
        self,
        location: StoreLocation,
        *,
        durability: Durability = "full",
        read_only: bool = False,
        chain_key: ChainKey | None = None,
    ) -> None:
        self.chain_key = resolve_key(chain_key)  # or $TASKTRAIL_CHAIN_KEY; never stored
        if not isinstance(durability, str) or durability not in SQLITE_SYNCHRONOUS:
            raise StoreError(f"durability must be 'full' or 'normal', not {durability!r}")
        if read_only or location.read_only:
            location = read_only_location(location)
        self.location = location
        self.durability = durability
        self.read_only = location.read_only
        self.latest_at: float = float("-inf")
        """The latest decision time this store has read or appended (see :meth:`stamp`)."""
        self.clamped = 0  # how many clock readings stamp() moved forward to latest_at
        self._sealer = Sealer(self._previous_row)
        self.kept_rows = Prefetched()
        """The rows of the last append, for the read after it (:mod:`.prefetch`)."""
        path = None if self.read_only else location.path
        refuse_foreign_file(path)  # before SQLite opens it to write: another app's file?
        self._turns = WriterTurns(path) if path is not None else None
        file = location.path if self.read_only else None
        self._companions = existing_companions(file) if file is not None else frozenset()
        self._open()
        self.news = News(watch_for(location, self.app.recorder))  # appends, here or not

    def _open(self) -> None:
        location = self.location
        for attempt in range(1, OPEN_ATTEMPTS + 1):
            try:
                factory: InfrastructureFactory[Any] | None = None
                if location.kind == "sqlite":
                    factory = TunedSQLiteFactory(
                        location.env,
                        SQLITE_SYNCHRONOUS[self.durability],
                        read_only=self.read_only,
                    )
                self.app = TaskApplication(location.env, factory)
                if location.env.get(NOTIFY_KEY):
                    self.app.recorder.notify = True  # type: ignore[attr-defined]
                # Reading the head proves the file is a database and the server answers.
                self.app.recorder.max_notification_id()
                self._read_marker()
                return
            except StoreError:
                self._release()
                raise
            except Exception as error:  # psycopg's pool raises its own types on connect
                self._release()
                retry = creation_race(error) or made_schema(location, error)
                if attempt < OPEN_ATTEMPTS and retry:
                    # Another process created the tables meanwhile, or the URL's schema is new.
                    time.sleep(0.05 * attempt)
                    continue
                why = open_problem(location, error)
                raise StoreError(f"cannot open store {location}: {why}") from None

    def _read_marker(self) -> None:
        """Read the format marker: refuse a newer format; a writer marks an unmarked store."""
        meta = Meta(self.app.recorder, self.kind)
        marker = meta.read()
        self.format = store_format(marker, str(self.location))
        if marker is None and not self.read_only:
            marker = meta.ensure()
            self.format = store_format(marker, str(self.location))
        where, key = str(self.location), self.chain_key
        self.marker = settle_key(dict(marker or {}), key, self.read_only, where, meta.key)
        self.chained_after = chained_after(marker)  # every event after it has a digest
        self.keyed_after = keyed_after(self.marker)  # digests after it keyed (None: unkeyed)
        self.key_id = self.marker.get(KEY_ID_KEY)
        self._sealer.digest = Digester(self.chain_key if self.key_id else None)

    def _why(self, error: BaseException) -> str:
        """Why a read or write failed (PostgreSQL's pool's time-out: the cause, asked)."""
        text = describe(error)
        if self.location.kind == "postgresql" and "couldn't get a connection" in text:
            from .postgres import connection_problem

            cause = connection_problem(self.location.env)
            return f"{text}: {cause}" if cause else text
        return text

    def turn(self, take: bool = True) -> AbstractContextManager[None]:
        """A command's turn among the processes writing this SQLite file (:mod:`.turns`)."""
        return self._turns.turn() if take and self._turns is not None else nullcontext()

    def _release(self) -> None:
        close_quietly(getattr(self, "_turns", None))
        close_quietly(getattr(self, "app", None))
        if self.location.path is not None and self.read_only:
            remove_read_leftovers(self.location.path, self._companions)

    def _previous_row(self, stream_id: str, version: int) -> bytes | None:
        """The stored state of one version of a stream (for its digest), or ``None``."""
        rows = self.stream_rows(stream_id, version - 1)
        return bytes(rows[0][3]) if rows and rows[0][1] == version else None

    def mark(self, key: str, value: str) -> None:
        """Write one key of the store's marker (``made_by``, say)."""
        Meta(self.app.recorder, self.kind).set(key, value)
        self.marker[key] = value

    @property
    def made_by(self) -> str | None:
        """The tool that made this store, if one marked it (``tasktrail demo``)."""
        return self.marker.get(MADE_BY_KEY)

    def stamp(self, reading: float) -> float:
        """The decision time for ``reading``: never before the latest time read (``clamped``)."""
        if reading < self.latest_at:
            self.clamped += 1
            return self.latest_at
        self.latest_at = reading
        return reading

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
        unseen: tuple[int, Collection[str]] | None = None,
        since: int | None = None,
    ) -> list[int]:
        """Append events atomically, each as version ``versions[i]`` of its task.

        ``guards`` maps streams the deciding command read but does not write to
        the version it read; ``unseen`` is ``(position, topics)`` for a decision
        that counted events of those topics in every stream, having folded the
        log up to ``position``. Returns the positions. If another writer appended
        any of these versions first, to a guarded stream or an event of a counted
        topic after ``position``, the decision was taken on stale state: raises
        :class:`ConflictError` and appends none. ``since``: see :mod:`.prefetch`.
        """
        if not events:
            return []
        for event in events:  # the same limits on every store, before anything is written
            problem = event_problem(event)
            if problem is not None:
                raise InvalidArgument(problem, task_id=printable_id(event.task_id))
        # The rows eventsourcing's mapper would store (TaskMapper's bytes exactly, sealed
        # with their digests), built directly: no envelope objects, no Recording and
        # Notification objects back.
        now = datetime.now(UTC)
        try:
            rows = self._sealer.seal(events, versions, now)
        except TypeError as error:  # a value orjson cannot encode: nothing was written
            raise InvalidArgument(f"an event holds a value that is not JSON: {error}") from None
        written = {row.originator_id for row in rows}
        read_guards = {k: v for k, v in (guards or {}).items() if k not in written}
        earliest = min(e.at for e in events)
        written_versions = [(str(r.originator_id), r.originator_version) for r in rows]
        depended = depended_on(written_versions, read_guards)
        try:
            counted = (unseen[0], sorted(unseen[1])) if unseen else None
            positions = self.app.recorder.insert_events(
                rows,
                guards=read_guards,
                earliest_at=earliest,
                depended=unknown_stamps(depended, earliest, self._sealer.heads),
                unseen=counted,
                since=since,
            )
        except (RecordConflictError, PersistenceError) as error:
            self.news.doubt()  # decided on a view another writer left stale: read first
            streams = sorted({e.stream_id() for e in events})
            conflict = refusal(error, streams, read_guards, describe(error))
            if isinstance(conflict, ClockConflict):
                # Decided again, stamped no earlier than the event it depended on.
                self.latest_at = max(self.latest_at, stamped_later_at(str(error)) or self.latest_at)
            if conflict is not None:
                raise conflict from None
            # locked out, read-only, corrupt, disconnected
            raise StoreError(f"cannot write to store {self.location}: {self._why(error)}") from None
        except TypeError as error:  # a value orjson cannot encode: nothing was written
            raise InvalidArgument(f"an event holds a value that is not JSON: {error}") from None
        assert positions is not None and len(positions) == len(rows)
        self._sealer.appended()
        others = getattr(self.app.recorder, "prefetched", None)
        self.kept_rows.keep(since, others, rows, positions)
        self.latest_at = max(self.latest_at, max(e.at for e in events))
        self.news.appended(positions[-1])  # this process's waiters wake at once
        return list(positions)

    def head(self) -> int:
        """The position of the last event (0 for an empty store)."""
        try:
            return self.app.recorder.max_notification_id() or 0
        except (PersistenceError, UnicodeError) as error:  # UnicodeError: a damaged file
            raise StoreError(f"cannot read store {self.location}: {self._why(error)}") from None

    def read(
        self,
        after: int = 0,
        *,
        until: int | None = None,
        skip: Callable[[CorruptEvent], None] | None = None,
        heads: bool = False,
    ) -> Iterator[Recorded]:
        """Every event after ``after`` (up to ``until``), in log order. A row that
        cannot be read raises :class:`CorruptEvent`; given ``skip``, it is handed the
        error instead and the row is left out (``replay(skip_invalid=True)``); ``heads``:
        keep each row's digest for this writer's chain (a scheduler's fold)."""
        latest, saw = self.latest_at, self._sealer.saw if heads else None
        try:
            for page in self._pages(after, until):
                for position, originator_id, version, topic, state in page:
                    # The topic's fast reader, else the checked path (it says what is
                    # wrong with a row, or upcasts an older event).
                    reader = ROW_READERS[topic]
                    recorded = reader(position, originator_id, version, state) if reader else None
                    if recorded is None:
                        try:
                            recorded = record_checked(
                                position, originator_id, version, topic, state
                            )
                        except CorruptEvent as error:
                            if skip is None:
                                raise
                            skip(error)
                            continue
                    if saw is not None:  # this writer's chain and time guard need not ask
                        saw(originator_id, version, state, recorded.event.at)
                    if recorded.event.at > latest:
                        latest = recorded.event.at
                    yield recorded
        finally:
            self.latest_at = max(self.latest_at, latest)

    def rows(self, after: int = 0, *, until: int | None = None) -> Iterator[Row]:
        """The stored rows after ``after`` (up to ``until``), in log order, undecoded."""
        return chain.from_iterable(self._pages(after, until))

    archive: Any = None  # reading across an archive: its segments' rows in place (.gaps)

    def _pages(self, after: int, until: int | None) -> Iterator[list[Row]]:
        # The last append's rows where they end the read (.prefetch), the rest selected.
        pages = self.kept_rows.pages(self._selected, after, until)
        return pages if self.archive is None else self.archive.merge(pages, after, until)

    def _selected(self, after: int, until: int | None) -> Iterator[list[Row]]:
        start = after + 1
        recorder = self.app.recorder
        # Both recorders (SQLite's, PostgreSQL's) give plain tuples straight from the cursor.
        select_rows = cast(_RowSource, recorder).select_rows
        while True:
            try:
                page: list[Row] = select_rows(start, READ_PAGE, until)
            except (PersistenceError, UnicodeError) as error:  # UnicodeError: a damaged file
                raise StoreError(
                    f"cannot read store {self.location} after position {start - 1}: "
                    f"{self._why(error)}"
                ) from None
            yield page
            if len(page) < READ_PAGE:
                return
            start = page[-1][0] + 1

    def stream(self, stream_id: str) -> list[TaskEvent]:
        """Every event of one stream (a task's, by its id), oldest first."""
        return [recorded.event for recorded in self.stream_records(stream_id)]

    def stream_records(self, stream_id: str, after: int = 0) -> list[Recorded]:
        """One stream's events after version ``after``, oldest first (a removed one: a gap)."""
        if not isinstance(stream_id, str) or not encodable(stream_id):
            return []  # not UTF-8: no store could have recorded such an id
        if "\x00" in stream_id and self.kind == "postgresql":
            return []  # PostgreSQL text cannot hold NUL: no such stream was recorded
        records = []
        for position, version, topic, state in self.stream_rows(stream_id, after):
            if (problem := row_problem(stream_id, version, topic, state)) is not None:
                raise CorruptEvent(position, problem)
            event = decode_event(topic, stream_id, state, position)
            records.append(Recorded(position, event, version))
        merged = records if self.archive is None else self.archive.stream(stream_id, records)
        return [r for r in merged if r.originator_version > after]

    def stream_rows(self, stream_id: str, after: int = 0) -> list[tuple[int, int, str, bytes]]:
        """A stream's rows after version ``after``, raw: (position, version, topic, state)."""
        try:
            return cast(Any, self.app.recorder).select_stream_rows(stream_id, after)  # type: ignore[no-any-return]
        except (PersistenceError, UnicodeError) as error:  # UnicodeError: a damaged file
            raise StoreError(f"cannot read store {self.location}: {self._why(error)}") from None

    def aggregate(self, stream_id: str) -> Any:
        """The eventsourcing aggregate of one stream (a :class:`Task` for a task id)."""
        return self.app.repository.get(stream_id)

    def close(self) -> None:
        """Release the store's connections (and a read-only open's ``-wal``/``-shm``)."""
        if hasattr(self, "news"):
            self.news.close()
        self._release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(
    location: str | os.PathLike[str],
    *,
    durability: Durability = "full",
    read_only: bool = False,
    chain_key: ChainKey | None = None,
    pool_size: int | None = None,
) -> Store:
    """Open (creating if needed) the store at a SQLite path or a ``postgresql://`` URL.

    ``read_only=True`` creates and writes nothing: the store must exist (a SQLite
    file, or a SQLite ``file:`` URI; ``mode=ro`` or ``immutable=1`` in a URI read
    only as well), and a SQLite file is left exactly as it was. ``chain_key`` (else
    ``$TASKTRAIL_CHAIN_KEY``) is a keyed store's key (:mod:`.keys`). ``pool_size``: the
    server connections a PostgreSQL store keeps (default 1, or the URL's ``pool_size``).
    """
    where = parse_location(location, pool_size=pool_size)
    store = Store(where, durability=durability, read_only=read_only, chain_key=chain_key)
    if store.read_only and (across := READ_ACROSS.get()) is not None:
        store.archive = across(store)  # under reading_archive(DIR): segments in place
    return store


__all__ = ["Durability", "Recorded", "Store", "open_store"]
