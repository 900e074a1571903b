"""Read guards: a decision that read a task it does not write is refused if that task
moved on. A decision's guards map each stream it read but does not write to the
version it read; both recorders (SQLite's and PostgreSQL's) run the SQL of
:func:`guard_sql` inside the append's transaction, after its INSERTs and under the
write lock, so a guard that trips breaks the (stream, version) key and the store's
own conflict handling rolls the whole append back. The time guard
(:func:`later_stamp`; on PostgreSQL, in the append function) runs in the same
transaction: it compares the append's time with the events its decision depended on
(:func:`depended_on`), not with whichever event another writer appended last, so a
writer that waited for the lock is not refused for having waited. It asks only of the
events the store does not know to be stamped no later than the append
(:func:`unknown_stamps`): a process that appended or folded what it depends on asks
nothing, and SQLite's query and decode a stream, under the write lock, go.

A decision that counted events of every stream (the daily cap counts every run minted
today) has no stream to guard: its *unseen* guard (:func:`unseen_sql`) refuses it if
an event of the classes it counted was appended after the log position its world had
folded, under the same lock, with :data:`APPENDED_SINCE`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson
from eventsourcing.persistence import RecordConflictError

from ..errors import ClockConflict, ConflictError

if TYPE_CHECKING:
    from .chain import Head


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


STAMPED_LATER = "tasktrail: an event the decision depended on is stamped later"
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


def depended_sql(table: str, mark: str) -> str:
    """The stored state of one version of one stream (the time guard reads its ``at``)."""
    return f"SELECT state FROM {table} WHERE originator_id = {mark} AND originator_version = {mark}"


def depended_on(
    written: Sequence[tuple[str, int]], guards: Mapping[str, int] | None
) -> list[tuple[str, int]]:
    """The stored events an append's decision depended on, as ``(stream, version)``:
    the version before the first one it writes of each stream, and each version a read
    guard names. The time guard compares their ``at`` with the append's."""
    first: dict[str, int] = {}
    for stream, version in written:
        if version < first.get(stream, version + 1):
            first[stream] = version
    depended = [(stream, version - 1) for stream, version in first.items() if version > 1]
    return depended + [(stream, version) for stream, version in (guards or {}).items() if version]


def unknown_stamps(
    depended: list[tuple[str, int]], earliest_at: float, heads: Mapping[str, Head]
) -> list[tuple[str, int]]:
    """The events of ``depended`` the time guard must still read back: those the
    store's ``heads`` (each stream's latest event it appended or folded, as ``(version,
    digest, at)``: :attr:`.chain.Sealer.heads`) do not show stamped no later than
    ``earliest_at``. A row never changes under its ``(stream, version)`` key, so an
    event known so cannot trip the guard."""
    return [
        (stream, version)
        for stream, version in depended
        if (head := heads.get(stream)) is None or head[0] != version or not head[2] <= earliest_at
    ]


def later_stamp(
    cursor: Any, statement: str, depended: Sequence[tuple[str, int]], earliest_at: float | None
) -> float | None:
    """The time guard: run inside the append's transaction, it returns the latest ``at``
    of the events the decision depended on (:func:`depended_on`) when that is later than
    the append's earliest event, else ``None``. A decision is stamped no earlier than
    every event it folded (``Store.stamp``), so this trips only when a stamp was not
    clamped (a process that never read that event): times then never run backwards
    along any stream, nor from an event to a decision that read it."""
    if earliest_at is None:
        return None
    later = None
    for stream, version in depended:
        cursor.execute(statement, (stream, version))
        row = cursor.fetchone()
        if row is None:
            continue
        state = row["state"] if isinstance(row, dict) else row[0]
        try:
            payload = orjson.loads(state)
        except orjson.JSONDecodeError:
            continue  # a damaged row is verify's to report, not this append's to refuse
        at = payload.get("at") if isinstance(payload, dict) else None
        if isinstance(at, int | float) and not isinstance(at, bool) and at > earliest_at:
            later = max(at, later or at)
    return None if later is None else float(later)


def refusal(
    error: Exception, streams: list[str], read_guards: Mapping[str, int], described: str
) -> ConflictError | None:
    """The conflict an append's refusal (``error``, ``described``) stands for: a
    :class:`ClockConflict` when the time guard tripped, a :class:`ConflictError` naming
    the stream that moved (PostgreSQL names it; else every stream the decision wrote,
    ``streams``, or read); ``None`` when it is no conflict (locked out, read-only, ...)."""
    text = str(error)
    if STAMPED_LATER in text:
        return ClockConflict(streams, described)
    if APPENDED_SINCE in text:
        return ConflictError(streams, APPENDED_SINCE.removeprefix("tasktrail: "))
    if isinstance(error, RecordConflictError):
        moved = moved_stream(text)
        return ConflictError([moved] if moved else sorted({*streams, *read_guards}), described)
    return None


def stamped_later_at(message: str) -> float | None:
    """The later time a time guard's refusal names (``... (at 1767603600000.0)``)."""
    found = re.search(r"\(at (-?[0-9.eE+-]+)\)", message)
    try:
        return float(found.group(1)) if found else None
    except ValueError:
        return None


_MOVED_KEY = re.compile(
    r"Key \(originator_id, originator_version\)=\((.*), (\d+)\) already exists", re.S
)


def moved_stream(message: str) -> str | None:
    """The stream whose key an append broke, when the store's error names it
    (PostgreSQL's ``DETAIL: Key (originator_id, originator_version)=(id, 2) ...``): a
    stream another writer appended to first, written or read (a guard's copy)."""
    found = _MOVED_KEY.search(message)
    return found.group(1) if found else None
