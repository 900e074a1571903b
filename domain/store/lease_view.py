"""The lease table as a reader sees it: :func:`read_leases` answers every worker's lease
from ``tasktrail_leases`` (:mod:`.leases`) without creating the table or writing
anything, so ``tasktrail workers`` may open a store read-only. A store no worker ever
ran on has no table: no lease.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from .leases import TABLE, Lease, Leases, leases_read, row_values

if TYPE_CHECKING:
    from .store import Store


def read_leases(store: Store) -> dict[str, Lease]:
    """Every lease the store's table holds, by worker; ``{}`` when it has no table."""
    postgres = store.location.kind == "postgresql"
    # eventsourcing's recorders for SQLite and PostgreSQL both keep a datastore.
    datastore: Any = getattr(store.app.recorder, "datastore")  # noqa: B009
    table = Leases(store).table
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
            (present,) = row_values(cursor.fetchall()[0])
            if not present:
                return {}
            return leases_read(cursor, table)
    except Exception as error:  # sqlite3 / psycopg errors: locked, gone
        raise StoreError(f"cannot read the lease table of {store.location}: {error}") from None
