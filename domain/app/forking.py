"""What a fork starts from: its source task as of a position or a time of the log.

:meth:`~.task_commands.TaskCommands.fork` hands the pure decision
(:func:`..tasks.forking.fork`) the source's state as it stood then. Read here from
the source's own stream only, folded with the same ``evolve`` as every fold, so the
cost follows the task (its events), not the log: a task's state is the fold of its
own stream. :class:`~..history.until.Until` says where to stop, as for
``replay(until=...)``: after a position, or at the first event stamped later than a
time.
"""

from __future__ import annotations

from datetime import datetime

from ..errors import InvalidArgument, UnknownTask
from ..history.until import Until
from ..store.store import Store
from ..tasks.evolve import evolve
from ..tasks.state import TaskState

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
