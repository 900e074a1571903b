"""A task's answer back to its caller (the Service API issue, item 1): a mixin of the
``Scheduler``.

A phase ends its task with ``inv.finish("completed", result=VALUE)``: the value (JSON,
as large as a memo) is carried on the event that decides the outcome and kept on the
task's :class:`~..tasks.state.Outcome`. :meth:`ResultCommands.result` waits for the task
to be terminal and returns that outcome: status, result and error. It waits on the
store's news (:mod:`..store.news`: this process's appends at once, another process's
through ``PRAGMA data_version`` or LISTEN/NOTIFY), never by sleeping, so it works from
any process that opened the store, a worker or not; :meth:`ResultCommands.result_async`
waits on an event loop the same way, one future a waiter.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgument
from ..store.news import deadline_of
from ..tasks.state import Outcome, TaskState

if TYPE_CHECKING:
    from ..store.store import Store


def _timeout(timeout: Any) -> float | None:
    """A wait's timeout, checked: ``None`` (no limit) or a number of seconds, 0 or more."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise InvalidArgument(f"timeout must be a number of seconds or None, not {timeout!r}")
    if math.isnan(timeout) or timeout < 0:
        raise InvalidArgument(f"timeout must be a number of seconds >= 0, not {timeout!r}")
    return None if math.isinf(timeout) else float(timeout)


def _timed_out(task_id: str, timeout: float | None, task: TaskState) -> TimeoutError:
    return TimeoutError(
        f"task {task_id} is not terminal after {timeout} s (it is {task.status}); "
        "wait longer, or look again later"
    )


class ResultCommands:
    """``outcome``, ``result`` and ``result_async``, mixed into the Scheduler."""

    if TYPE_CHECKING:
        store: Store

        def task(self, task_id: str) -> TaskState: ...

    def outcome(self, task_id: str) -> Outcome | None:
        """The outcome of a task (status, result, error) once decided, else ``None``;
        what a phase's ``inv.outcome`` reads of a task it waited on. Raises
        :class:`~..errors.UnknownTask` for an id never submitted."""
        return self.task(task_id).outcome

    def result(self, task_id: str, timeout: float | None = None) -> Outcome:
        """Wait until the task is terminal and return its :class:`Outcome`: ``status``,
        ``result`` (what ``finish(result=...)`` gave, else ``None``) and ``error``.

        Raises :class:`TimeoutError` when it is not terminal after ``timeout`` seconds
        (``None``: no limit) and :class:`~..errors.UnknownTask` for an id never
        submitted. It wakes on the store's news, not by polling on a period.
        """
        limit = _timeout(timeout)
        deadline = deadline_of(limit)
        news = self.store.news
        while True:
            seen = news.generation  # before the read: news after it wakes the wait
            task = self.task(task_id)
            if task.status == "terminal" and task.outcome is not None:
                return task.outcome
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timed_out(task_id, limit, task)
            news.wait(seen, remaining)

    async def result_async(self, task_id: str, timeout: float | None = None) -> Outcome:
        """:meth:`result` for an asyncio host: the event loop goes on meanwhile (the
        wait is a future the news settles; each look at the store runs in the loop's
        default executor, briefly)."""
        limit = _timeout(timeout)
        deadline = deadline_of(limit)
        news = self.store.news
        while True:
            seen = news.generation
            task = await asyncio.to_thread(self.task, task_id)
            if task.status == "terminal" and task.outcome is not None:
                return task.outcome
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timed_out(task_id, limit, task)
            await news.wait_async(seen, remaining)
