"""An attacker with write access to a store, SQLite or PostgreSQL: the raw rows of the
log, the marker and the snapshots, read and rewritten by hand, and a stream's digests
recomputed by the public (unkeyed) scheme, as someone who knows it but not the key
would."""

from __future__ import annotations

import sqlite3
from typing import Any

from tasktrail.domain.store.chain import digest, seal, unseal

Row = tuple[int, str, int, str, bytes]


class Tamperer:
    """Raw access to one store's tables."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.postgres = location.startswith("postgresql://")

    def sql(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One statement, SQLite's spelling (``?``, ``rowid``, ``stored_events``)."""
        if self.postgres:
            import psycopg

            dsn, schema = self.location.split("?schema=")
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'SET search_path TO "{schema}"')
                statement = statement.replace("?", "%s").replace("rowid", "notification_id")
                statement = statement.replace("stored_events", "tasktrail_events")
                cursor = conn.execute(statement, params)
                return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
        conn = sqlite3.connect(self.location)
        try:
            with conn:
                return conn.execute(statement, params).fetchall()
        finally:
            conn.close()

    def rows(self) -> list[Row]:
        return [
            (p, o, v, t, bytes(s))
            for p, o, v, t, s in self.sql(
                "SELECT rowid, originator_id, originator_version, topic, state "
                "FROM stored_events ORDER BY rowid"
            )
        ]

    def stream(self, stream_id: str) -> list[Row]:
        return [r for r in self.rows() if r[1] == stream_id]

    def find(self, topic: str, contains: bytes) -> Row:
        return next(r for r in self.rows() if r[3] == topic and contains in r[4])

    def set_state(self, position: int, state: bytes) -> None:
        self.sql("UPDATE stored_events SET state = ? WHERE rowid = ?", (state, position))

    def set_row(self, position: int, stream: str, version: int, topic: str, state: bytes) -> None:
        self.sql(
            "UPDATE stored_events SET originator_id = ?, originator_version = ?, topic = ?, "
            "state = ? WHERE rowid = ?",
            (stream, version, topic, state, position),
        )

    def delete(self, *positions: int) -> None:
        for position in positions:
            self.sql("DELETE FROM stored_events WHERE rowid = ?", (position,))

    def insert(self, stream: str, version: int, topic: str, state: bytes) -> None:
        self.sql(
            "INSERT INTO stored_events (originator_id, originator_version, topic, state) "
            "VALUES (?, ?, ?, ?)",
            (stream, version, topic, state),
        )

    def rechain(self, stream_id: str, start: int = 1) -> None:
        """Recompute a stream's digests (and its versions, 1, 2, ...) by the public scheme
        from its ``start``-th event on, chained to the digest before it: what someone who
        knows the scheme, not the key, does after an edit."""
        events = self.stream(stream_id)
        previous = unseal(events[start - 2][4])[1] or "" if start > 1 else ""
        for version, (position, _, _, topic, state) in enumerate(events, 1):
            if version < start:
                continue
            payload = unseal(state)[0]
            value = digest(previous, stream_id, version, topic, payload)
            self.set_row(position, stream_id, version, topic, seal(payload, value))
            previous = value

    def swap(self, first: int, second: int) -> None:
        """Two events change places in the log (each keeps its own stream and version)."""
        a, b = (next(r for r in self.rows() if r[0] == p) for p in (first, second))
        self.set_row(first, "swapping", 1, a[3], a[4])  # the unique (stream, version) pair
        self.set_row(second, *a[1:])
        self.set_row(first, *b[1:])

    def marker(self) -> dict[str, str]:
        return dict(self.sql("SELECT key, value FROM tasktrail_meta"))  # type: ignore[arg-type]

    def set_marker(self, key: str, value: str | None) -> None:
        self.sql("DELETE FROM tasktrail_meta WHERE key = ?", (key,))
        if value is not None:
            self.sql("INSERT INTO tasktrail_meta (key, value) VALUES (?, ?)", (key, value))

    def snapshot_positions(self) -> list[int]:
        return [r[0] for r in self.sql("SELECT position FROM tasktrail_snapshots ORDER BY 1")]

    def delete_snapshots(self, at_or_after: int = 0) -> None:
        self.sql("DELETE FROM tasktrail_snapshots WHERE position >= ?", (at_or_after,))
