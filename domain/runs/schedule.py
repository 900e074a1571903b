"""A task's scheduled run time: reading it and setting it (SPEC.md section 3).

The time lives on the task's own ``schedule:task`` stream, set or cleared by a
:class:`~.events.ScheduleSet`. Setting it clears the task's marker in the
ledger, so a done schedule fires again at its new time.
"""

from __future__ import annotations

from ..errors import InvalidArgument, RuleViolation
from ..tasks.context import Context
from ..tasks.fields import finite_number
from ..tasks.validation import require_task, time_ms
from ..world import Draft
from .events import ScheduleSet
from .identity import schedule_stream_id
from .state import ScheduleState


def scheduled_at(draft: Draft, task_id: str) -> float | None:
    """The task's scheduled run time, if it has one."""
    state = draft.get_stream(schedule_stream_id(task_id))
    return state.run_at if isinstance(state, ScheduleState) else None


def set_schedule(draft: Draft, ctx: Context, task_id: str, run_at: float | None) -> None:
    """Set (or, with ``None``, clear) the time a task is scheduled to run at."""
    task = require_task(draft, task_id)
    if task.status == "terminal":
        raise RuleViolation(4, "the task is terminal; it cannot be scheduled", task_id=task_id)
    if run_at is not None and ((usable := finite_number(run_at)) is None or usable < 0):
        raise InvalidArgument(
            f"run_at must be a finite time >= 0 in ms, or None, not {run_at!r}", task_id=task_id
        )
    if run_at is not None:
        time_ms(run_at, "run_at", task_id)
    draft.emit_stream(ScheduleSet(task_id=task_id, at=ctx.now, run_at=run_at))
