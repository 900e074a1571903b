"""Issue 45, item 4: a retention act holds the writers' turn only for its own
transaction. On SQLite its WAL frames (the deletes, the vacuum step) are copied back
into the file after the turn, by a passive checkpoint: left in the WAL, every fourth
act's commit paid SQLite's automatic checkpoint with the turn held (about 20 ms at a
million events). SQLite only: PostgreSQL has no WAL of the store's to copy back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helpers.retention_world import DAY, opened, record

from tasktrail.domain import ManualClock


def test_an_act_copies_its_wal_frames_back_after_the_turn_not_within_it(
    sqlite_url: str, clock: ManualClock, tmp_path: Path
) -> None:
    s = opened(sqlite_url, clock)
    record(s, clock, trees=12)
    clock.advance(2 * DAY)
    held = [False]
    said: list[tuple[str, bool]] = []  # each statement on the store's connection, turn held?
    turn = s.store.turn

    @contextlib.contextmanager
    def watched() -> Iterator[Any]:
        with turn() as taken:
            held[0] = True
            try:
                yield taken
            finally:
                held[0] = False

    s.store.turn = watched  # type: ignore[method-assign]
    datastore: Any = s.store.app.recorder.datastore
    connection = (datastore._connection or datastore._connect())._sqlite_conn
    connection.set_trace_callback(lambda sql: said.append((sql.strip(), held[0])))
    folder = tmp_path / "archive"
    folder.mkdir()
    try:
        report = s.archive(before=clock(), to=folder, batch=40)
    finally:
        connection.set_trace_callback(None)
        s.close()
    assert len(report.acts) > 1
    deletes = [n for n, (sql, _) in enumerate(said) if sql.upper().startswith("DELETE")]
    checkpoints = [n for n, (sql, _) in enumerate(said) if "wal_checkpoint(PASSIVE)" in sql]
    assert len(checkpoints) == len(report.acts)  # one an act, each after its delete
    assert all(any(d < c for d in deletes) for c in checkpoints)
    assert not any(held_then for sql, held_then in said if "wal_checkpoint" in sql)
    assert all(held_then for sql, held_then in said if sql.upper().startswith("DELETE"))
