"""What an invocation emitted and has not recorded yet (rules 28 and 29).

``inv.emit`` does not write: it numbers the chunk (the stream's recorded chunks plus
those waiting here) and keeps it in the invocation's :class:`StreamBuffer`. What waits
is recorded by the invocation's next decision, in the same append, first
(:func:`~.streams.emitting`), or sooner by the scheduler's stream writer, a thread that
records it within a few milliseconds (``Scheduler.stream_linger_s``). A crash before
then loses it, as it loses the phase's work since its last decision: the phase run
again after recovery numbers its chunks after those recorded.

One invocation is the only writer of its task's chunks (rules 1, 3, 9 and 24 end or
fence any other), so its count of the next offset is the log's. Two takers (the phase's
decision, the stream writer) take in turn (:meth:`StreamBuffer.taking`), so chunks are
recorded in the order they were emitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from .streams import Batch, StreamRefused, emitting

MAX_WAITING_CHUNKS = 10_000
"""Chunks an invocation keeps unrecorded before ``emit`` records them itself (the phase
then waits for the store: it emits faster than the store takes them)."""
MAX_WAITING_BYTES = 4 * 1024 * 1024
"""The same bound in bytes (as JSON)."""
TAKER_POLL_S = 0.001
"""How often an awaited decision looks again for its turn to take (seldom waited for)."""


class StreamBuffer:
    """An invocation's chunks and closes not recorded yet, by stream, and the next
    offset and closedness of each stream it touched."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self._lock = threading.Lock()  # the fields below
        self._taking = threading.Lock()  # one taker at a time, from take to settle
        self._waiting: dict[str, Batch] = {}
        self._next: dict[str, int] = {}
        self._closed: set[str] = set()
        self.chunks = 0
        """Chunks waiting."""
        self.bytes = 0
        """Their bytes as JSON."""
        self.announce = False
        """Set when chunks began to wait, until the stream writer was told
        (:meth:`announced`): told once a round, not a chunk."""

    def announced(self) -> bool:
        """Whether the stream writer is to be told now (then it has been)."""
        with self._lock:
            due, self.announce = self.announce, False
            return due

    def knows(self, stream: str) -> bool:
        """Whether :meth:`learn` told it of ``stream`` already."""
        return stream in self._next

    def learn(self, stream: str, recorded: int, closed: bool) -> None:
        """What the log holds of ``stream`` when the invocation first touches it."""
        with self._lock:
            if stream not in self._next:
                self._next[stream] = recorded
                if closed:
                    self._closed.add(stream)

    def next_offset(self, stream: str) -> int:
        """The offset the next chunk of ``stream`` takes."""
        return self._next.get(stream, 0)

    def add(self, stream: str, value: Any, size: int) -> int:
        """Keep a chunk of ``stream`` (learned already); returns its offset. (The first
        chunk waiting sets :attr:`announce`: the stream writer is to hear of it.)"""
        with self._lock:
            # 28. A closed stream takes no chunk: refused here, nothing kept.
            if stream in self._closed:
                raise StreamRefused(
                    f"the stream {stream!r} is closed; nothing was emitted", task_id=self.task_id
                )
            offset = self._next[stream]
            batch = self._waiting.get(stream)
            if batch is None:
                batch = self._waiting[stream] = Batch(first=offset)
            batch.values.append(value)
            batch.sizes.append(size)
            self._next[stream] = offset + 1
            self.announce = self.announce or self.chunks == 0
            self.chunks += 1
            self.bytes += size
            return offset

    def close(self, stream: str) -> bool:
        """Close ``stream`` (learned already) after its waiting chunks; ``False`` when it
        was closed already (nothing to record)."""
        with self._lock:
            if stream in self._closed:
                return False
            self._closed.add(stream)
            batch = self._waiting.get(stream)
            if batch is None:
                batch = self._waiting[stream] = Batch(first=self._next[stream])
            batch.close = True
            return True

    def settle(self) -> None:
        """Wait for a recording under way (another taker's) to end."""
        with self._taking:
            pass

    @property
    def waiting(self) -> bool:
        """Whether anything waits to be recorded."""
        return bool(self._waiting)

    @contextlib.contextmanager
    def taking(self) -> Iterator[dict[str, Batch] | None]:
        """Take what waits (``None``: nothing) to record it; if the block raises, it is
        put back in front of what was emitted meanwhile (a lost race is decided again; a
        refusal that ended the invocation drops the buffer with it)."""
        with self._taking, self._took() as taken:
            yield taken

    @contextlib.asynccontextmanager
    async def taking_async(self) -> AsyncIterator[dict[str, Batch] | None]:
        """:meth:`taking` for a decision awaited on an event loop, held across its await:
        while another taker records (the stream writer, or another awaited decision of
        the same phase: ``asyncio.gather``), the loop goes on instead of blocking on the
        lock its holder may need the loop to release."""
        while not self._taking.acquire(blocking=False):
            await asyncio.sleep(TAKER_POLL_S)
        try:
            with self._took() as taken:
                yield taken
        finally:
            self._taking.release()

    @contextlib.contextmanager
    def _took(self) -> Iterator[dict[str, Batch] | None]:
        """The take (the taker's lock held), put back if the block raises."""
        with self._lock:
            taken, self._waiting = self._waiting, {}
            chunks, size = self.chunks, self.bytes
            self.chunks = self.bytes = 0
        try:
            yield taken or None
        except BaseException:
            with self._lock:
                for stream, later in self._waiting.items():
                    batch = taken.get(stream)
                    if batch is None:
                        taken[stream] = later
                        continue
                    batch.values += later.values
                    batch.sizes += later.sizes
                    batch.close = batch.close or later.close
                self._waiting = taken
                self.chunks += chunks
                self.bytes += size
                self.announce = True  # the next emit tells the stream writer again
            raise


@contextlib.contextmanager
def taking_streams(invocation: Any) -> Iterator[dict[str, Batch] | None]:
    """:meth:`StreamBuffer.taking` of ``invocation``'s buffer; ``None`` when it has none
    (or no invocation: a host's decision). Taken even when nothing waits: a decision
    waits for a recording under way (the stream writer's), which must come first."""
    buffer: StreamBuffer | None = getattr(invocation, "streams", None)
    if buffer is None:
        yield None
        return
    with buffer.taking() as taken:
        yield taken


@contextlib.contextmanager
def recording_streams(
    invocation: Any, decision: Callable[..., Any]
) -> Iterator[Callable[..., Any]]:
    """``decision`` with what ``invocation`` emitted recorded first, in the same append
    (rule 29), for the block that decides it: a refusal puts the chunks back."""
    with taking_streams(invocation) as emitted:
        yield decision if emitted is None else emitting(emitted, decision)


@contextlib.asynccontextmanager
async def recording_streams_async(
    invocation: Any, decision: Callable[..., Any]
) -> AsyncIterator[Callable[..., Any]]:
    """:func:`recording_streams` for a decision awaited on an event loop."""
    buffer: StreamBuffer | None = getattr(invocation, "streams", None)
    if buffer is None:
        yield decision
        return
    async with buffer.taking_async() as emitted:
        yield decision if emitted is None else emitting(emitted, decision)
