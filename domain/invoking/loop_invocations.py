"""An ``async`` invocation, driven by a coroutine on the worker's event loop (issue 43).

:func:`run_on_loop` performs an invocation's steps (:mod:`.phase_steps`) as an asyncio
task, with no thread of its own, and never holds the loop longer than it takes to hand
work over:

- an ``async def`` handler's coroutine runs as a task of its own on the loop (in a
  context where ``RUNNING_PHASE`` is the invocation and its phase span is current),
  cancelled at its timeout (rule 24) or at a stop past the grace;
- a sync handler (a definition may mix both) runs in a thread of the worker's bounded
  pool, and the coroutine awaits it;
- the next phase a handler returns is checkpointed through the awaitable form
  (``checkpoint_async``): queued for the group commit, whose committer settles it
  (:mod:`.loop_commit`);
- what else takes the scheduler's lock (a fault, a retry's backoff or a failed phase's
  end, a drained task noted) runs in a small pool of threads, awaited; once the
  scheduler closes, these record nothing and take no lock, and run on the loop.

Rules 1-3, 9 (fencing), 23 and 24 are the steps' own, as for a thread's invocation.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ..tasks.invocation import RUNNING_PHASE, Invocation
from ..telemetry import live as telemetry
from .phase_calls import AwaitableRunner, PhaseCancelled, is_async_handler, phase_coroutine
from .phase_steps import CallHandler, MoveOn, Step, Steps, advance
from .threads import DaemonPool

if TYPE_CHECKING:
    from .phase_steps import PhaseSteps


class Run:
    """One invocation in flight in a worker, however it is driven."""

    __slots__ = ("awaiting", "driver", "phase", "task_id")

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.phase: asyncio.Task[Any] | None = None
        """The task of the ``async`` phase it awaits now (read and set on the loop)."""
        self.driver: asyncio.Task[None] | None = None
        """The coroutine that drives it (a reference: the loop keeps tasks weakly)."""
        self.awaiting: Any = None
        """The future a thread of the pool waits on, running an awaitable a sync
        handler returned on the loop (``concurrent.futures.Future``)."""


class LoopHost(Protocol):
    """What :func:`run_on_loop` needs of the worker's ``Invocations``
    (``domain/app/invocations.py``); its scheduler's steps are :mod:`.phase_steps`'."""

    @property
    def scheduler(self) -> PhaseSteps: ...
    @property
    def phase_threads(self) -> DaemonPool: ...
    @property
    def commit_threads(self) -> DaemonPool: ...

    def await_on_loop(self, run: Run) -> AwaitableRunner: ...
    def over(self, run: Run, report: Any, error: Exception | None) -> None: ...


async def run_on_loop(
    host: LoopHost,
    run: Run,
    invocation: Invocation,
    steps: Steps,
    first: Step | None,
    report: Any,
) -> None:
    """Perform ``steps`` from ``first`` (else from their start) on this loop, then end
    the invocation and tell ``host`` it is over."""
    s = host.scheduler
    error: Exception | None = None
    try:
        try:
            step = first if first is not None else advance(steps)
            while step is not None:
                sent: Any = None
                failed: Exception | None = None
                try:
                    sent = await _perform(host, run, invocation, step)
                except Exception as raised:  # the steps' to handle, as a phase's error
                    failed = raised
                step = advance(steps, sent, failed)
        finally:
            await _end(host, invocation)
        if not s._task_now(invocation.task_id).live:
            report.ended.append(invocation.task_id)
    except Exception as raised:  # the store failed under a decision: the worker's loop decides
        error = raised
    finally:
        host.over(run, report, error)


async def _perform(host: LoopHost, run: Run, invocation: Invocation, step: Step) -> Any:
    s = host.scheduler
    if isinstance(step, CallHandler):
        if not is_async_handler(step.handler):
            # In a thread of the pool, as a thread's invocation calls it (its timer too).
            runner = host.await_on_loop(run)
            return await host.phase_threads.run(s._perform, invocation, runner, step)
        with telemetry.phase_context(s, invocation.task_id):
            return await _phase(run, invocation, step)
    if isinstance(step, MoveOn):
        await invocation.checkpoint_async(step.phase)
        return None
    if s.closing:  # refused or skipped at once, without the lock (a close's cancellations)
        return step.action()
    return await host.commit_threads.run(step.action)


async def _phase(run: Run, invocation: Invocation, step: CallHandler) -> Any:
    """The ``async`` handler's phase, as a task of its own: a stop cancels it alone."""
    token = RUNNING_PHASE.set(invocation)
    try:  # the task takes this context: the invocation, and the phase's span
        phase = asyncio.get_running_loop().create_task(
            phase_coroutine(step.handler, invocation, step.limit)
        )
    finally:
        RUNNING_PHASE.reset(token)
    run.phase = phase
    try:
        return await phase
    except asyncio.CancelledError:
        driver = asyncio.current_task()
        if phase.cancelled() and (driver is None or not driver.cancelling()):
            raise PhaseCancelled() from None  # handled as a sync phase that raised
        raise
    finally:
        run.phase = None


async def _end(host: LoopHost, invocation: Invocation) -> None:
    """:meth:`~.phase_steps.PhaseSteps._end_invocation`, on the loop when the lock is
    free, else in a thread of the pool (the loop never waits for it)."""
    s = host.scheduler
    if s._invocations.get(invocation.task_id) is not invocation:
        s._end_invocation(invocation)  # takes no lock then
    elif s._lock.acquire(blocking=False):
        try:
            s._end_invocation(invocation)
        finally:
            s._lock.release()
    else:
        await host.commit_threads.run(partial(s._end_invocation, invocation))
