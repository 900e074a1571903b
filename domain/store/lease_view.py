"""The lease table as a reader sees it: :func:`read_leases` answers every worker's lease
from ``tasktrail_leases`` (:mod:`.leases`) without creating the table or writing
anything, so ``tasktrail workers`` may open a store read-only. A store no worker ever
ran on has no table: no lease.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from .leases import TABLE, Lease

if TYPE_CHECKING:
    from .store import Store


def read_leases(store: Store) -> dict[str, Lease]:
    """Every lease the store's table holds, by worker; ``{}`` when it has no table."""
    postgres = store.location.kind == "postgresql"
    # eventsourcing's recorders for SQLite and PostgreSQL both keep a datastore.
    datastore: Any = getattr(store.app.recorder, "datastore")  # noqa: B009
    schema = getattr(datastore, "schema", "") if postgres else ""
    table = f'"{schema}".{TABLE}' if schema else TABLE  # as :class:`.leases.Leases` names it
    try:
        with datastore.transaction(commit=False) as cursor:
            if postgres:
                cursor.execute("SELECT to_regclass(%s) IS NOT NULL AS present", (table,))
            else:
                cursor.execute(
                    "SELECT count(*) AS present FROM sqlite_master "
                    "WHERE type = 'table' AND name = ?",
                    (TABLE,),
                )
            (present,) = _values(cursor.fetchall()[0])
            if not present:
                return {}
            # SELECT *: a table an earlier release made has no liveness column.
            cursor.execute(f"SELECT * FROM {table}")
            rows = [_named(row) for row in cursor.fetchall()]
    except Exception as error:  # sqlite3 / psycopg errors: locked, gone
        raise StoreError(f"cannot read the lease table of {store.location}: {error}") from None
    leases = {}
    for row in rows:
        worker = row["worker"]
        leases[worker] = Lease(
            worker,
            row["expires_at"],
            row["renewed_at"],
            row["started_at"],
            row.get("liveness"),
        )
    return leases


def _named(row: Any) -> dict[str, Any]:
    """A row by column name: PostgreSQL's rows are dicts, SQLite's ``sqlite3.Row``."""
    return dict(row) if isinstance(row, dict) else dict(zip(row.keys(), tuple(row), strict=True))


def _values(row: Any) -> tuple[Any, ...]:
    """A row's values in column order: PostgreSQL's rows are dicts, SQLite's tuples."""
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)
