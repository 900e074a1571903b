"""The command path's shortcuts read what the long way reads.

* A refresh of a SQLite store reads nothing while no other connection committed since
  it last read to the end of the log (``data_version``): every read still returns
  exactly the rows a fresh ``SELECT`` returns, whoever appended them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition
from tasktrail.domain.store.store import Store


def _registry() -> Registry:
    return Registry([TaskDefinition("job", 1, {"go": lambda t: None})])


def _fresh_rows(path: Path, after: int) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
            "WHERE rowid > ? ORDER BY rowid",
            (after,),
        ).fetchall()
    return [tuple(row) for row in rows]


def _rows(store: Store, after: int) -> list[tuple[object, ...]]:
    return [tuple(row) for row in store.rows(after)]


def test_every_read_returns_what_a_fresh_select_does(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    clock = ManualClock(1_000)
    first = Scheduler.open(path, clock=clock, registry=_registry(), durability="normal")
    second = Scheduler.open(path, clock=clock, registry=_registry(), durability="normal")
    try:
        for n in range(6):
            writer, reader = (first, second) if n % 2 else (second, first)
            task = writer.submit("job", id=f"t{n}")
            # The reader's log: the writer's new rows, then nothing past the end.
            for scheduler in (reader, writer):
                for after in range(max(0, scheduler.position - 3), scheduler.position + 2):
                    assert _rows(scheduler.store, after) == _fresh_rows(path, after)
            assert reader.task(task).events == 1  # the refresh folded it in
            reader.reserve(task)
            assert writer.task(task).status == "running"
            assert _rows(writer.store, writer.position) == _fresh_rows(path, writer.position)
            clock.advance(1)
        # A third connection, with nothing of tasktrail's, appends a copy of a row.
        with sqlite3.connect(path) as conn:
            conn.execute(
                "INSERT INTO stored_events SELECT originator_id, originator_version + 100, "
                "topic, state FROM stored_events WHERE rowid = 1"
            )
        head = _fresh_rows(path, 0)[-1][0]
        for scheduler in (first, second):
            assert _rows(scheduler.store, head - 1) == _fresh_rows(path, head - 1)
            assert _rows(scheduler.store, head) == []
        with sqlite3.connect(path) as conn:  # gone again before a refresh folds it
            conn.execute("DELETE FROM stored_events WHERE rowid = ?", (head,))
        for scheduler in (first, second):
            assert _rows(scheduler.store, head - 1) == _fresh_rows(path, head - 1)
    finally:
        first.close()
        second.close()
