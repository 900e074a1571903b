"""The store's marker: which format of tasktrail store a database holds, kept in a
small table beside the log (``tasktrail_meta``: key, value), read at every open.

- ``format``: the store format (:data:`STORE_FORMAT`). A store without the table was
  written before tasktrail kept one (format 0: no digest chain); a writer of this
  release adds the table on open. A format newer than this tasktrail reads is
  refused at open, before anything is read or written.
- ``chained_after``: the log's head when the marker was added. Every event after it
  carries a digest (:mod:`.chain`); events at or before it were recorded without one.
- ``keyed_after``, ``chain_key_id`` and ``keyed_mac``: a keyed store's (:mod:`.keys`):
  every digest after that position is an HMAC under the key the identifier names.
- ``made_by``: which tool made the store, when one did (``tasktrail demo`` marks its
  stores, and replaces no other file).

Like the lease table, it lives in the store's database but outside the log: it says
what the log is, not what happened.
"""

from __future__ import annotations

from typing import Any

from ..errors import StoreError
from .creation import lock_creation
from .keys import KEY_ID_KEY, KEYED_AFTER_KEY, KEYED_MAC_KEY, key_id, keyed_mac

TABLE = "tasktrail_meta"
STORE_FORMAT = 1
"""The format this tasktrail writes: 1 = events carry a digest chained per stream."""
FORMAT_KEY = "format"
CHAINED_AFTER_KEY = "chained_after"
MADE_BY_KEY = "made_by"


class Meta:
    """The marker table of one store (SQLite or PostgreSQL), read and written through
    the recorder's own datastore, each call its own transaction."""

    def __init__(self, recorder: Any, kind: str) -> None:
        self._postgres = kind == "postgresql"
        self._mark = "%s" if self._postgres else "?"
        self._datastore: Any = recorder.datastore
        self._events = recorder.events_table_name
        schema = getattr(self._datastore, "schema", "") if self._postgres else ""
        self._schema = schema
        self._table = f'"{schema}".{TABLE}' if schema else TABLE
        self._events_table = (
            f'"{schema}"."{self._events}"' if self._postgres and schema else self._events
        )

    def read(self) -> dict[str, str] | None:
        """Every key and value, or ``None`` when the store has no marker table."""
        with self._datastore.transaction(commit=False) as cursor:
            if not self._exists(cursor):
                return None
            cursor.execute(f"SELECT key, value FROM {self._table}")
            return dict(_pair(row) for row in cursor.fetchall())

    def ensure(self) -> dict[str, str]:
        """Add the marker to a store without one (format, and the head it starts the
        chain after); returns the marker as it is now (another writer's, if it won)."""
        m = self._mark
        with self._datastore.transaction(commit=True) as cursor:
            if self._postgres:
                lock_creation(cursor, self._schema)
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self._table} (key TEXT PRIMARY KEY, value TEXT)"
            )
            cursor.execute(f"SELECT key, value FROM {self._table}")
            marker = dict(_pair(row) for row in cursor.fetchall())
            if FORMAT_KEY not in marker:
                head = self._head(cursor)
                for key, value in ((FORMAT_KEY, str(STORE_FORMAT)), (CHAINED_AFTER_KEY, str(head))):
                    cursor.execute(
                        f"INSERT INTO {self._table} (key, value) VALUES ({m}, {m}) "
                        "ON CONFLICT (key) DO NOTHING",
                        (key, value),
                    )
                    marker.setdefault(key, value)
        return marker

    def key(self, chain_key: bytes) -> dict[str, str]:
        """Key the store from its head on, unless a writer keyed it first; returns the
        marker as it is now (the caller checks whose key won). Beside the key's
        identifier and ``keyed_after``, ``keyed_mac`` vouches, under the key, for the
        last event left unkeyed, so that moving ``keyed_after`` later shows."""
        m = self._mark
        with self._datastore.transaction(commit=True) as cursor:
            head = self._head(cursor)
            stream, version = self._row_at(cursor, head) if head else ("", 0)
            values = (
                (KEY_ID_KEY, key_id(chain_key)),
                (KEYED_AFTER_KEY, str(head)),
                (KEYED_MAC_KEY, keyed_mac(chain_key, stream, version)),
            )
            for key, value in values:
                cursor.execute(
                    f"INSERT INTO {self._table} (key, value) VALUES ({m}, {m}) "
                    "ON CONFLICT (key) DO NOTHING",
                    (key, value),
                )
            cursor.execute(f"SELECT key, value FROM {self._table}")
            return dict(_pair(row) for row in cursor.fetchall())

    def _row_at(self, cursor: Any, position: int) -> tuple[str, int]:
        column = "notification_id" if self._postgres else "rowid"
        cursor.execute(
            f"SELECT originator_id, originator_version FROM {self._events_table} "
            f"WHERE {column} = {self._mark}",
            (position,),
        )
        stream, version = _pair(cursor.fetchone())
        return stream, int(version)

    def set(self, key: str, value: str) -> None:
        """Write one key (the table exists: :meth:`ensure` ran at open)."""
        m = self._mark
        with self._datastore.transaction(commit=True) as cursor:
            cursor.execute(
                f"INSERT INTO {self._table} (key, value) VALUES ({m}, {m}) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def _exists(self, cursor: Any) -> bool:
        if self._postgres:
            cursor.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
                "AND table_name = %s",
                (self._schema or "public", TABLE),
            )
        else:
            cursor.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)
            )
        return cursor.fetchone() is not None

    def _head(self, cursor: Any) -> int:
        column = "notification_id" if self._postgres else "rowid"
        cursor.execute(f"SELECT MAX({column}) FROM {self._events_table}")
        row = cursor.fetchone()
        value = next(iter(row.values())) if isinstance(row, dict) else row[0]
        return int(value or 0)


def _pair(row: Any) -> tuple[str, str]:
    values = tuple(row.values()) if isinstance(row, dict) else tuple(row)
    return str(values[0]), str(values[1])


def store_format(marker: dict[str, str] | None, where: str) -> int:
    """The format a marker names (0 without one); a newer or unreadable one is refused."""
    if marker is None:
        return 0
    text = marker.get(FORMAT_KEY)
    if text is None or not text.isdigit():
        raise StoreError(
            f"{where}: the store's format marker ({TABLE}.{FORMAT_KEY}) reads {text!r}, "
            "not a format number: the table was edited or damaged"
        )
    found = int(text)
    if found > STORE_FORMAT:
        raise StoreError(
            f"{where} is a tasktrail store of format {found}, written by a newer tasktrail; "
            f"this one reads formats up to {STORE_FORMAT}: upgrade tasktrail to read it "
            "(nothing was read or written)"
        )
    return found


def chained_after(marker: dict[str, str] | None) -> int | None:
    """The position after which every event carries a digest (``None``: no marker)."""
    if marker is None:
        return None
    text = marker.get(CHAINED_AFTER_KEY, "")
    return int(text) if text.isdigit() else None
