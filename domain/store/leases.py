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

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from .application import lock_creation

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
        self._table = f'"{self._schema}".{TABLE}' if self._schema else TABLE
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
                f"CREATE TABLE IF NOT EXISTS {self._table} ("
                "worker TEXT PRIMARY KEY, expires_at DOUBLE PRECISION NOT NULL, "
                "renewed_at DOUBLE PRECISION NOT NULL, started_at DOUBLE PRECISION NOT NULL)"
            )
        self._created = True

    def renew(self, worker: str, now: float, lease_ms: float) -> Lease:
        """Hold ``worker``'s lease until ``now + lease_ms`` (created on first renewal)."""
        self._ensure()
        m = self._mark
        with self._cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {self._table} (worker, expires_at, renewed_at, started_at) "
                f"VALUES ({m}, {m}, {m}, {m}) ON CONFLICT (worker) DO UPDATE SET "
                "expires_at = excluded.expires_at, renewed_at = excluded.renewed_at",
                (worker, now + lease_ms, now, now),
            )
        return Lease(worker, now + lease_ms, now, now)

    def release(self, worker: str) -> None:
        """Drop ``worker``'s lease: it closed cleanly and holds no task."""
        self._ensure()
        with self._cursor() as cursor:
            cursor.execute(f"DELETE FROM {self._table} WHERE worker = {self._mark}", (worker,))

    def all(self) -> dict[str, Lease]:
        """Every lease held now, by worker."""
        self._ensure()
        with self._cursor() as cursor:
            cursor.execute(f"SELECT worker, expires_at, renewed_at, started_at FROM {self._table}")
            rows = cursor.fetchall()
        leases = {}
        for row in rows:
            values = tuple(row.values()) if isinstance(row, dict) else tuple(row)
            worker, expires_at, renewed_at, started_at = values
            leases[worker] = Lease(worker, expires_at, renewed_at, started_at)
        return leases

    def alive(self, now: float) -> set[str]:
        """The workers whose lease has not expired at ``now``."""
        return {w for w, lease in self.all().items() if not lease.expired(now)}
