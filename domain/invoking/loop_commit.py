"""Decisions an event loop hands to the group commit, and awaits (issue 43).

A decision taken from a coroutine (``await inv.checkpoint_async(...)``, the next phase
an ``async`` phase returns) must not hold the loop while it waits for the scheduler's
lock and the store's commit: every other coroutine on the loop would wait with it.
:meth:`LoopCommit._decide_grouped_async` queues it for the group commit
(:mod:`..commands.group_commit`) exactly as a thread's decision is queued, and awaits a future;
the loop goes on. One thread a scheduler, the committer (:class:`LoopCommitter`,
started on first use, ended after :data:`IDLE_S` without work), takes the lock for the
decisions handed to it a round at a time (:func:`round_size` of them, in the order they
were handed), and leads a group if no other thread's leader took them first; then it
settles each one's future on its loop (one ``call_soon_threadsafe`` a loop and a
round). So any number of coroutines wait on one thread, and what they decide joins the
groups the threads' decisions form.

Why rounds: phases that started together end together, and a round that took the
whole burst would let every coroutine of it go on only after the last decision of it
was decided and appended, all at the same instant; their next phases would end
together again, and every boundary would wait for the whole burst. Taken a round at a
time, the first coroutines go on while the later decisions are decided, and the
bursts spread out (benchmarks/README.md, "Rounds of sixteen"). A round takes at least
:data:`ROUND`, and an eighth of a larger backlog: each round is a commit, and 10,000
decisions handed at once in rounds of 16 would wait for 625 of them.

The loop's part is a list append and a notify. A decision inside the task's own
``with scheduler.batch():`` is decided into the batch at once, as a thread's is (no
store is touched). A cancelled await does not take a decision back: it is taken, and
recorded if the rules allow it, as a thread's would be once queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..commands.group_commit import Call, DecisionQueue, QueuedDecision

if TYPE_CHECKING:
    from ..commands.batch import OpenBatch

T = TypeVar("T")
IDLE_S = 10.0
"""How long the committer waits for work before its thread ends (a new one starts with
the next decision handed to it)."""
ROUND = 16
"""The decisions a round of the committer takes from a backlog of up to 8 x 16 (see the
module): boundaries at 1x128 waited 4.1-7.6 ms at the median in one round for all,
2.2-3.7 ms in rounds of 16 (``benchmarks.concurrency_gaps``, two runs each); each round
more is one commit more (its fsync's CPU, 0.2-0.3 ms here)."""
SPLIT = 8
"""A larger backlog goes in rounds of an eighth of it (:func:`round_size`)."""


def round_size(backlog: int) -> int:
    """How many of ``backlog`` handed decisions the committer's next round takes: at
    least :data:`ROUND`, and an eighth of a larger backlog (so its rounds grow with the
    logarithm of a burst, not with the burst)."""
    return min(backlog, max(ROUND, backlog // SPLIT))


_Handed = tuple[QueuedDecision, "asyncio.Future[None]", asyncio.AbstractEventLoop]
_CREATING = threading.Lock()


class LoopCommitter:
    """The thread that leads group commits for decisions queued from event loops."""

    def __init__(self, settle: Callable[[list[QueuedDecision]], None], name: str):
        # Weakly: a scheduler dropped without close is not kept alive by its committer.
        self._settle = weakref.WeakMethod(settle)
        self.name = name
        self._ready = threading.Condition(threading.Lock())
        self._handed: list[_Handed] = []
        self._running = False
        self._unsettled = 0

    @property
    def unsettled(self) -> int:
        """How many decisions handed over are not settled yet."""
        with self._ready:
            return self._unsettled

    def hand(self, queued: QueuedDecision, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """Queue ``queued`` for the next leader; the future is settled on ``loop`` once
        it was decided (its outcome is ``queued``'s)."""
        future: asyncio.Future[None] = loop.create_future()
        with self._ready:
            self._handed.append((queued, future, loop))
            self._unsettled += 1
            if self._running:
                self._ready.notify()
            else:
                self._running = True
                threading.Thread(target=self._commit, name=self.name, daemon=True).start()
        return future

    def _commit(self) -> None:
        while True:
            with self._ready:
                while not self._handed:
                    if not self._ready.wait(IDLE_S) and not self._handed:
                        self._running = False
                        return
                take = round_size(len(self._handed))
                handed, self._handed = self._handed[:take], self._handed[take:]
            try:
                # One caller of the group commit for all of them: it leads, or waits for
                # the leader that takes them (without the scheduler's lock meanwhile).
                settle = self._settle()
                if settle is None:  # its scheduler is gone: no one can take them
                    raise RuntimeError("the scheduler was dropped; open the store again")
                settle([queued for queued, _, _ in handed])
            except BaseException as error:  # the store away, say: as the leader's callers see
                for queued, _, _ in handed:
                    if not queued.done:
                        queued.error, queued.done = error, True
            left = _settle(handed)
            with self._ready:
                self._unsettled -= len(handed) - len(left)
                if left:  # not taken by any leader yet (none should be): the next round's
                    self._handed[:0] = left


def _settle(handed: list[_Handed]) -> list[_Handed]:
    """Let each coroutine whose decision was settled go on, one call a loop; returns
    those not settled."""
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    left = []
    for queued, future, loop in handed:
        if queued.done:
            by_loop.setdefault(loop, []).append(future)
        else:
            left.append((queued, future, loop))
    for loop, futures in by_loop.items():
        with contextlib.suppress(RuntimeError):  # its loop is closed: no one awaits them
            loop.call_soon_threadsafe(_wake, futures)
    return left


def _wake(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        if not future.done():  # a cancelled await left it cancelled
            future.set_result(None)


class LoopCommit:
    """:meth:`_decide_grouped_async`, mixed into :class:`~..app.scheduler.Scheduler`."""

    worker: str
    _lock: Any
    _decision_queue: DecisionQueue
    _loop_committer: LoopCommitter | None = None

    if TYPE_CHECKING:

        def _settle_queued(self, queued: list[QueuedDecision]) -> None: ...
        def _decide_grouped(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        @property
        def _batch(self) -> OpenBatch | None: ...

    async def _decide_grouped_async(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """:meth:`~..commands.group_commit.GroupCommit._decide_grouped` from a coroutine: queued
        for the group commit and awaited (see the module docstring); returns once the
        decision is recorded, or raises what it raised."""
        if self._batch is not None:
            return self._decide_grouped(fn, *args, **kwargs)  # into this task's batch
        queued = QueuedDecision(Call(fn, args, kwargs))
        await self._committer().hand(queued, asyncio.get_running_loop())
        result: T = queued.outcome()
        return result

    def _committer(self) -> LoopCommitter:
        committer = self._loop_committer
        if committer is None:
            with _CREATING:
                committer = self._loop_committer
                if committer is None:
                    name = f"tasktrail-commit-{self.worker}"
                    committer = LoopCommitter(self._settle_queued, name)
                    self._loop_committer = committer
        return committer
