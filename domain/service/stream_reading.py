"""Reading a task's stream from the log (rules 28 and 29), from any process that opened
the store, a worker or not, read-only too: :class:`StreamCursor` folds the task's own
events (the one ``evolve``) from the version it reached, and hands out each chunk after
the offset it was given once, in offset order; :func:`follow` and :func:`follow_async`
wait for more on the store's news (:mod:`..store.news`), never by sleeping on a period.

A reader that reconnects with the last offset it saw (``after=N``) reads the task's
events again from its first (an indexed read of one stream, whose values it skips up to
N): offsets are stable (rule 29), so it gets N+1 onwards, each once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument, UnknownTask
from ..store.news import deadline_of
from ..tasks.evolve import evolve
from ..tasks.state import TaskState
from ..tasks.streams import ChunksEmitted, closed, stream_name

if TYPE_CHECKING:
    from ..store.store import Store

Chunk = tuple[int, Any]
"""A chunk as a reader gets it: ``(offset, value)``."""


class StreamCursor:
    """Where a reader of one stream of one task has got to."""

    def __init__(self, store: Store, task_id: str, stream: str, after: int) -> None:
        if not isinstance(task_id, str) or not task_id:
            raise InvalidArgument(f"a task id must be a non-empty string, not {task_id!r}")
        if isinstance(after, bool) or not isinstance(after, int) or after < -1:
            raise InvalidArgument(f"after must be an offset (an int >= -1), not {after!r}")
        self.store = store
        self.task_id = task_id
        self.stream = stream_name(stream, task_id)
        self.last = after
        """The last offset handed out (``after`` at first)."""
        self.task: TaskState | None = None
        self._version = 0

    def look(self) -> tuple[list[Chunk], bool]:
        """The chunks recorded since the last look, and whether the stream is closed
        (then no chunk follows those returned). Raises
        :class:`~..errors.UnknownTask` for a task the store does not have."""
        found: list[Chunk] = []
        stream, last, task = self.stream, self.last, self.task
        for recorded in self.store.stream_records(self.task_id, self._version):
            event = recorded.event
            task = evolve(task, event)
            self._version = recorded.originator_version
            if event.__class__ is ChunksEmitted and event.stream == stream:
                first: int = event.first
                values: list[Any] = event.values
                skip = max(0, last + 1 - first)
                found.extend(enumerate(values[skip:], first + skip))
                last = max(last, first + len(values) - 1)
        self.task, self.last = task, last
        if task is None:
            raise UnknownTask(self.task_id)
        return found, closed(task, stream)


def _timed_out(cursor: StreamCursor, timeout: float | None) -> TimeoutError:
    return TimeoutError(
        f"task {cursor.task_id}: no chunk of stream {cursor.stream!r} after offset "
        f"{cursor.last} for {timeout} s; read again with after={cursor.last} to go on"
    )


def first_look(cursor: StreamCursor) -> tuple[int, list[Chunk], bool]:
    """The news generation, then the cursor's first look (news after it wakes a wait)."""
    seen = cursor.store.news.generation
    found, ended = cursor.look()
    return seen, found, ended


def follow(
    cursor: StreamCursor, follow: bool, timeout: float | None, first: tuple[int, list[Chunk], bool]
) -> Iterator[Chunk]:
    """Every chunk after the cursor's offset, in order, from its ``first`` look on; with
    ``follow``, waiting for more until the stream closes, and raising
    :class:`TimeoutError` after ``timeout`` seconds without a new chunk (``None``: no
    limit)."""
    news = cursor.store.news
    deadline = deadline_of(timeout)
    seen, found, ended = first
    while True:
        if found:
            yield from found
            deadline = deadline_of(timeout)
        if ended or not follow:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _timed_out(cursor, timeout)
        if news.generation == seen:
            news.wait(seen, remaining)
        seen = news.generation
        found, ended = cursor.look()


async def follow_async(
    cursor: StreamCursor, follow: bool, timeout: float | None
) -> AsyncIterator[Chunk]:
    """:func:`follow` for an event loop: each look runs in the loop's default executor
    (briefly), each wait is a future the news settles."""
    news = cursor.store.news
    deadline = deadline_of(timeout)
    seen, found, ended = await asyncio.to_thread(first_look, cursor)
    while True:
        for item in found:
            yield item
        if found:
            deadline = deadline_of(timeout)
        if ended or not follow:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _timed_out(cursor, timeout)
        if news.generation == seen:
            await news.wait_async(seen, remaining)
        seen = news.generation
        found, ended = await asyncio.to_thread(cursor.look)
