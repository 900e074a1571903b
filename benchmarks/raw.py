"""The physical limits: plain sqlite3 and orjson doing the same work with nothing around it."""

from __future__ import annotations

import time
from pathlib import Path

import orjson

from .workload import Row, closing_sqlite

EVENTS_TABLE = (
    "CREATE TABLE IF NOT EXISTS stored_events (originator_id TEXT, originator_version INTEGER, "
    "topic TEXT, state BLOB, PRIMARY KEY (originator_id, originator_version))"
)
"""eventsourcing's application table: a rowid table whose primary key is the unique
``(originator_id, originator_version)`` index an event table needs."""
BARE_TABLE = (
    "CREATE TABLE IF NOT EXISTS stored_events (originator_id TEXT, originator_version INTEGER, "
    "topic TEXT, state BLOB)"
)
INSERT = "INSERT INTO stored_events VALUES (?,?,?,?)"


def _prepare(path: Path, synchronous: str, table: str) -> None:
    with closing_sqlite(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(table)


def commit_per_row(
    path: Path, rows: list[Row], synchronous: str, groups: list[int] | None = None
) -> float:
    """Seconds to insert ``rows`` one transaction each (WAL, ``PRAGMA synchronous``), or,
    given ``groups``, one transaction per group of that many consecutive rows (the rows
    each command wrote; a group of 0 commits nothing)."""
    _prepare(path, synchronous, EVENTS_TABLE)
    with closing_sqlite(path) as conn:
        conn.execute(f"PRAGMA synchronous={synchronous}")
        execute = conn.execute
        if groups is None:
            groups = [1] * len(rows)
        started = time.perf_counter()
        at = 0
        for size in groups:
            if not size:
                continue
            execute("BEGIN")
            for row in rows[at : at + size]:
                execute(INSERT, row)
            execute("COMMIT")
            at += size
        return time.perf_counter() - started


def executemany(path: Path, rows: list[Row], synchronous: str, *, unique: bool = True) -> float:
    """Seconds to insert ``rows`` with one ``executemany`` in one transaction."""
    _prepare(path, synchronous, EVENTS_TABLE if unique else BARE_TABLE)
    with closing_sqlite(path) as conn:
        conn.execute(f"PRAGMA synchronous={synchronous}")
        started = time.perf_counter()
        conn.execute("BEGIN")
        conn.executemany(INSERT, rows)
        conn.execute("COMMIT")
        return time.perf_counter() - started


def fetch_decode(path: Path) -> tuple[float, int]:
    """Seconds to fetch every row of a store in log order and ``orjson.loads`` its state."""
    loads = orjson.loads
    with closing_sqlite(path) as conn:
        started = time.perf_counter()
        count = 0
        cursor = conn.execute(
            "SELECT rowid, originator_id, originator_version, topic, state "
            "FROM stored_events ORDER BY rowid"
        )
        while True:
            page = cursor.fetchmany(10_000)
            if not page:
                break
            for row in page:
                loads(row[4])
            count += len(page)
        return time.perf_counter() - started, count


def jsonl_loads(path: Path) -> tuple[float, int]:
    """Seconds to read a JSONL file and ``orjson.loads`` every line."""
    loads = orjson.loads
    started = time.perf_counter()
    count = 0
    with path.open("rb") as lines:
        for line in lines:
            loads(line)
            count += 1
    return time.perf_counter() - started, count
