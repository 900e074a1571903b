"""Read guards: a decision that read a task it does not write is refused if that task
moved on. A decision's guards map each stream it read but does not write to the
version it read; both recorders (SQLite's and PostgreSQL's) run the SQL of
:func:`guard_sql` inside the append's transaction, after its INSERTs and under the
write lock, so a guard that trips breaks the (stream, version) key and the store's
own conflict handling rolls the whole append back. The time guard
(:func:`later_stamp`; on PostgreSQL, :func:`.postgres.stamped_later_guard_sql`) runs
in the same transaction, under the same lock.

A decision that counted events of every stream (the daily cap counts every run minted
today) has no stream to guard: its *unseen* guard (:func:`unseen_sql`) refuses it if
an event of the classes it counted was appended after the log position its world had
folded, under the same lock, with :data:`APPENDED_SINCE`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson


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


STAMPED_LATER = "tasktrail: an event stamped later was appended first"
"""What the time guard raises (both stores), so the store can tell it from other conflicts."""
APPENDED_SINCE = "tasktrail: an event the decision counted was appended since it read the log"
"""What the unseen guard raises (both stores): the store reports it as a conflict."""


def unseen_sql(table: str, position: str, mark: str, topics: int) -> str:
    """A row of one of ``topics`` topics between two positions (exclusive): the unseen
    guard's query, run under the write lock. Its parameters: the position the decision's
    world had folded, the append's first position, then the topics."""
    marks = ", ".join([mark] * topics)
    return (
        f"SELECT 1 FROM {table} WHERE {position} > {mark} AND {position} < {mark} "
        f"AND topic IN ({marks}) LIMIT 1"
    )


def previous_at_sql(table: str, mark: str, position: str) -> str:
    """The stored state of the row just before a position (the time guard reads its ``at``)."""
    return f"SELECT state FROM {table} WHERE {position} < {mark} ORDER BY {position} DESC LIMIT 1"


def later_stamp(
    cursor: Any,
    statement: str,
    first_position: int,
    earliest_at: float | None,
    known: tuple[int, float] | None = None,
) -> float | None:
    """The time guard: run inside the append's transaction, under the write lock, it
    returns the ``at`` of the event just before the append when that is later than
    the append's earliest event (another writer, its clock ahead, appended first),
    else ``None``. Decision times then never run backwards within a store.

    ``known`` is the position and time of the last event the appending store read
    or wrote: when it is the event just before the append, nothing need be read."""
    if earliest_at is None:
        return None
    if known is not None and known[0] == first_position - 1 and known[1] <= earliest_at:
        return None
    cursor.execute(statement, (first_position,))
    row = cursor.fetchone()
    if row is None:
        return None
    state = row["state"] if isinstance(row, dict) else row[0]
    try:
        payload = orjson.loads(state)
    except orjson.JSONDecodeError:
        return None  # a damaged row is verify's to report, not this append's to refuse
    at = payload.get("at") if isinstance(payload, dict) else None
    if isinstance(at, int | float) and not isinstance(at, bool) and at > earliest_at:
        return float(at)
    return None
