"""``Scheduler.fork`` (:class:`ForkCommands`), and what a fork starts from: its source
task as of a position or a time of the log.

:meth:`ForkCommands.fork` hands the pure decision
(:func:`..tasks.forking.fork`) the source's state as it stood then. Read here from
the source's own stream only, folded with the same ``evolve`` as every fold, so the
cost follows the task (its events), not the log: a task's state is the fold of its
own stream. :class:`~..history.until.Until` says where to stop, as for
``replay(until=...)``: after a position, or at the first event stamped later than a
time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import InvalidArgument, UnknownTask
from ..history.until import Until
from ..store.store import Store
from ..tasks import decide
from ..tasks.evolve import evolve
from ..tasks.state import TaskState
from ..telemetry import live as telemetry
from ..world import World
from .submitting import claiming
from .task_commands import _task_id

T = TypeVar("T")

At = int | float | str | datetime
"""Where a fork reads its source: a log position (an int, or digits) or a clock time
(ms as a float, an aware datetime, or ISO-8601 text with a zone)."""


def fork_point(at: At) -> Until:
    """``at`` as an :class:`Until`; a bad one is :class:`InvalidArgument`."""
    try:
        until = Until.parse(at)
    except ValueError as error:
        raise InvalidArgument(f"at: {error}") from None
    if until.position is None and until.at is None:
        raise InvalidArgument(f"at must be a position or a time, not {at!r}")
    return until


def source_as_of(store: Store, task_id: str, until: Until, now: float) -> tuple[TaskState, int]:
    """The state of ``task_id`` as of ``until``, and the position it stood at then: the
    position asked, or, for a time, that of its last event at or before it. Refused,
    naming what was wrong: a position beyond the log's end, a time after ``now`` (the
    scheduler clock), an unknown task, or one not submitted yet then."""
    if until.position is not None:
        head = store.head()
        if until.position > head:
            raise InvalidArgument(
                f"at position {until.position} is beyond the log's end (position {head})",
                task_id=task_id,
            )
    elif until.at is not None and until.at > now:
        raise InvalidArgument(f"at {until} is after the scheduler clock's now", task_id=task_id)
    records = store.stream_records(task_id)
    if not records:
        raise UnknownTask(task_id)
    state: TaskState | None = None
    position = until.position
    for recorded in records:
        if until.reached(recorded):
            break
        state = evolve(state, recorded.event)
        if until.position is None:
            position = recorded.position
    if state is None or position is None:
        raise InvalidArgument(f"it was not submitted yet as of {until}", task_id=task_id)
    return state, position


class ForkCommands:
    """``fork``, mixed into :class:`~.scheduler.Scheduler`."""

    if TYPE_CHECKING:
        store: Store
        world: World
        position: int
        _lock: threading.RLock

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def task(self, task_id: str) -> TaskState: ...
        def now(self) -> float: ...
        def _new_id(self, id: str | None) -> str: ...

    def fork(
        self,
        task_id: str,
        at: At | None = None,
        id: str | None = None,
        *,
        actor: str | None = None,
        reason: str | None = None,
    ) -> str:
        """Start a new task where ``task_id`` stood: same kind, definition version and
        owner, ``pending`` at its checkpoint (phase and attempt) with its memos, as of
        ``at`` (a log position, an int; or a clock time: ms as a float, an aware
        datetime or ISO-8601 text; default: now). Returns the new task's id (``id``,
        else a fresh one). Recorded as the fork's ``TaskSubmitted`` and a
        ``TaskForked`` naming the source and the position it stood at, with ``actor``
        and ``reason``; ``explain``, the audit trail and the report show the lineage.

        It forks the one task: the tasks the source owns are not copied, nor its abort
        mark, restarts, Turns or runs. Refused, appending nothing: an unknown task; an
        ``at`` beyond the log's end or after the clock; a source with no checkpoint
        then (not yet submitted, holding or reached an outcome: fork it as of an
        earlier position); an owner that has ended since (rule 4) or holds its outcome
        (rule 5). The source is read from its own stream, so the cost follows the
        task, not the log.
        """
        source_id = _task_id(task_id)
        if at is None:
            with self._lock:
                source = self.task(source_id)  # folds what other writers appended first
                position = self.position
        else:
            source, position = source_as_of(self.store, source_id, fork_point(at), self.now())
        new_id = self._new_id(id)
        with claiming(self.world, new_id):
            self._decide(
                decide.fork,
                task_id=new_id,
                source=source,
                position=position,
                trace=telemetry.current_carrier(),
                actor=actor,
                why=reason,
            )
        return new_id
