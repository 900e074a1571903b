"""The store's news: a waiter learns that events were appended, instead of polling.

Each :class:`~.store.Store` has one :class:`News`. Its :attr:`News.generation` grows by
one each time something was appended: by this store object (:meth:`News.signal`, called
by the append itself, so a waiter of the same process wakes at once), or by another
connection or process, which a watcher thread notices (started by the first waiter,
one a store, ended at :meth:`News.close`; :mod:`.watchers`):

- SQLite: ``PRAGMA data_version`` on a read connection of its own, every
  :data:`SQLITE_LOOK_S` (2 ms). It changes when another connection commits; one look
  costs a few microseconds (no file is read: the WAL index is in shared memory), so an
  idle watcher costs about 1% of a core, measured (docs/fleet.md). The stdlib has no
  file-change notification (inotify is not in it), and the WAL's mtime says less.
  The writer's connection is another connection too, so this store's own appends
  change it: a change that comes with an append of this store (:meth:`News.appended`)
  and leaves the log's head where that append left it is not news again (the append
  woke the waiters already). A busy worker ticked once more for every commit of its
  own before: 10% of its CPU a task, measured (benchmarks/README). And it looks only
  while somebody waits: a busy worker's watcher took a tenth of its CPU, looking for
  news nobody waited for. So a write of another connection that appends nothing (a
  lease, an erasure in place), made between two looks that saw an append of this
  store, is not news: a waiter finds it at its own look (:data:`FALLBACK_S`).
- PostgreSQL: ``LISTEN`` on the store's channel, on a connection of its own (appends
  NOTIFY it, :attr:`.postgres.GuardedPostgresRecorder.notify`). The channel is the
  table's name, which every store of a server shares: a wake may be another store's
  news, so a waiter always reads what changed before it returns. A listener that lost
  its connection connects again after a pause; meanwhile the waiters' fallback poll
  (:data:`FALLBACK_S`) still finds the news.

A waiter remembers the generation it has seen and waits for a later one
(:meth:`News.wait`, or :meth:`News.wait_async` on an event loop, one future a waiter:
no thread of its own); every wait has a timeout, the fallback poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger("tasktrail.news")

SQLITE_LOOK_S = 0.002
"""How often the SQLite watcher reads ``PRAGMA data_version``."""
FALLBACK_S = 1.0
"""The longest a waiter waits without looking for itself (a listener may be away)."""
QUIET_AFTER_S = 1.0
"""How long no other writer's append must have been heard before a read may be spared
(:meth:`News.quiet_since`)."""
IDLE_LOOK_S = 0.1
"""How often a SQLite watcher nobody waits for looks whether it must stop (its news
closed or collected): a watcher of a store dropped without close ends within it."""
RECONNECT_S = 0.5
"""How long a PostgreSQL listener waits before connecting again after losing its
connection."""

Watch = Callable[[Any, "Heard"], None]
"""``watch(stopped, heard)``: looks for news (:class:`Heard`) until ``stopped`` is set."""


class News:
    """A generation count of a store's appends, with waiters (see the module)."""

    def __init__(self, watch: Watch | None) -> None:
        self.generation = 0
        """How many times news came (this process's appends and the watcher's)."""
        self._watch = watch
        self._own = (0, 0)
        """How many appends this store made, and the last position they wrote."""
        self.foreign = 0
        """How many times the watcher heard of another writer's append."""
        self._heard_at = -math.inf
        self.listening = False
        """Whether the watcher hears every other writer's append now: a PostgreSQL
        listener, connected (a SQLite watcher looks only while somebody waits)."""
        self._condition = threading.Condition()
        self._futures: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()
        self._flags: set[threading.Event] = set()
        self._waiting = 0
        self._wanted = threading.Event()
        """Set while anybody waits: the SQLite watcher looks only then."""
        self._stopped = threading.Event()
        self._watcher: threading.Thread | None = None

    def signal(self) -> None:
        """Something was appended: wake every waiter (any thread may call it)."""
        with self._condition:
            self.generation += 1
            self._condition.notify_all()
            futures, self._futures = self._futures, set()
            flags = list(self._flags)
        for flag in flags:
            flag.set()
        for loop, future in futures:
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                loop.call_soon_threadsafe(_settle, future)

    def heard(self) -> None:
        """The watcher heard of another writer's append: wake every waiter."""
        with self._condition:
            self.foreign += 1
            self._heard_at = time.monotonic()
        self.signal()

    def doubt(self) -> None:
        """An append was refused (another writer's, unheard yet, came first): no read
        is spared until the next one reached the log's end (:meth:`basis`)."""
        with self._condition:
            self.foreign += 1

    def quiet_since(self, basis: int | None) -> bool:
        """Whether no other writer appended since :meth:`basis` said ``basis``: the
        listener heard every append meanwhile, and none, nor any for
        :data:`QUIET_AFTER_S` (while other writers append, a NOTIFY may come a moment
        after their commit: a read is not spared then)."""
        return (
            basis is not None
            and self.listening
            and self.foreign == basis
            and time.monotonic() - self._heard_at > QUIET_AFTER_S
        )

    def basis(self) -> int | None:
        """What :meth:`quiet_since` compares with: taken before a read of the log to its
        end (``None``: nothing heard for sure now, no read may be spared)."""
        return self.foreign if self.listening else None

    def appended(self, head: int) -> None:
        """This store appended, up to position ``head``: wake every waiter, and let the
        watcher know the change it is about to see as this store's own."""
        with self._condition:  # one tuple: the watcher reads it whole, or not yet
            appends, last = self._own
            self._own = (appends + 1, max(last, head))
        self.signal()

    def own(self) -> tuple[int, int]:
        """``(appends, head)``: this store's appends so far, and the last position."""
        return self._own

    def wait(self, seen: int, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` (at most :data:`FALLBACK_S`) for a generation after
        ``seen``; returns the generation then (``seen`` itself: no news meanwhile)."""
        self._start_watching()
        with self._condition:
            self._joined()
            try:
                self._condition.wait_for(
                    lambda: self.generation != seen, timeout=max(0.0, min(timeout_s, FALLBACK_S))
                )
            finally:
                self._left()
            return self.generation

    async def wait_async(self, seen: int, timeout_s: float) -> int:
        """:meth:`wait` for an event loop: a future the news settles, no thread."""
        self._start_watching()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        entry = (loop, future)
        with self._condition:
            if self.generation != seen:
                return self.generation
            self._futures.add(entry)
            self._joined()
        try:
            await asyncio.wait_for(future, max(0.0, min(timeout_s, FALLBACK_S)))
        except TimeoutError:
            pass
        finally:
            with self._condition:
                self._futures.discard(entry)
                self._left()
        return self.generation

    @contextlib.contextmanager
    def flagging(self, flag: threading.Event) -> Iterator[None]:
        """Inside the block, news sets ``flag`` (the thread waiting on it wakes): how an
        idle worker waits for news and its own invocations' ends on one event."""
        self._start_watching()
        with self._condition:
            self._flags.add(flag)
            self._joined()
        try:
            yield
        finally:
            with self._condition:
                self._flags.discard(flag)
                self._left()

    def _joined(self) -> None:
        """A waiter begins (under the condition): the watcher looks from now on."""
        self._waiting += 1
        self._wanted.set()

    def _left(self) -> None:
        """A waiter is done (under the condition)."""
        self._waiting -= 1
        if not self._waiting:
            self._wanted.clear()

    def _start_watching(self) -> None:
        if self._watch is None or self._watcher is not None or self._stopped.is_set():
            return
        with self._condition:
            if self._watcher is not None:
                return
            watch = self._watch
            # The thread holds the news weakly: a store dropped without close (its news
            # collected) stops its watcher at its next look, and its connection with it.
            # No finalizer: one runs wherever the collector does, and may not take a lock.
            weak = weakref.ref(self)
            stopped = _WhileHeld(self._stopped, weak)
            heard = Heard(weak)
            self._watcher = threading.Thread(
                target=watch, args=(stopped, heard), name="tasktrail-news", daemon=True
            )
            self._watcher.start()

    def close(self) -> None:
        """Stop the watcher (its connection closed) before the store closes."""
        self._stopped.set()
        self.listening = False
        self._wanted.set()  # a watcher that waits for a waiter stops at once
        watcher = self._watcher
        if watcher is not None and watcher is not threading.current_thread():
            watcher.join(timeout=2)
        self.signal()  # a waiter of a closing store looks once more, and finds it closed


class Heard:
    """What a watcher tells its news, and asks of it; holds it weakly (see above)."""

    def __init__(self, news: weakref.ref[News] | None = None) -> None:
        self._news = news if news is not None else (lambda: None)
        held = self._news()
        self.wanted = held._wanted if held is not None else threading.Event()
        """Set while anybody waits for news (or the news closes)."""
        if held is None:
            self.wanted.set()  # no news to ask: always wanted

    def signal(self) -> None:
        """News of another writer: wake the waiters."""
        news = self._news()
        if news is not None:
            news.heard()

    def own(self) -> tuple[int, int]:
        """The news' :meth:`News.own` (nothing appended, once it is collected)."""
        news = self._news()
        return news.own() if news is not None else (0, 0)

    def listening(self, listening: bool) -> None:
        """Whether every other writer's append is heard from now on (a PostgreSQL
        listener connected; lost)."""
        news = self._news()
        if news is not None:
            news.listening = listening


class _WhileHeld:
    """A watcher's stop: its news closed, or collected (a store dropped without close)."""

    def __init__(self, stopped: threading.Event, held: weakref.ref[Any]) -> None:
        self._stopped, self._held = stopped, held

    def is_set(self) -> bool:
        return self._stopped.is_set() or self._held() is None

    def wait(self, timeout: float) -> bool:
        return self._stopped.wait(timeout) or self._held() is None


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def deadline_of(timeout_s: float | None) -> float:
    """The ``time.monotonic()`` a wait of ``timeout_s`` seconds ends (``None``: never)."""
    return float("inf") if timeout_s is None else time.monotonic() + timeout_s
