"""The ``event_log`` view: the store's events as a person (or Datasette) reads them.

eventsourcing's events table keeps an event as an opaque ``state`` BLOB and its log
position as the hidden rowid (SQLite) or ``notification_id`` (PostgreSQL), so a
browser of the table sees ``<Binary>`` download links and no order. The view shows
one row per event: ``position``, ``stream``, ``version``, ``type`` (the topic without
its ``tasktrail.`` prefix), ``at`` (the scheduler time as ISO-8601 UTC text) and
``event`` (the stored JSON as text). It adds nothing to the log and costs nothing to
keep: SQL over the same rows.

Writers create it (``Scheduler.open``, ``import_log``); read commands never do, as
they never write. A store a writer cannot change (a read-only file) simply goes
without it.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import Store

EVENT_VIEW = "event_log"
TOPIC_PREFIX = "tasktrail."


def _sqlite_view(table: str) -> str:
    body = "CAST(state AS TEXT)"  # SQLite's JSON functions refuse a BLOB
    return (
        f"CREATE VIEW IF NOT EXISTS {EVENT_VIEW} AS SELECT rowid AS position, "
        "originator_id AS stream, originator_version AS version, "
        f"CASE WHEN topic LIKE '{TOPIC_PREFIX}%' THEN substr(topic, {len(TOPIC_PREFIX) + 1}) "
        "ELSE topic END AS type, "
        "strftime('%Y-%m-%dT%H:%M:%fZ', "
        f"json_extract({body}, '$.at') / 1000.0, 'unixepoch') AS at, "
        f"{body} AS event FROM {table}"
    )


def _postgres_view(schema: str, table: str) -> str:
    body = "convert_from(state, 'UTF8')"
    return (
        f'CREATE VIEW "{schema}".{EVENT_VIEW} AS SELECT notification_id AS position, '
        "originator_id AS stream, originator_version AS version, "
        f"CASE WHEN topic LIKE '{TOPIC_PREFIX}%' THEN substr(topic, {len(TOPIC_PREFIX) + 1}) "
        "ELSE topic END AS type, "
        f"to_char(to_timestamp(({body}::jsonb->>'at')::double precision / 1000.0) "
        "AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS at, "
        f'{body} AS event FROM "{schema}"."{table}"'
    )


def ensure_event_view(store: Store) -> bool:
    """Create the ``event_log`` view in ``store`` if it is missing; returns whether the
    view is there now. Never raises: a store this process may not change (read-only,
    or another writer creating the view at the same moment) keeps working without it."""
    recorder: Any = store.app.recorder
    datastore: Any = getattr(recorder, "datastore", None)
    table = getattr(recorder, "events_table_name", None)
    if datastore is None or not isinstance(table, str):
        return False
    postgres = store.location.kind == "postgresql"
    # The view is a convenience for people reading the store: failing to create it must
    # never stop a scheduler from opening, so any database error leaves it out.
    with contextlib.suppress(Exception):
        with datastore.transaction(commit=False) as cursor:
            if postgres:
                cursor.execute(
                    "SELECT to_regclass(%s) IS NOT NULL AS present",
                    (f'"{datastore.schema}".{EVENT_VIEW}',),
                )
                present = bool(cursor.fetchone()["present"])
            else:
                cursor.execute(
                    "SELECT count(*) FROM sqlite_master WHERE type = 'view' AND name = ?",
                    (EVENT_VIEW,),
                )
                present = bool(cursor.fetchone()[0])
        if present:
            return True
        with datastore.transaction(commit=True) as cursor:
            if postgres:
                cursor.execute(_postgres_view(datastore.schema, table))
            else:
                cursor.execute(_sqlite_view(table))
        return True
    return False
