"""What a worker keeps in the background (the Retention issue): its retention policy,
a small act at a time, and its seal cadence, on a thread of its own beside the
heartbeats (``app/worker_loop.py`` starts it; it stops with them).

The keeper has its own connection to the store (a second ``Store``, a writer): its
reads take nothing from the scheduler's, and each act holds the writers' turn only for
its one transaction of at most :data:`BATCH` events. It reads the policies from their
streams each step, so a change any worker records reaches every worker. The tree scan
is kept and only the log's new events are folded into it at each step; the seal tree
is resumed from the last seal this keeper took (an archive or an erasure changes no
seal's tree: :mod:`..store.gaps`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from ..frozen import FrozenDict
from ..store.gaps import add_to, rows_and_gaps
from ..store.seals import LogTree, Seal
from ..store.store import Store
from ..store.transcoder import decode_event
from ..tasks.evolve import evolve_stream
from .archiving import archive
from .policy import RETENTION_STREAM, SEALS_STREAM, keep_ms
from .trees import TreeScan, Unit


class Kept(Protocol):
    """What a keeper reads of the scheduler it keeps for (the ``Scheduler``)."""

    store: Store
    worker: str
    clock: Any


log = logging.getLogger("tasktrail.retention")

BATCH = 500
"""Events one retention act takes at most: its transaction is a few milliseconds."""
PAUSE_S = 1.0
"""The keeper's step, at most (sooner while a retention pass has more to take)."""
SHARE = 0.05
"""The share of the interpreter a keeper takes at most while it reads or acts: the worker
beside it keeps the rest (goal: at least 0.9x its throughput alone). Counted in the
keeper thread's own CPU time, not the wall clock: its waits on the disk (an act's fsync,
the checkpoint that copies the WAL back) take no interpreter from the worker."""
RETENTION_EVERY_S = 60.0
"""How often a keeper looks for trees to take when the last look found none."""


def setting(store: Store, stream_id: str) -> FrozenDict[str, Any] | None:
    """The last policy recorded on a settings stream, folded (``None``: none)."""
    rows = store.stream_rows(stream_id)
    if not rows:
        return None
    position, _, topic, state = rows[-1]
    folded = evolve_stream(None, decode_event(topic, stream_id, bytes(state), position))
    return folded if isinstance(folded, FrozenDict) else None


class Keeper:
    """One worker's retention and seals, a step at a time (:meth:`step`)."""

    def __init__(self, scheduler: Kept, sink: Callable[[Seal], None] | None = None) -> None:
        self.scheduler = scheduler
        self.sink = sink
        self.store: Store | None = None
        self.scan = TreeScan()
        self.tree: LogTree | None = None
        self.sealed_at = time.monotonic()
        self.sealed_events = 0
        self.next_look = 0.0
        self.acts = 0
        self.seals = 0
        self._since = time.thread_time()
        self._queue: list[Unit] = []  # units found movable, oldest last, not taken yet

    def _store(self) -> Store:
        if self.store is None:
            own = self.scheduler.store  # a second writer on its location: a connection of its own
            self.store = Store(own.location, chain_key=own.chain_key)
        return self.store

    def step(self) -> float:
        """Seal if due, then take one retention act if due; the seconds to the next step."""
        store = self._store()
        cadence = setting(store, SEALS_STREAM)
        if cadence is not None and (cadence.get("every_s") or cadence.get("every_events")):
            self._seal(store, cadence)
        policy = setting(store, RETENTION_STREAM)
        if policy is None or not policy.get("keep_days") or time.monotonic() < self.next_look:
            return PAUSE_S
        took = self._retain(store, policy)
        if not took:
            self.next_look = time.monotonic() + RETENTION_EVERY_S
        return 0.0 if took else PAUSE_S

    def _retain(self, store: Store, policy: FrozenDict[str, Any]) -> bool:
        now = self.scheduler.clock()
        if not self._queue:  # one look at every unit, then its acts a step each
            self.scan.read(store, pause=self._pause)
            keep = lambda unit: keep_ms(policy, unit.kinds)  # noqa: E731
            self._queue = list(self.scan.movable(now, keep=keep))[::-1]
        units: list[Unit] = []
        size = 0
        while self._queue and (not units or size + self._queue[-1].events <= BATCH):
            unit = self._queue.pop()
            units.append(unit)
            size += unit.events
        if not units:
            return False
        folder = policy.get("archive_to")
        if folder is not None:
            os.makedirs(folder, exist_ok=True)
        self.scan.read(store, pause=self._pause)  # what came since: an erasure, say
        try:
            self._act(store, units, folder, now)
        except Exception:
            self._queue = []  # looked at again, whole, at the next step
            raise
        self.scan.forget(units)
        self.acts += 1
        return True

    def _act(self, store: Store, units: list[Unit], folder: str | None, now: float) -> None:
        archive(
            store,
            before=float("inf"),
            to=folder,
            units=units,
            batch=BATCH,
            at=now,
            actor=f"retention:{self.scheduler.worker}",
            why="retention policy",
            scanned=self.scan,
        )

    def _seal(self, store: Store, cadence: FrozenDict[str, Any]) -> None:
        head = store.head()
        every_s, every_events = cadence.get("every_s"), cadence.get("every_events")
        due = (every_s is not None and time.monotonic() - self.sealed_at >= every_s) or (
            every_events is not None and head - self.sealed_events >= every_events
        )
        if not due or head == self.sealed_events:
            return
        from ..commands.sealing import seal_of

        tree = self.tree or LogTree()
        for item in rows_and_gaps(store, after=tree.position, until=head):
            add_to(tree, item)
        self.tree = tree
        sealed = seal_of(store, tree)
        self.sealed_at, self.sealed_events = time.monotonic(), head
        self.seals += 1
        to = cadence.get("to")
        if self.sink is not None:
            self.sink(sealed)
        if isinstance(to, str):
            with open(to, "a", encoding="utf-8") as out:
                out.write(sealed.to_json() + "\n")
                out.flush()
                os.fsync(out.fileno())

    def _pause(self) -> None:
        """Within a long read: give the worker's threads the interpreter (the keeper's
        share of it stays about :data:`SHARE`)."""
        busy = time.thread_time() - self._since
        time.sleep(busy * (1 - SHARE) / SHARE)
        self._since = time.thread_time()

    def close(self) -> None:
        """Close the keeper's own store."""
        if self.store is not None:
            self.store.close()
            self.store = None


def keep(scheduler: Kept, stopped: threading.Event) -> threading.Thread:
    """Start a worker's keeper on a thread of its own, until ``stopped`` is set."""
    keeper = Keeper(scheduler, getattr(scheduler, "seal_sink", None))

    def run() -> None:
        pause = PAUSE_S
        try:
            while not stopped.wait(pause):
                keeper._since = time.thread_time()
                try:
                    pause = keeper.step()
                except Exception as error:  # a step failed: the next tries again
                    log.warning("worker %s: retention or seals: %s", scheduler.worker, error)
                    pause = PAUSE_S
                # Its share: what the step took since its last pause, waited out after it.
                busy = time.thread_time() - keeper._since
                pause = max(pause, busy * (1 - SHARE) / SHARE)
        finally:
            keeper.close()

    thread = threading.Thread(target=run, name=f"keeper-{scheduler.worker}", daemon=True)
    thread.start()
    return thread


__all__ = ["BATCH", "Keeper", "keep", "setting"]
