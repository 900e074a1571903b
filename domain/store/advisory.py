"""A PostgreSQL worker's liveness: a session advisory lock, kept through cut connections.

The server lets a session's advisory lock go when the session ends, and a session ends
with its process (what :mod:`.liveness` is for) but also without it: a network blip, a
server restart, an idle-session timeout, ``pg_terminate_backend``. So the holder keeps
its lock with a thread of its own, which takes it again on a new connection the moment
the old session is found ended; and a peer calls a worker gone only when its lock was
free at two looks :data:`CONFIRM_S` apart, far longer than that takes. The holder knows
how long it was without its lock (:meth:`AdvisoryLiveness.lost_for`,
:meth:`AdvisoryLiveness.take_outage`): :mod:`..app.fleet` fences it by that.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
import time
from collections.abc import Mapping
from typing import Any

from .direct import direct_connection
from .liveness import Liveness, _digest

log = logging.getLogger("tasktrail.worker")

CONFIRM_S = 0.8
"""How long a PostgreSQL worker's lock must be seen free before it is called gone: well
past the time a live worker whose session ended takes to see it and connect again."""
LOOKS_APART_S = 1.2
"""Two looks further apart than this are not one sighting: the lock may have been held
between them, so seeing it free starts over."""
KEEP_EVERY_S = 0.25
"""How often the keeper of a PostgreSQL lock wakes to see whether it was asked to stop."""
PING_EVERY_S = 1.0
"""How often it asks the server whether its session lives when the server said nothing."""
KEEPALIVE = {"keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3}
"""A liveness connection to a server no longer there fails within seconds, not hours."""
USER_TIMEOUT_MS = 5_000


class AdvisoryLiveness(Liveness):
    """A session advisory lock on a connection of its own, kept by a thread of its own
    (PostgreSQL)."""

    confirm_s = CONFIRM_S

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.schema = env.get("POSTGRES_SCHEMA", "") or "public"
        self._connection: Any = None
        self._worker: str | None = None
        self._mutex = threading.Lock()  # the connection swaps: keeper against release
        self._stopping = threading.Event()
        self._keeper: threading.Thread | None = None
        self._held_at = 0.0  # monotonic: when the lock was last known held
        self._lost_at: float | None = None  # when it was found lost, until held again
        self._outage = 0.0
        self._told_held = False
        self._free_since: dict[int, tuple[float, float]] = {}  # key: (first, last) seen free

    def _lock_key(self, worker: str) -> int:
        digest = _digest(f"tasktrail-worker\x00{self.schema}\x00{worker}")
        return int.from_bytes(digest[:8], "big", signed=True)

    def key(self, worker: str) -> str:
        return str(self._lock_key(worker))

    def _connect(self) -> Any:
        return direct_connection(
            self.env,
            application_name="tasktrail-liveness",
            options={**KEEPALIVE, "tcp_user_timeout": USER_TIMEOUT_MS},
        )

    def hold(self, worker: str) -> bool:
        connection = self._take(worker)
        if connection is None:
            return False
        with self._mutex:
            self._connection, self._worker = connection, worker
            self._held_at, self._lost_at = time.monotonic(), None
            self._stopping.clear()
            if self._keeper is None:
                self._keeper = threading.Thread(
                    target=self._keep, name=f"liveness-{worker}", daemon=True
                )
                self._keeper.start()
        return True

    def _take(self, worker: str) -> Any:
        """A new connection whose session holds ``worker``'s lock, or ``None``."""
        try:
            connection = self._connect()
            row = connection.execute(
                "SELECT pg_try_advisory_lock(%s)", (self._lock_key(worker),)
            ).fetchone()
        except Exception as error:  # a server refusing one more connection: lease alone
            if self._lost_at is None:
                log.warning("worker %s: no liveness lock on the server (%s)", worker, error)
            self.unreachable = True
            return None
        self.unreachable = False
        if not row or not row[0]:
            connection.close()
            return None
        return connection

    def _keep(self) -> None:
        """The keeper's loop: until released, see that the session holding the lock
        lives, and take the lock again when it ended."""
        pinged = time.monotonic()
        while not self._stopping.is_set():
            connection = self._connection
            if connection is None:
                if not self._retake():  # the server away: soon again; the lock held: later
                    self._stopping.wait(KEEP_EVERY_S if self.unreachable else PING_EVERY_S)
                continue
            looked = time.monotonic()
            try:
                said, _, _ = select.select([connection.fileno()], [], [], KEEP_EVERY_S)
            except Exception:  # closed meanwhile: a release, or a peer's look that failed
                said = [True]
            if self._stopping.is_set():
                return
            if not said:
                # A server that ends a session says so (a FATAL) before it closes the
                # connection, and says nothing to an idle one: it still held the lock.
                self._held_at = looked
                if time.monotonic() - pinged < PING_EVERY_S:
                    continue
            pinged = time.monotonic()
            try:
                connection.execute("SELECT 1")  # the FATAL read, or the session alive
            except Exception as error:  # the session ended, and the lock with it
                self._lose(connection, error)
            else:
                self._held_at = max(self._held_at, pinged)

    def _lose(self, connection: Any, error: BaseException) -> None:
        with self._mutex:
            if self._connection is not connection:
                return
            self._connection = None
        with contextlib.suppress(Exception):
            connection.close()
        if self._lost_at is None:
            self._lost_at = time.monotonic()
            message = "worker %s: its liveness lock was lost with its server session (%s)"
            log.warning(message, self._worker, str(error).strip())

    def _retake(self) -> bool:
        """Take the lock again on a new connection; whether it is held now."""
        worker = self._worker
        if worker is None:
            return False
        connection = self._take(worker)
        if connection is None:
            if not self.unreachable and not self._told_held:
                self._told_held = True  # said once: a second process under this name?
                log.warning(
                    "worker %s: its liveness lock is held by another session; its "
                    "decisions are refused until it holds it again",
                    worker,
                )
            return False
        with self._mutex:
            if self._stopping.is_set():
                connection.close()
                return False
            self._connection = connection
            now = time.monotonic()
            outage = now - self._held_at
            self._outage = max(self._outage, outage)
            self._held_at, self._lost_at, self._told_held = now, None, False
        log.warning("worker %s: liveness lock held again, after %.2f s", worker, outage)
        return True

    def lost_for(self) -> float | None:
        if self._lost_at is None:
            return None
        return time.monotonic() - self._held_at

    def take_outage(self) -> float:
        outage, self._outage = self._outage, 0.0
        return outage

    def release(self) -> None:
        with self._mutex:
            self._stopping.set()
            connection, self._connection = self._connection, None
            keeper, self._keeper = self._keeper, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()  # ends the session, and with it the lock
        if keeper is not None and keeper is not threading.current_thread():
            keeper.join(timeout=KEEP_EVERY_S * 4)

    def gone(self, keys: Mapping[str, str], *, wait: bool = False) -> set[str]:
        wanted = {}
        for worker, key in keys.items():
            with contextlib.suppress(ValueError):
                wanted[worker] = int(key)
        if not wanted:
            return set()
        found = self._look(wanted)
        due = self.due()
        if wait and due is not None and set(found) != set(wanted):
            time.sleep(max(0.0, due - time.monotonic()))
            found = self._look(wanted)
        return found

    def _look(self, wanted: dict[str, int]) -> set[str]:
        """One look at the server's locks: which of ``wanted`` have been seen free long
        enough (each look at a key seeing it held, or too long after the last, starts
        its sighting over)."""
        held = self._held()
        now = time.monotonic()
        gone = set()
        for worker, key in wanted.items():
            if key in held:
                self._free_since.pop(key, None)
                continue
            first, last = self._free_since.get(key, (now, now))
            if now - last > LOOKS_APART_S:
                first = now
            self._free_since[key] = (first, now)
            if now - first >= self.confirm_s:
                gone.add(worker)
        return gone

    def due(self) -> float | None:
        now = time.monotonic()
        firsts = [
            first + self.confirm_s
            for first, last in self._free_since.values()
            if now - last <= LOOKS_APART_S and now - first < self.confirm_s
        ]
        return max(firsts) if firsts else None

    def _held(self) -> set[int]:
        """The advisory keys any session of this database holds now."""
        query = (
            "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks "
            "WHERE locktype = 'advisory' AND objsubid = 1 AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        connection = self._connection
        rows = None
        if connection is not None:
            with contextlib.suppress(Exception):  # its session ended: the keeper sees to it
                rows = connection.execute(query).fetchall()
        if rows is None:
            connection = self._connect()
            try:
                rows = connection.execute(query).fetchall()
            finally:
                connection.close()
        # pg_locks splits a bigint key into two unsigned halves: back to signed.
        return {value - (1 << 64) if value >= 1 << 63 else value for (value,) in rows}
