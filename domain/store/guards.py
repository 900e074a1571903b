"""Read guards: a decision that read a task it does not write is refused if that task
moved on. A decision's guards map each stream it read but does not write to the
version it read; both recorders (SQLite's and PostgreSQL's) run the SQL of
:func:`guard_sql` inside the append's transaction, after its INSERTs and under the
write lock, so a guard that trips breaks the (stream, version) key and the store's
own conflict handling rolls the whole append back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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
