"""The store as the console shows it: every task folded from position 0 with the one fold
(:meth:`World.apply_stored`), kept current from the store's news.

A :class:`Follower` opens the store **read-only** (nothing is created, written or
locked for a read: it never takes the writers' turn) and folds the whole log once, in
a thread of its own, a chunk at a time, so pages can say how far it got. Then it waits
on the store's news (:mod:`tasktrail.domain.store.news`: ``PRAGMA data_version`` on
SQLite, ``LISTEN`` on PostgreSQL; every wait at most a second, the news' own fallback)
and folds what was appended, whoever appended it. Each event folded is handed to every
subscriber (the server-sent events of ``/api/stream``) as a :class:`Notice`. Given an
archive folder, its store reads across it, and each chunk is read again if an archive
act came while it was read (:mod:`.archived`).

Beside the world it keeps what the pages ask that a world does not index: the tasks in
submission order, who owns whom (ended tasks too), each task's run streams and the
actors named on its events (the list's search finds them). One lock covers the store's
connection and all of it: a request reads a consistent world, never one half folded.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tasktrail.domain import CorruptEvent, Store, TaskEvent, World, open_store
from tasktrail.domain.history import stream_loader
from tasktrail.domain.retention.events import HistoryErased
from tasktrail.domain.store.recorded import Recorded

from .archived import ArchivedHistory

log = logging.getLogger("tasktrail.console")

CHUNK = 2_000
"""Events folded under the lock at once: a request waits for at most one chunk."""
GATHER_S = 0.05
"""How long the follower lets news gather before it reads: a busy worker commits
hundreds of times a second, and one read of them all costs what one read of one does
(the pages still learn of an event well within a second)."""
RETRY_S = 1.0
"""How long the follower waits before reading again a store it could not read."""
KEPT_PROBLEMS = 20
"""Unreadable events remembered (to show); more are counted."""


@dataclass(frozen=True)
class Notice:
    """One appended event, as ``/api/stream`` tells it: its position, its stream, the
    task it concerns (a run's or a wakeup's task too), its type, and for a submission
    the task's owner (a page showing the owner's tree learns of a new child)."""

    position: int
    stream: str
    task_id: str | None
    type: str
    owner_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "stream": self.stream,
            "task_id": self.task_id,
            "type": self.type,
            "owner_id": self.owner_id,
        }


Subscriber = Callable[[list[Notice]], None]
"""Called (in the follower's thread) with each batch of events folded; it must not block."""


@dataclass
class Extras:
    """What the pages need that the world does not index."""

    order: list[str] = field(default_factory=list)
    """Every task id, in submission order."""
    owner: dict[str, str] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    """The tasks each task owns (ended ones too), in submission order."""
    runs: dict[str, list[str]] = field(default_factory=dict)
    """Each task's run streams, in minting order."""
    actors: dict[str, set[str]] = field(default_factory=dict)
    """The actors named on each task's events (acts: submit, abort, retry, send, fork)."""
    words: dict[str, str] = field(default_factory=dict)
    """Each task's search words, built when asked and dropped when the task changes."""
    kinds: set[str] = field(default_factory=set)
    """Every kind submitted (what the kind filter offers)."""


class Follower:
    """A read-only store folded whole and kept current (see the module)."""

    def __init__(
        self,
        location: str,
        *,
        chain_key: bytes | str | None = None,
        archive: str | os.PathLike[str] | None = None,
    ) -> None:
        # Refuses a missing file, a foreign one, an unreachable server: StoreError, exit 2.
        self.store: Store = open_store(location, read_only=True, chain_key=chain_key)
        try:
            self.archived = ArchivedHistory(self.store, archive)
            """Its archived history: read across ``archive``, or said to be skipped."""
        except BaseException:
            self.store.close()
            raise
        self.location = location
        self.lock = threading.RLock()
        """Held for every read of :attr:`store` and of the fold (:attr:`world`, :attr:`extras`)."""
        self.world = World()
        self.extras = Extras()
        self.position = 0
        """The last position folded."""
        self._load = stream_loader(self.store, lambda: self.position)
        self.head_at_start = self.store.head()
        self.ready = threading.Event()
        """Set once the log as it was at the start is folded."""
        self.problems: list[str] = []
        """Events that could not be read or folded (each skipped), with their positions."""
        self.skipped = 0
        self.failure: str | None = None
        """Why following stopped (a store that went away), if it did."""
        self.workers_seen: tuple[float, int, list[dict[str, Any]]] | None = None
        """The last look at the workers: when (monotonic), at which position, what it found."""
        self._subscribers: set[Subscriber] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tasktrail-console", daemon=True)

    # ─── the life of the follower ───────────────────────────────────────────

    @property
    def started(self) -> bool:
        """Whether :meth:`start` was called."""
        return self._thread.ident is not None

    def start(self) -> None:
        """Fold the log, then follow the news, in a thread of its own."""
        self._thread.start()

    def close(self) -> None:
        """Stop following (within a chunk and a news look) and close the store."""
        self._stop.set()
        self.store.news.signal()  # a wait in progress returns now
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        with self.lock:
            self.store.close()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the log as it was at the start is folded."""
        return self.ready.wait(timeout)

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call ``subscriber`` with every batch of events folded from now on; returns
        the call that stops it."""
        with self.lock:
            self._subscribers.add(subscriber)
        return lambda: self._unsubscribe(subscriber)

    def hang_up(self) -> None:
        """Tell every subscriber the server stops (an empty batch): each stream ends now
        instead of holding the stop up. Safe in a signal handler: it takes no lock."""
        for subscriber in list(self._subscribers):
            try:
                subscriber([])
            except Exception:  # a subscriber's fault is its own: the others go on
                log.exception("a console subscriber failed")

    def _unsubscribe(self, subscriber: Subscriber) -> None:
        with self.lock:
            self._subscribers.discard(subscriber)

    def _run(self) -> None:
        while not self._stop.is_set():
            seen = self.store.news.generation  # before the read: later news wakes us
            try:
                while self.catch_up():
                    if self._stop.is_set():
                        return
            except Exception as error:  # the store away a moment: say so, look again
                failure = f"{type(error).__name__}: {error}"
                if failure != self.failure:
                    log.warning("the console cannot read %s: %s", self.location, failure)
                self.failure = failure
                self._stop.wait(RETRY_S)
                continue
            if self.failure is not None:
                log.warning("the console reads %s again", self.location)
                self.failure = None
            self.ready.set()
            if self.store.news.wait(seen, 1.0) != seen:
                self._stop.wait(GATHER_S)

    # ─── folding ────────────────────────────────────────────────────────────

    def catch_up(self) -> bool:
        """Fold one chunk of what was appended since :attr:`position`; returns whether
        there may be more."""
        notices: list[Notice] = []
        with self.lock:
            start = self.position
            # The head first: every event at or below it is committed, so the read sees
            # it, and a position it does not return is a gap (never filled), not an
            # append that committed between the read and a look at the head.
            head = self.store.head()
            if head <= start:
                return False
            stop = min(head, start + CHUNK)
            for recorded in self._read(start, stop):
                self._fold(recorded, notices)
            self.position = stop
            subscribers = list(self._subscribers)
        if notices:
            for subscriber in subscribers:
                try:
                    subscriber(notices)
                except Exception:  # a subscriber's fault is its own: the others go on
                    log.exception("a console subscriber failed")
        return True

    def _read(self, start: int, stop: int) -> list[Recorded]:
        """The events of ``(start, stop]``; read again across the archive if an archive
        act came meanwhile (the rows it took may have left before the read)."""
        while True:
            unreadable: list[CorruptEvent] = []
            records = list(self.store.read(after=start, until=stop, skip=unreadable.append))
            if not self.archived.look() or not self.archived.across:
                break
        for error in unreadable:
            self._skipped(error)
        return records

    def _skipped(self, error: CorruptEvent) -> None:
        self._problem(f"position {error.position}: {error}")

    def _problem(self, text: str) -> None:
        self.skipped += 1
        if len(self.problems) < KEPT_PROBLEMS:
            self.problems.append(text)

    def _fold(self, recorded: Recorded, notices: list[Notice]) -> None:
        event = recorded.event
        try:
            _, after = self.world.apply_stored(
                recorded.position, event, recorded.originator_version
            )
        except CorruptEvent as error:
            self._problem(f"position {recorded.position}: {error}")
            return
        cls = type(event)
        stream = event.task_id if cls.task_stream else event.stream_id()
        task_id = getattr(event, "task_id", None)
        extras = self.extras
        owner = None
        if cls.task_stream and after is not None and after.events == 1:
            task_id = event.task_id
            extras.order.append(task_id)
            extras.kinds.add(after.kind)
            owner = after.owner_id
            if owner is not None:
                extras.owner[task_id] = owner
                extras.children.setdefault(owner, []).append(task_id)
        elif cls.__name__ == "RunMinted" and isinstance(task_id, str):
            extras.runs.setdefault(task_id, []).append(stream)
        actor = getattr(event, "actor", None)
        if isinstance(actor, str) and isinstance(task_id, str):
            extras.actors.setdefault(task_id, set()).add(actor)
        if isinstance(task_id, str):
            extras.words.pop(task_id, None)
        self.position = recorded.position
        if isinstance(event, HistoryErased):
            self._fold_erased(event)
        notices.append(Notice(recorded.position, stream, task_id, _type_name(event), owner))

    def _fold_erased(self, act: HistoryErased) -> None:
        """A tree erased after this fold took its values in: each stream that lost values
        is folded again from the store, whose rows are erased by now, so the pages show
        what a fresh fold would (a full fold holds ended work, so nothing reads it back)."""
        world = self.world
        streams = {e[1] for e in act.entries if isinstance(e, list | tuple) and len(e) > 1}
        for stream_id in sorted(s for s in streams if isinstance(s, str)):
            task_stream = stream_id in world.tasks
            if not task_stream and stream_id not in world.streams:
                continue
            try:
                loaded = self._load(stream_id, task_stream, None)
            except CorruptEvent as error:
                self._problem(f"position {error.position}: {error}")
                continue
            if loaded is None:
                continue
            if task_stream:
                world.tasks[stream_id] = loaded[0]  # ended: its status and indexes stay
            else:
                world.streams[stream_id] = loaded[0]
        for task_id in act.tasks:
            self.extras.words.pop(task_id, None)

    # ─── what the pages read ────────────────────────────────────────────────

    def status(self) -> dict[str, Any]:
        """Where the follower is: position, head at start, ready, problems, failure, and
        its archive (the folder, the segments that failed, or the ranges it skips)."""
        return {
            "position": self.position,
            "head_at_start": self.head_at_start,
            "ready": self.ready.is_set(),
            "tasks": len(self.extras.order),
            "skipped": self.skipped,
            "problems": list(self.problems),
            "failure": self.failure,
            "archive": self.archived.to_dict(),
        }

    def owners(self, task_id: str) -> list[str]:
        """``task_id``'s owner, its owner's owner, ... (nearest first)."""
        found: list[str] = []
        seen = {task_id}
        owner = self.extras.owner.get(task_id)
        while owner is not None and owner not in seen:  # a cycle is a corrupt log: stop
            found.append(owner)
            seen.add(owner)
            owner = self.extras.owner.get(owner)
        return found

    def below(self, task_id: str, limit: int) -> tuple[list[str], int]:
        """``task_id`` and the tasks below it, owners before what they own, at most
        ``limit`` of them; and how many there are in all."""
        found: list[str] = []
        seen: set[str] = set()
        stack = [task_id]
        total = 0
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            total += 1
            if len(found) < limit:
                found.append(current)
            stack.extend(reversed(self.extras.children.get(current, [])))
        return found, total


def _type_name(event: TaskEvent) -> str:
    return type(event).__name__
