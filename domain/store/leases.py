"""Worker leases: which scheduler process is alive, kept beside the log, not in it.

A fleet of workers shares one store (SPEC section 8). Each worker holds a lease
that it renews as it works; a task ``running`` under a worker whose lease
expired is recovered by another (rule 9 for a fleet). Renewals are frequent and
say nothing about a task's history, so they live in a table of their own in the
store's database (``tasktrail_leases``, one row a worker, overwritten in place)
instead of the event log, which would otherwise grow by one event per heartbeat.
What the history needs — which worker ran a task, and which worker was lost when
its task was recovered — is on the events themselves (``TaskReserved.worker``,
``TaskRecovered.worker``).

Times are the scheduler clock's milliseconds, as the worker that wrote them saw
them: workers of one fleet must share a clock (the system clock, or in tests one
``ManualClock``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from .creation import lock_creation

if TYPE_CHECKING:
    from .store import Store

TABLE = "tasktrail_leases"


@dataclass(frozen=True)
class Lease:
    """One worker's lease: alive until ``expires_at`` (ms, scheduler clock)."""

    worker: str
    expires_at: float
    renewed_at: float
    started_at: float
    liveness: str | None = None
    """The key of the lock the worker holds for its process's life (:mod:`.liveness`),
    or ``None`` for one that holds none (an earlier release)."""

    def expired(self, now: float) -> bool:
        """Whether the lease ran out before ``now``."""
        return now > self.expires_at


class Leases:
    """The lease table of one store. Created on first use by a worker, never by a
    read-only tool (those never construct this)."""

    def __init__(self, store: Store) -> None:
        self._postgres = store.location.kind == "postgresql"
        self._mark = "%s" if self._postgres else "?"
        # eventsourcing's recorders for SQLite and PostgreSQL both keep a datastore.
        self._datastore: Any = getattr(store.app.recorder, "datastore")  # noqa: B009
        self._schema = getattr(self._datastore, "schema", "") if self._postgres else ""
        self.table = f'"{self._schema}".{TABLE}' if self._schema else TABLE
        self._created = False

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        try:
            with self._datastore.transaction(commit=True) as cursor:
                yield cursor
        except StoreError:
            raise
        except Exception as error:  # sqlite3 / psycopg errors: locked, read-only, gone
            raise StoreError(f"cannot use the lease table: {error}") from None

    def _ensure(self) -> None:
        if self._created:
            return
        with self._cursor() as cursor:
            if self._postgres:
                lock_creation(cursor, self._schema)
            cursor.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} ("
                "worker TEXT PRIMARY KEY, expires_at DOUBLE PRECISION NOT NULL, "
                "renewed_at DOUBLE PRECISION NOT NULL, started_at DOUBLE PRECISION NOT NULL, "
                "liveness TEXT)"
            )
        if not self._has_liveness_column():
            # A table an earlier release made: its rows read as holding no lock. Two
            # processes may add it at once: the loser's "duplicate column" is no error.
            with contextlib.suppress(StoreError), self._cursor() as cursor:
                cursor.execute(f"ALTER TABLE {self.table} ADD COLUMN liveness TEXT")
        self._created = True

    def _has_liveness_column(self) -> bool:
        try:
            with self._cursor() as cursor:
                cursor.execute(f"SELECT liveness FROM {self.table} LIMIT 0")
        except StoreError:
            return False
        return True

    def renew(self, worker: str, now: float, lease_ms: float, liveness: str | None = None) -> Lease:
        """Hold ``worker``'s lease until ``now + lease_ms`` (created on first renewal),
        recording the key of the liveness lock it holds, if any."""
        self._ensure()
        m = self._mark
        with self._cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {self.table} (worker, expires_at, renewed_at, started_at, "
                f"liveness) VALUES ({m}, {m}, {m}, {m}, {m}) ON CONFLICT (worker) DO UPDATE SET "
                "expires_at = excluded.expires_at, renewed_at = excluded.renewed_at, "
                "liveness = excluded.liveness",
                (worker, now + lease_ms, now, now, liveness),
            )
        return Lease(worker, now + lease_ms, now, now, liveness)

    def drop_expired(self, before: float) -> dict[str, str | None]:
        """Drop the rows of workers whose lease ran out before ``before`` (gone long
        ago); returns them with their liveness keys."""
        self._ensure()
        m = self._mark
        with self._cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {self.table} WHERE expires_at < {m} RETURNING worker, liveness",
                (before,),
            )
            rows = cursor.fetchall()
        return dict(row_values(row) for row in rows)

    def release(self, worker: str) -> None:
        """Drop ``worker``'s lease: it closed cleanly and holds no task."""
        self._ensure()
        with self._cursor() as cursor:
            cursor.execute(f"DELETE FROM {self.table} WHERE worker = {self._mark}", (worker,))

    def all(self) -> dict[str, Lease]:
        """Every lease held now, by worker."""
        self._ensure()
        with self._cursor() as cursor:
            return leases_read(cursor, self.table)

    def alive(self, now: float) -> set[str]:
        """The workers whose lease has not expired at ``now`` (their processes may be
        gone: :meth:`~..app.fleet.FleetCommands.live_workers` asks their locks too)."""
        return {w for w, lease in self.all().items() if not lease.expired(now)}


def leases_read(cursor: Any, table: str) -> dict[str, Lease]:
    """Every lease of the lease table ``table``, through ``cursor``, by worker. ``SELECT
    *``: a table an earlier release made has no liveness column (its rows hold none)."""
    cursor.execute(f"SELECT * FROM {table}")
    leases = {}
    for row in cursor.fetchall():
        named = row if isinstance(row, dict) else dict(zip(row.keys(), tuple(row), strict=True))
        worker = named["worker"]
        expires, renewed, started = (named[t] for t in ("expires_at", "renewed_at", "started_at"))
        liveness = named.get("liveness")
        if (
            not isinstance(worker, str)
            or not all(_is_time(t) for t in (expires, renewed, started))
            or not (liveness is None or isinstance(liveness, str))
        ):  # what every reader compares: a damaged row is named, never compared
            raise StoreError(f"the lease table {table} holds a damaged row: {named!r}")
        leases[worker] = Lease(worker, expires, renewed, started, liveness)
    return leases


def _is_time(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def row_values(row: Any) -> tuple[Any, ...]:
    """A row's values: psycopg's dict rows and sqlite3's rows alike."""
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)
