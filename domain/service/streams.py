"""A task's output streams (the agent primitives issue, item 1; rules 28 and 29): the
scheduler's side, mixed into :class:`~..app.scheduler.Scheduler` as
:class:`StreamCommands`.

Writing. ``inv.emit`` keeps a chunk in its invocation's buffer
(:mod:`..tasks.stream_buffer`) and tells this scheduler's :class:`StreamWriter`, a
thread started on the first chunk (and gone after :data:`IDLE_S` without one). It
records every waiting invocation's chunks, each invocation's as one decision of that
invocation (refused as its decisions are once it has ended): at once when it last
recorded more than :attr:`StreamCommands.stream_linger_s` ago (in the long run: a token
bucket lets a few rounds go at once after a quiet spell), else once that much has
passed, so a phase emitting a chunk a millisecond is recorded in about one event a
``stream_linger_s`` rather than one a chunk (coalesced: one :class:`ChunksEmitted` per
stream per decision, at most 1,000 chunks or 256 KiB each). A decision the phase takes
meanwhile records what waits first, in its own append; so does a phase's failure.

Reading. :meth:`StreamCommands.read_stream` and :meth:`StreamCommands.read_stream_async`
read the log (:mod:`.stream_reading`), not this process's memory, so any process that
opened the store reads what any worker recorded.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import ConflictError, RuleViolation
from ..tasks.deciding import DECISION_ATTEMPTS
from ..tasks.invocation import Invocation
from ..tasks.streams import flush
from .results import _timeout
from .stream_reading import Chunk, StreamCursor, first_look, follow_async
from .stream_reading import follow as follow_chunks

if TYPE_CHECKING:
    from ..store.store import Store

log = logging.getLogger("tasktrail.worker")

IDLE_S = 1.0
"""How long the stream writer's thread stays without a chunk before it ends."""
BURST = 3.0
"""Rounds of recordings the stream writer may make at once after a quiet spell."""


class StreamWriter:
    """Records the invocations' waiting chunks from a thread of its own (see the module).
    It holds its scheduler weakly: a scheduler dropped without close ends it."""

    def __init__(self, scheduler: StreamCommands) -> None:
        self._scheduler = weakref.ref(scheduler)
        self._lock = threading.Lock()
        self._waiting: dict[int, Invocation] = {}
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._last = time.monotonic()  # when the bucket was last filled
        self._tokens = BURST

    def add(self, invocation: Invocation) -> None:
        """``invocation`` has chunks waiting: record them soon."""
        with self._lock:
            self._waiting.setdefault(id(invocation), invocation)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="tasktrail-streams", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            if not self._wake.wait(IDLE_S):
                with self._lock:
                    if not self._waiting:
                        self._thread = None
                        return
                continue
            scheduler = self._scheduler()
            if scheduler is None:
                return
            # Coalesce: rounds of recordings at most one a linger in the long run, a
            # token bucket of BURST: a chunk after a quiet spell goes at once, and so
            # does one that comes as often as the linger (a wake-up's delay is not
            # carried on to the chunks after it).
            linger = scheduler.stream_linger_s or 0.0
            del scheduler  # not held while it waits
            now = time.monotonic()
            refill = (now - self._last) / linger if linger > 0 else BURST
            self._tokens = min(BURST, self._tokens + refill)
            self._last = now
            if self._tokens < 1:
                time.sleep((1 - self._tokens) * linger)
                self._tokens, self._last = 1.0, time.monotonic()
            self._tokens -= 1
            self._wake.clear()
            with self._lock:
                waiting, self._waiting = self._waiting, {}
            scheduler = self._scheduler()
            if scheduler is None:
                return
            for invocation in waiting.values():
                scheduler._record_streams(invocation)
            del scheduler


class StreamCommands:
    """``read_stream``, ``read_stream_async`` and the recording of what phases emit."""

    stream_linger_s: float | None = 0.02
    """The stream writer's rounds of recordings are one a ``stream_linger_s`` at most in
    the long run: the latency a chunk may gain when chunks come faster than that, so
    that a phase emitting fast is recorded in few events and costs the other tasks
    little (a chunk after a quiet spell is recorded at once). ``0``: as often as the
    store takes them; ``None``: no stream writer, chunks wait for the invocation's next
    decision (or ``inv.flush()``)."""
    _stream_writer: StreamWriter | None = None
    closing: bool
    _invocations: dict[str, Invocation]

    if TYPE_CHECKING:
        store: Store

        def _invocation_decision(
            self, task_id: str, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
        ) -> None: ...

    def read_stream(
        self,
        task_id: str,
        stream: str = "out",
        after: int = -1,
        follow: bool = True,
        timeout: float | None = None,
    ) -> Iterator[Chunk]:
        """The chunks of the task's stream ``stream`` after the offset ``after`` (``-1``:
        from the first), as ``(offset, value)`` pairs in offset order, each once.

        With ``follow`` it waits for chunks not recorded yet, on the store's news (not
        by polling on a period), and ends when the stream is closed (by its phase, or
        by the task's end, rule 29), raising :class:`TimeoutError` after ``timeout``
        seconds without a new chunk (``None``: no limit); without, it ends after the
        chunks recorded now. Offsets are stable (rule 29): a reader that reconnects
        with the last offset it saw misses nothing and sees nothing twice, whatever
        happened to the emitting worker. Works from any process that opened the store.
        Raises :class:`~..errors.UnknownTask` for a task the store does not have (at
        the call, not at the first chunk)."""
        limit = _timeout(timeout)
        cursor = StreamCursor(self.store, task_id, stream, after)
        return follow_chunks(cursor, bool(follow), limit, first_look(cursor))

    def read_stream_async(
        self,
        task_id: str,
        stream: str = "out",
        after: int = -1,
        follow: bool = True,
        timeout: float | None = None,
    ) -> AsyncIterator[Chunk]:
        """:meth:`read_stream` for an asyncio host: ``async for offset, value in
        s.read_stream_async(task)``; the loop goes on while it waits."""
        limit = _timeout(timeout)
        cursor = StreamCursor(self.store, task_id, stream, after)
        return follow_async(cursor, bool(follow), limit)

    # ─── what an invocation's emit asks of its scheduler ────────────────────

    def stream_waiting(self, invocation: Invocation) -> None:
        """``invocation`` has chunks waiting to be recorded: the stream writer records
        them within :attr:`stream_linger_s` (20 ms), at once after a quiet spell."""
        if self.stream_linger_s is None:
            return  # recorded by its next decision
        writer = self._stream_writer
        if writer is None:
            writer = self._stream_writer = StreamWriter(self)
        writer.add(invocation)

    def flush_streams(self, task_id: str) -> None:
        """Record what the invocation of ``task_id`` here emitted and has not recorded
        yet (its decision: refused as its others are once it has ended)."""
        self._invocation_decision(task_id, flush)

    def _record_streams(self, invocation: Invocation) -> None:
        """The stream writer's (or a failed phase's) recording of ``invocation``'s
        waiting chunks, if it still runs its task here; a refusal is the phase's to meet
        at its next decision, a store away its next decision's to retry."""
        buffer = invocation.streams
        if (
            buffer is None
            or not buffer.waiting
            or self.closing
            or invocation.ended
            or invocation.timed_out is not None
            or self._invocations.get(invocation.task_id) is not invocation
        ):
            return
        for _ in range(DECISION_ATTEMPTS):
            try:
                self.flush_streams(invocation.task_id)
                return
            except ConflictError:
                continue  # another writer of the task came first: on fresh state again
            except RuleViolation:
                return  # its invocation ended: what waited goes with it
            except Exception:
                log.exception(
                    "task %s: its stream's chunks were not recorded yet", invocation.task_id
                )
                return

    def _record_streams_of(self, task_id: str) -> None:
        """Record what the invocation of ``task_id`` here emitted, before a decision the
        scheduler takes for it (a failed phase's retry or fault)."""
        invocation = self._invocations.get(task_id)
        if invocation is not None:
            self._record_streams(invocation)
