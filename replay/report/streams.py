"""What a report of one task tree reads: the tree's own streams, with their positions.

A report of one task reads neither the whole log nor every task. The store keeps no
index of who owns whom, so one pass over its submit rows finds the owned tasks (the
rows of tasks without an owner are skipped in SQL, undecoded); the tree's run streams
are a key range each (SQLite) or the mint rows (PostgreSQL); then every stream of the
tree is read by its primary key. :class:`StoreStreams` asks a SQLite or PostgreSQL
store; :class:`LogStreams` walks a JSONL export (a file has no index: it is read once
per question, never held in memory).

Positions matter (the explain trail and ``--until`` name them), and
:meth:`Store.stream` gives none, so the reads here select the store's position column
(SQLite's rowid, PostgreSQL's ``notification_id``) beside each row.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import orjson

from tasktrail.domain import CorruptEvent, Store, StoreError
from tasktrail.domain.runs.identity import RUN_STREAM_PREFIX
from tasktrail.domain.store.store import Recorded
from tasktrail.domain.store.transcoder import decode_event, row_problem

from ..log import LogReader

SUBMITTED = "tasktrail.TaskSubmitted"
MINTED = "tasktrail.RunMinted"
NO_OWNER = '"owner_id":null'
BATCH = 500
"""Streams read in one statement."""


@dataclass
class Index:
    """Who owns whom, and which run streams each task has."""

    owner: dict[str, str | None] = field(default_factory=dict)
    """Each known task's owner (``None`` for a root), by task id."""
    children: dict[str, list[str]] = field(default_factory=dict)
    """The tasks each task owns, in the order they were submitted."""

    def add_task(self, task_id: str, owner_id: str | None) -> None:
        self.owner[task_id] = owner_id
        if owner_id is not None:
            self.children.setdefault(owner_id, []).append(task_id)

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str | None]]) -> Index:
        index = cls()
        for task_id, owner_id in pairs:
            index.add_task(task_id, owner_id)
        return index


class Streams(Protocol):
    """Where a report reads from."""

    def owned(self) -> list[tuple[str, str]]:
        """``(task, owner)`` of every task that has an owner, in submission order."""
        ...

    def tasks(self) -> list[tuple[str, str | None]]:
        """``(task, owner or None)`` of every task, in submission order."""
        ...

    def runs(self, task_ids: Iterable[str]) -> dict[str, list[str]]:
        """The run streams (``run:task|day|attempt``) of these tasks, in minting order."""
        ...

    def read(self, stream_ids: Iterable[str]) -> list[Recorded]:
        """Every event of these streams, in log order, with its position."""
        ...

    def head(self) -> int:
        """The last position of the log."""
        ...

    def positions(self, topics: Iterable[str]) -> list[int]:
        """The positions of every event of these topics, in log order."""
        ...


class StoreStreams:
    """The streams of a SQLite or PostgreSQL store, read by their primary key. A store
    read across an archive (``Store.archive``) has each stream's archived events in
    :meth:`read`'s answer; the scans (``owned``, ``tasks``, ``runs``, ``positions``)
    read its own rows only (a report across an archive walks the log instead:
    :class:`~.tree.AcrossStreams`)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.recorder = cast(Any, store.app.recorder)
        self.sqlite = store.kind == "sqlite"
        table = self.recorder.events_table_name
        if self.sqlite:
            self.table = _quoted(table)
        else:
            self.table = f"{_quoted(self.recorder.datastore.schema)}.{_quoted(table)}"
        self.position = "rowid" if self.sqlite else "notification_id"

    def head(self) -> int:
        return self.store.head()

    def owned(self) -> list[tuple[str, str]]:
        # A submit with no owner stores "owner_id":null (orjson, compact): the scan skips
        # those rows in SQL and decodes only the others (whatever their spelling).
        rows = self._select(
            f"SELECT originator_id, state FROM {self.table} WHERE topic = ? AND "
            + ("instr(state, CAST(? AS BLOB)) = 0" if self.sqlite else "position(? in state) = 0")
            + f" ORDER BY {self.position}",
            [SUBMITTED, NO_OWNER if self.sqlite else NO_OWNER.encode()],
        )
        found = []
        for task_id, state in rows:
            owner = _payload(state).get("owner_id")
            if isinstance(owner, str):
                found.append((str(task_id), owner))
        return found

    def tasks(self) -> list[tuple[str, str | None]]:
        rows = self._select(
            f"SELECT originator_id, state FROM {self.table} WHERE topic = ? "
            f"ORDER BY {self.position}",
            [SUBMITTED],
        )
        found: list[tuple[str, str | None]] = []
        for task_id, state in rows:
            owner = _payload(state).get("owner_id")
            found.append((str(task_id), owner if isinstance(owner, str) else None))
        return found

    def runs(self, task_ids: Iterable[str]) -> dict[str, list[str]]:
        wanted = sorted(set(task_ids))
        found: dict[str, list[str]] = {}
        if self.sqlite:
            # Each task's run streams are one range of the primary key: run:TASK| .. run:TASK}
            for start in range(0, len(wanted), BATCH // 2):
                some = wanted[start : start + BATCH // 2]
                ranges = " OR ".join("(originator_id >= ? AND originator_id < ?)" for _ in some)
                params = [MINTED]
                for task_id in some:
                    params += [f"{RUN_STREAM_PREFIX}{task_id}|", f"{RUN_STREAM_PREFIX}{task_id}}}"]
                rows = self._select(
                    f"SELECT originator_id, NULL FROM {self.table} WHERE topic = ? AND "
                    f"({ranges}) ORDER BY rowid",
                    params,
                )
                for stream_id, _ in rows:
                    _add_run(found, str(stream_id), set(some))
            return found
        # PostgreSQL: its collation may not order the key byte-wise; read the mints.
        rows = self._select(
            f"SELECT originator_id, state FROM {self.table} WHERE topic = ? "
            f"ORDER BY notification_id",
            [MINTED],
        )
        members = set(wanted)
        for stream_id, state in rows:
            if _payload(state).get("task_id") in members:
                _add_run(found, str(stream_id), members)
        return found

    def positions(self, topics: Iterable[str]) -> list[int]:
        wanted = sorted(set(topics))
        if not wanted:
            return []
        rows = self._select(
            f"SELECT {self.position}, NULL FROM {self.table} "
            f"WHERE topic IN ({', '.join('?' for _ in wanted)}) ORDER BY {self.position}",
            wanted,
        )
        return [int(position) for position, _ in rows]

    def read(self, stream_ids: Iterable[str]) -> list[Recorded]:
        wanted = sorted(set(stream_ids))
        found: list[Recorded] = []
        for start in range(0, len(wanted), BATCH):
            some = wanted[start : start + BATCH]
            rows = self._select(
                f"SELECT {self.position}, originator_id, originator_version, topic, state "
                f"FROM {self.table} WHERE originator_id IN ({', '.join('?' for _ in some)})",
                some,
            )
            for position, originator_id, version, topic, state in rows:
                problem = row_problem(originator_id, version, topic, state)
                if problem is not None:  # a column of the wrong type: edited by hand
                    raise CorruptEvent(position, problem)
                event = decode_event(topic, originator_id, state, position)
                found.append(Recorded(position, event, version))
        if self.store.archive is not None:  # read across an archive: its events in place
            found += [r for sid in wanted for r in self.store.archive.stream(sid, [])]
        found.sort(key=lambda recorded: recorded.position)
        return found

    def _select(self, statement: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """Rows of one read-only statement (written with ``?`` marks)."""
        try:
            if self.sqlite:
                with self.recorder.datastore.transaction(commit=False) as c:
                    cursor = c.sqlite_cursor
                    cursor.row_factory = None
                    cursor.execute(statement, params)
                    rows: list[tuple[Any, ...]] = cursor.fetchall()
                    return rows
            with self.recorder.datastore.get_connection() as conn, conn.cursor() as curs:
                curs.execute(statement.replace("?", "%s"), params)
                return [tuple(row.values()) for row in curs.fetchall()]
        except Exception as error:  # the driver's own errors: name the store
            text = str(error).strip().splitlines()
            raise StoreError(
                f"cannot read store {self.store.location}: {text[0] if text else error!r}"
            ) from None


class LogStreams:
    """The streams of a JSONL export: the file is walked again for each question (a
    file has no index), keeping only the answer."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._head = 0

    def head(self) -> int:
        return self._head

    def owned(self) -> list[tuple[str, str]]:
        return [(task, owner) for task, owner in self.tasks() if owner is not None]

    def tasks(self) -> list[tuple[str, str | None]]:
        return [
            (r.event.task_id, getattr(r.event, "owner_id", None))
            for r in self._records()
            if type(r.event).topic == SUBMITTED
        ]

    def runs(self, task_ids: Iterable[str]) -> dict[str, list[str]]:
        members = set(task_ids)
        found: dict[str, list[str]] = {}
        for recorded in self._records():
            if type(recorded.event).topic == MINTED and recorded.event.task_id in members:
                found.setdefault(recorded.event.task_id, []).append(recorded.event.stream_id())
        return found

    def read(self, stream_ids: Iterable[str]) -> list[Recorded]:
        wanted = set(stream_ids)
        return [r for r in self._records() if r.event.stream_id() in wanted]

    def positions(self, topics: Iterable[str]) -> list[int]:
        wanted = set(topics)
        return [r.position for r in self._records() if type(r.event).topic in wanted]

    def _records(self) -> Iterator[Recorded]:
        for recorded in LogReader(self.path):
            self._head = max(self._head, recorded.position)
            yield recorded


def _add_run(found: dict[str, list[str]], stream_id: str, members: set[str]) -> None:
    # run:TASK|DAY|ATTEMPT; a task id may itself hold "|", its day and attempt do not.
    task_id = stream_id.removeprefix(RUN_STREAM_PREFIX).rsplit("|", 2)[0]
    if task_id in members:
        found.setdefault(task_id, []).append(stream_id)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _payload(state: Any) -> dict[str, Any]:
    if not isinstance(state, bytes | bytearray | memoryview | str):
        return {}  # reading its stream in full raises CorruptEvent with its position
    if isinstance(state, str):
        state = state.encode("utf-8", "surrogateescape")
    try:
        payload = orjson.loads(bytes(state))
    except orjson.JSONDecodeError:
        payload = None
    # A row that is not an object cannot tell its owner here; reading its stream in
    # full raises CorruptEvent with its position.
    return payload if isinstance(payload, dict) else {}


__all__ = ["Index", "LogStreams", "StoreStreams", "Streams"]
