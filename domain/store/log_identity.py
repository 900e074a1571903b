"""Which log a store holds now, looked at in the round trip a worker's poll makes anyway.

A PostgreSQL schema can be dropped under a running scheduler, and the next open of its
URL makes a new, empty store there. A scheduler still folding the old log must see
it: the events table is gone (an error on every read), or it is another table (its
``oid`` changed), or, on any store, the log is shorter than the position the scheduler
folded. :func:`look` returns the head and the table's identity in one statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import LogReplaced, StoreError

if TYPE_CHECKING:
    from .store import Store


def look(store: Store) -> tuple[int, int | None]:
    """The log's head and, on PostgreSQL, its events table's ``oid`` (``None`` on
    SQLite); raises :class:`LogReplaced` when the table is gone, :class:`StoreError`
    when the store cannot be read now."""
    if store.location.kind != "postgresql":
        return store.head(), None
    recorder: Any = store.app.recorder
    table = recorder._table  # the quoted, schema-qualified name
    try:
        with recorder.datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(
                f"SELECT (SELECT max(notification_id) FROM {table}) AS head, "
                "to_regclass(%s)::oid::bigint AS oid",
                (table,),
                prepare=True,
            )
            row = cursor.fetchone()
    except Exception as error:  # the table gone, or the server away (eventsourcing wraps)
        if _gone(recorder, table):
            raise LogReplaced(
                f"the log of {store.location} is gone (its table was dropped)"
            ) from None
        raise StoreError(f"cannot read store {store.location}: {error}") from None
    return int(row["head"] or 0), int(row["oid"])


def _gone(recorder: Any, table: str) -> bool:
    """Whether the events table is missing (else the store is away: not known)."""
    try:
        with recorder.datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s) IS NULL AS gone", (table,))
            return bool(cursor.fetchone()["gone"])
    except Exception:  # the server away: not known
        return False


def replaced(store: Store, folded: int, identity: int | None, head: int, now: int | None) -> None:
    """Raise :class:`LogReplaced` when the log at ``head`` (table ``now``) is not the one a
    scheduler folded to position ``folded`` (table ``identity``)."""
    if identity is not None and now is not None and now != identity:
        raise LogReplaced(
            f"the log of {store.location} was replaced: its table was dropped and made "
            "again since this scheduler opened it"
        )
    if head < folded:
        raise LogReplaced(
            f"the log of {store.location} was replaced: its head is at position {head}, "
            f"and this scheduler had folded it to {folded}"
        )
