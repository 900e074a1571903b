"""Group commit: the decisions of many threads appended in one transaction.

A worker runs many invocations at once, and every decision a phase takes is a command:
under the scheduler's lock and the store's writer turn, a fold of what other writers
appended, an append and its commit (an fsync on SQLite at ``durability="full"``). Taken
one at a time, the commits are the bound, and in a fleet so is every hand-over of the
store from one process to the next (each new holder folds what the others wrote).

:meth:`GroupCommit._decide_grouped` queues a decision and waits for the lock instead.
The thread that takes the lock next (the leader) takes every queued decision, decides
each in turn on the world the earlier ones left, exactly as they would have run one
after another in queue order, and appends all their events in one transaction (a
:class:`~.group_append.Group`); what queues while they are decided joins before the append.
The more writers wait, the larger the groups grow, so the cost of a hand-over is shared.
Each caller returns, or raises, only once its own events are durable: nothing is
acknowledged before it is recorded. A caller whose decision a leader at work took waits
for that leader (:meth:`DecisionQueue.leadership`), not for the scheduler's lock: a group's
callers go on at once, none waits behind the next leader's whole group.

A decision a rule refuses raises for its caller and adds nothing, as it would alone.
When the store refuses the group's append (another writer appended first: a
:class:`~..errors.ConflictError`), nothing of the group was written: the world is put
back (from the states the group kept, no read) and the group is decided again on the
store's state, then, refused once more, each decision alone: each caller sees what it
would have seen had the decisions run one after another. A decision that names a task
this world does not know yet is taken alone too (alone, it folds what other writers
appended and tries once more).

A thread inside its own ``with scheduler.batch():`` queues nothing: its decisions go
to its batch (:mod:`.batch`), and no leader of another thread takes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConflictError, UnknownTask
from ..tasks.live_index import TASK_SEQ
from ..telemetry import live as telemetry
from .batch import OpenBatch
from .decision_queue import Call as Call  # re-exported: the commands name them here
from .decision_queue import DecisionQueue as DecisionQueue
from .decision_queue import QueuedDecision as QueuedDecision
from .group_append import Group, GroupAppend

if TYPE_CHECKING:
    from ..store.store import Store
    from ..tasks.invocation import Invocation
    from ..world import World

T = TypeVar("T")


GROUP_ATTEMPTS = 2
"""How often a group the store refused is decided again as a group (on the store's
state: a decision that lost its race is refused for its caller alone) before each of
its decisions is taken alone."""


class GroupCommit(GroupAppend):
    """:meth:`_decide_grouped`, mixed into :class:`~.scheduler.Scheduler`."""

    store: Store
    world: World
    conflicts: int
    _closed: bool
    _resumed: set[str]
    _lock: Any
    _group: Group | None
    _invocations: dict[str, Invocation]
    _decision_queue: DecisionQueue

    if TYPE_CHECKING:

        def refresh(self) -> int: ...
        def _refresh_unless_quiet(self) -> None: ...
        def _renew_lease(self, *, force: bool = False) -> None: ...
        def _snapshot_due(self) -> None: ...
        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def _decide_on(
            self, world: World, batch: OpenBatch | None, fn: Callable[..., T], args: Any, kw: Any
        ) -> T: ...
        def _deciding_on(self) -> tuple[World, OpenBatch | None]: ...
        @property
        def _batch(self) -> OpenBatch | None: ...

    def _decide_grouped(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """:meth:`~.decision.DecisionCycle._decide`, in a group with the decisions other
        threads queued meanwhile (see the module docstring); returns once recorded."""
        if self._batch is not None:  # this context's batch: decided into it, here
            return self._decide(fn, *args, **kwargs)
        (queued,) = self._decide_all([Call(fn, args, kwargs)])
        result: T = queued.outcome()
        return result

    def _decide_all(self, calls: Sequence[Call]) -> list[QueuedDecision]:
        """Queue each ``(fn, args, kwargs)`` of ``calls``, in order, and return once
        every one was decided (each :class:`QueuedDecision` holds its outcome)."""
        queued = [QueuedDecision(call) for call in calls]
        if self._batch is not None:
            # This context's batch: decided into it here, by no other thread's leader.
            with self._lock:
                for q in queued:
                    q.settle(partial(self._decide, q.fn, *q.args, **q.kwargs))
            return queued
        self._settle_queued(queued)
        return queued

    def _settle_queued(self, queued: list[QueuedDecision]) -> None:
        """Queue ``queued`` as one caller's and return once a leader (this thread, or
        another) settled each: how a thread, or the event loops' committer, decides."""
        leadership = self._decision_queue.enqueue(queued)
        if leadership is None:  # a leader took them: settled
            return
        with leadership, self._lock:
            if not all(q.done for q in queued):  # this caller leads: what is queued now
                self._lead(leadership.taken)

    def _lead(self, group: list[QueuedDecision]) -> None:
        """Take the queued decisions into ``group`` and settle each (``done``), even
        when this thread fails midway, so that no caller waits for a leader that is gone
        (the leadership releases the callers of ``group``)."""
        try:
            with self.store.turn():
                # Taken once the turn is this process's: what queued meanwhile joins in.
                group.extend(self._decision_queue.take())
                alone = group
                for _ in range(GROUP_ATTEMPTS):
                    # One decision, or a closed scheduler (refused): each as it would
                    # run alone.
                    if len(alone) < 2 or self._closed:
                        break
                    alone = self._decide_together(alone, group)
                for queued in alone:
                    queued.settle(partial(self._decide, queued.fn, *queued.args, **queued.kwargs))
        except BaseException as error:
            for queued in group:
                if not queued.done:
                    queued.error, queued.done = error, True
            raise

    def _decide_together(
        self, group: list[QueuedDecision], taken: list[QueuedDecision]
    ) -> list[QueuedDecision]:
        """Decide ``group`` in this process's turn and append it in one transaction,
        with what queued meanwhile (added to ``taken`` too: the leader settles every
        decision it took); returns the decisions not settled: all of them when the
        store refused the append (nothing of it was written), else those that named a
        task unknown here."""
        # Decide on the store's current state: fold what other writers appended.
        self._refresh_unless_quiet()
        self._renew_lease()
        self._snapshot_due()
        # The submission numbers of just the tasks it writes are kept, as they are
        # written (DecisionCycle._commit): a copy of every live task's would cost a
        # group the size of the live work.
        batch = Group(set(self._invocations), self.world.indexes.get(TASK_SEQ, 0))
        self._group = batch
        decided: list[QueuedDecision] = []
        refused: list[QueuedDecision] = []
        unknown: list[QueuedDecision] = []
        group = list(group)
        world, _ = self._deciding_on()  # a leader is in no batch: the group's one world
        try:
            for queued in _growing(group, self._decision_queue, taken):
                try:
                    queued.result = self._decide_on(
                        world, None, queued.fn, queued.args, queued.kwargs
                    )
                except UnknownTask:
                    unknown.append(queued)  # alone, it refreshes and decides once more
                except Exception as error:  # refused: added nothing to the group
                    queued.error = error
                    refused.append(queued)
                else:
                    decided.append(queued)
        except BaseException:  # an interrupt of this thread: nothing of the group stays
            self._group = None
            if batch.events:
                self._reload(batch)
            raise
        events, versions = list(batch.events), list(batch.versions)
        try:
            self._flush_group()  # on any failure the world is put back to the store's
        except ConflictError:
            self.conflicts += 1
            # Every one is decided again: a refusal may have rested on an earlier
            # decision of the group, which was not recorded (no caller saw it yet).
            for queued in refused:
                queued.error = None
            return group  # in queue order
        except Exception as error:
            for queued in decided:
                queued.error, queued.done = error, True
            for queued in refused:
                queued.done = True
            return unknown
        finally:
            self._group = None
        telemetry.committed(self, events, versions, before=batch.before)  # never raises
        for queued in refused:
            queued.done = True
        for queued in decided:
            queued.recorded()
        return unknown


def _growing(
    group: list[QueuedDecision], queue: DecisionQueue, taken: list[QueuedDecision]
) -> Iterator[QueuedDecision]:
    """Each decision of ``group``, then each one queued while they were decided (before
    the append: the world is as current for them, and they share its commit)."""
    n = 0
    while True:
        while n < len(group):
            n += 1
            yield group[n - 1]
        late = queue.take()
        if not late:
            return
        group.extend(late)
        taken.extend(late)
