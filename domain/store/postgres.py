"""eventsourcing's PostgreSQL application recorder, with tasktrail's read guards.

Kept apart so that only a PostgreSQL store imports the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder

from .guards import check_guards, guard_sql


class GuardedPostgresRecorder(PostgresApplicationRecorder):
    """Checks a decision's read guards inside the append's transaction, once
    eventsourcing's EXCLUSIVE table lock is held (no other writer can append)."""

    def _fetch_ids_after_insert_events(
        self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        # After the INSERT's ids are read (the guards reuse the cursor), still
        # inside the transaction and the lock; a guard that trips raises the
        # unique-key violation eventsourcing turns into a rollback and a conflict.
        ids = super()._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
        table = f'"{self.events_table_name}"'
        if self.datastore.schema:
            table = f'"{self.datastore.schema}".{table}'
        check_guards(curs, guard_sql(table, "%s"), kwargs.get("guards"))
        return ids
