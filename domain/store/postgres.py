"""eventsourcing's PostgreSQL application recorder, with tasktrail's read guards.

Kept apart so that only a PostgreSQL store imports the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder

from .guards import check_guards, guard_sql, later_stamp, previous_at_sql, stamped_later_sql


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
        table = self._table
        check_guards(curs, guard_sql(table, "%s"), kwargs.get("guards"))
        if ids:
            statement = previous_at_sql(table, "%s", "notification_id")
            earliest, known = kwargs.get("earliest_at"), kwargs.get("known")
            if later_stamp(curs, statement, min(ids), earliest, known) is not None:
                # A Python exception here would be kept aside while the transaction
                # commits (eventsourcing's pipeline): PostgreSQL itself must fail it.
                curs.execute(stamped_later_sql())
        return ids

    @property
    def _table(self) -> str:
        table = f'"{self.events_table_name}"'
        if self.datastore.schema:
            table = f'"{self.datastore.schema}".{table}'
        return table

    def select_stream_rows(self, stream_id: str) -> list[tuple[int, int, str, bytes]]:
        """One stream's rows, by version: ``(position, version, topic, state)``."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                f"SELECT notification_id, originator_version, topic, state FROM {self._table} "
                "WHERE originator_id = %s ORDER BY originator_version",
                (stream_id,),
            )
            return [
                (r["notification_id"], r["originator_version"], r["topic"], bytes(r["state"]))
                for r in curs.fetchall()
            ]


def connection_problem(env: dict[str, str]) -> str | None:
    """Why PostgreSQL refuses a connection, in the server's or the network's words (the
    connection pool only says it timed out): one direct attempt, same settings."""
    import psycopg

    try:
        timeout = max(1, int(float(env.get("POSTGRES_CONNECT_TIMEOUT", "5"))))
    except ValueError:
        timeout = 5
    try:
        with psycopg.connect(
            dbname=env.get("POSTGRES_DBNAME"),
            host=env.get("POSTGRES_HOST"),
            port=env.get("POSTGRES_PORT"),
            user=env.get("POSTGRES_USER"),
            password=env.get("POSTGRES_PASSWORD") or None,
            connect_timeout=timeout,
        ) as connection:
            connection.execute("SELECT 1")
    except Exception as error:  # psycopg's errors, DNS, sockets: the cause, in its words
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        return "; ".join(lines[:2]) or type(error).__name__
    return None
