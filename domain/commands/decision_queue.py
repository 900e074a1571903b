"""The queue of a group commit (:mod:`.group_commit`): the decisions callers queued for
the next leader, and who leads.

A caller queues its decisions and either leads (no leader at work: it takes the
scheduler's lock and every decision queued by then) or waits, on a lock of its own,
until a leader settled its decisions or handed it the lead. A leader, once done,
releases the callers whose decisions it settled, each once, and hands the lead to the
caller of the first decision still queued. So a settled caller goes on at once, without
taking the scheduler's lock (which the next leader may hold through its whole group),
and none is woken for nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple


class Call(NamedTuple):
    """A decision to take, as ``_decide(fn, *args, **kwargs)``."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    then: Callable[[Any], None] | None = None
    """Called with what ``fn`` returned once the decision is recorded, before the lock
    is given up (a reservation's invocation is registered there: no one sees the task
    reserved here and its invocation missing)."""


class Caller:
    """One caller's decisions, queued together, and what it waits on: a lock held
    until a leader releases it."""

    __slots__ = ("_released", "decisions", "leads", "thread")

    def __init__(self, decisions: list[QueuedDecision]) -> None:
        self.decisions = decisions
        self.thread = threading.get_ident()
        self.leads = False
        """Handed the lead: its decisions are still queued."""
        self._released = threading.Lock()
        self._released.acquire()

    def wait(self) -> None:
        """Until a leader settled its decisions or handed it the lead."""
        self._released.acquire()

    def release(self) -> None:
        """Let the caller go on (once: at most one leader settles its decisions)."""
        self._released.release()


class QueuedDecision:
    """One caller's decision, waiting for a leader to take it."""

    __slots__ = ("args", "caller", "done", "error", "fn", "kwargs", "result", "then")

    def __init__(self, call: Call) -> None:
        self.fn, self.args, self.kwargs, self.then = call
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None
        self.caller: Caller | None = None

    def settle(self, decide: Callable[[], Any]) -> None:
        """Take the decision with ``decide`` and keep what it returned or raised."""
        try:
            self.result = decide()
        except Exception as error:  # the caller's to see, in its own thread
            self.error = error
        self.recorded()

    def recorded(self) -> None:
        """The decision is settled: run its ``then`` (under the scheduler's lock, as
        the leader holds it) when it was recorded, and let its caller go on."""
        if self.error is None and self.then is not None:
            try:
                self.then(self.result)
            except Exception as error:
                self.error = error
        self.done = True

    def outcome(self) -> Any:
        """What the decision returned; raises what it raised."""
        if self.error is not None:
            raise self.error
        return self.result


class Leadership:
    """A caller's turn to lead: the decisions it takes (:attr:`taken`), and, on exit,
    its callers released and the lead handed over (:meth:`DecisionQueue.hand_over`)."""

    __slots__ = ("caller", "previous", "queue", "taken")

    def __init__(self, queue: DecisionQueue, caller: Caller, previous: Caller | None) -> None:
        self.queue, self.caller, self.previous = queue, caller, previous
        self.taken: list[QueuedDecision] = []

    def __enter__(self) -> Leadership:
        return self

    def __exit__(self, *exc: object) -> None:
        self.queue.hand_over(self)


class DecisionQueue:
    """The decisions queued for the next leader, in the order they were queued, and
    the caller that leads (see the module)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._queued: list[QueuedDecision] = []
        self._leader: Caller | None = None
        """The caller leading now, or handed the lead (``None``: no leader)."""

    def enqueue(self, decisions: list[QueuedDecision]) -> Leadership | None:
        """Queue ``decisions`` together (one leader takes all of them) and wait until
        a leader settled them (``None``) or this caller is to lead: its
        :class:`Leadership`, to hold while it takes the scheduler's lock and leads."""
        if not decisions:
            return None  # nothing to settle: no leader would ever release it
        caller = Caller(decisions)
        for decision in decisions:
            decision.caller = caller
        with self._guard:
            self._queued.extend(decisions)
            leader = self._leader
            # A leader's own decision may lead a group of its own (the lock is its).
            if leader is None or leader.thread == caller.thread:
                self._leader = caller
                return Leadership(self, caller, leader)
        caller.wait()
        return Leadership(self, caller, None) if caller.leads else None

    def put(self, decisions: Sequence[QueuedDecision]) -> None:
        """Queue ``decisions`` together, with no caller waiting for them: the next
        leader takes them (a caller's :meth:`enqueue` leads when none is at work)."""
        with self._guard:
            self._queued.extend(decisions)

    def take(self) -> list[QueuedDecision]:
        """Every decision queued so far; the queue is empty after."""
        with self._guard:
            taken, self._queued = self._queued, []
        return taken

    def hand_over(self, leadership: Leadership) -> None:
        """A leader is done: release each caller whose decisions it settled, and hand
        the lead to the caller of the first decision still queued (none: no leader)."""
        following: Caller | None = None
        with self._guard:
            if leadership.previous is not None:
                self._leader = leadership.previous  # the outer group goes on
            else:
                # Never the leader itself: its decisions are still queued only when it
                # failed before it took them, and it is not waiting to lead.
                own = leadership.caller
                waiting = (d.caller for d in self._queued if d.caller not in (None, own))
                following = self._leader = next(waiting, None)
                if following is not None:
                    following.leads = True
        released: set[int] = {id(leadership.caller)}  # the leader's own goes on anyway
        for decision in leadership.taken:
            caller = decision.caller
            if caller is not None and id(caller) not in released:
                released.add(id(caller))
                caller.release()
        if following is not None:
            following.release()
