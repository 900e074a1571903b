"""Calling a phase or abort handler, sync or ``async def``.

A handler gets its :class:`~..tasks.invocation.Invocation` and may be a plain function
or a coroutine function (or return any awaitable); one definition may mix both. How an
awaitable is run depends on who runs the invocation:

- :meth:`~.scheduler.Scheduler.run_pass` (tests, simple hosts) runs it to its end on an
  event loop of the calling thread's own (:func:`run_awaitable`): the pass waits for
  it, as it waits for a sync phase.
- A :class:`~.worker.Worker` drives an invocation whose handler is an ``async def``
  (:func:`is_async_handler`) by a coroutine on the worker's event loop, with no thread
  of its own (:mod:`.loop_invocations`): the handler's coroutine runs there as a task
  (:func:`phase_coroutine`), so async phases of many invocations wait together on one
  loop, and sync phases run in threads of a bounded pool: neither blocks the other. A
  plain function that returns an awaitable runs in such a thread, which waits while the
  loop runs the awaitable.

An async phase that is cancelled (the worker's stop, past its grace) is handled as a
sync phase that raised: :class:`PhaseCancelled`. One past its ``timeout_s`` is cancelled
and raises :class:`~..errors.PhaseTimeout`; a sync one cannot be, and its timer calls
``overran`` at the deadline (:mod:`..service.retries` fences it: rule 24).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from ..errors import PhaseTimeout
from ..tasks.invocation import RUNNING_PHASE

AwaitableRunner = Callable[[Awaitable[Any]], Any]
"""Runs an awaitable a handler returned to its end and gives its result (or raises)."""


class PhaseCancelled(Exception):
    """An ``async`` phase was cancelled before it decided (the worker stopped)."""

    def __init__(self) -> None:
        super().__init__("the phase was cancelled before it decided (the worker stopped)")


def call_handler(
    handler: Callable[[Any], Any],
    invocation: Any,
    run: AwaitableRunner,
    limit: PhaseTimeout | None = None,
    overran: Callable[[], None] | None = None,
) -> Any:
    """Call ``handler(invocation)``; an awaitable it returns is run by ``run``. Given a
    ``limit``, an awaitable is cancelled at its timeout (``limit`` raised), and a timer
    calls ``overran`` if the handler itself is still running then."""
    token = RUNNING_PHASE.set(invocation)
    try:
        if limit is None or overran is None:
            result = handler(invocation)
            return run(result) if inspect.isawaitable(result) else result
        deadline = time.monotonic() + limit.timeout_s
        timer = threading.Timer(limit.timeout_s, overran)
        timer.daemon = True
        timer.start()
        try:
            result = handler(invocation)
        finally:
            timer.cancel()
        if invocation.timed_out is not None:  # overran: what it returns is not its say
            if inspect.iscoroutine(result):
                result.close()  # never run
            return None
        if not inspect.isawaitable(result):
            return result
        return run(_bounded(result, deadline - time.monotonic(), limit))
    finally:
        RUNNING_PHASE.reset(token)


def is_async_handler(handler: Callable[[Any], Any]) -> bool:
    """Whether calling ``handler`` makes a coroutine and runs none of its code: an
    ``async def`` function, a partial of one, or an object whose ``__call__`` is one."""
    call = type(handler).__call__ if not inspect.isroutine(handler) else None
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def phase_coroutine(
    handler: Callable[[Any], Any], invocation: Any, limit: PhaseTimeout | None
) -> Coroutine[Any, Any, Any]:
    """The coroutine an ``async def`` handler's phase runs as, cancelled at its timeout
    (``limit`` raised then). Call it where :data:`RUNNING_PHASE` is ``invocation``: the
    task made of it keeps that context."""
    coroutine = as_coroutine(handler(invocation))
    if limit is None:
        return coroutine
    return _bounded(coroutine, limit.timeout_s, limit)


async def _bounded(awaitable: Awaitable[Any], seconds: float, limit: PhaseTimeout) -> Any:
    """``awaitable``, cancelled after ``seconds``: then ``limit`` is raised."""
    scope = asyncio.timeout(max(0.0, seconds))
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise limit from None
        raise


def run_awaitable(awaitable: Awaitable[Any]) -> Any:
    """Run ``awaitable`` to its end from synchronous code: on a fresh event loop in this
    thread, or, when this thread already runs a loop (a host calling ``run_pass`` from
    ``async`` code), on a loop in a thread of its own while this one waits."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run_here(awaitable)
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = _run_here(awaitable)
        except BaseException as error:  # handed to the waiting thread as it is
            outcome["error"] = error

    thread = threading.Thread(target=run, name="tasktrail-phase-loop", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _run_here(awaitable: Awaitable[Any]) -> Any:
    try:
        return asyncio.run(as_coroutine(awaitable))
    except asyncio.CancelledError:
        raise PhaseCancelled() from None


async def _as_coroutine(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def as_coroutine(awaitable: Awaitable[Any]) -> Coroutine[Any, Any, Any]:
    """A coroutine awaiting ``awaitable`` (what ``run_coroutine_threadsafe`` takes)."""
    if inspect.iscoroutine(awaitable):
        return awaitable
    return _as_coroutine(awaitable)
