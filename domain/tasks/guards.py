"""The guards every decision passes first: rules 2, 1 and 3 of SPEC.md section 1.

:func:`not_closing` (rule 2) ends any decision of a closing scheduler without
a write; :func:`invocation_decision` adds, for a decision an invocation takes,
rule 1 (the task must be running) and rule 3 (an abort mark ends a run
invocation at its next decision).

Each rule is applied in exactly one place, with its number in a comment above
the branch that applies it.
"""

from __future__ import annotations

from ..errors import LeaseLost, RuleViolation
from ..world import Draft
from .context import Context
from .state import TaskState
from .validation import require_task


def not_closing(ctx: Context, task_id: str | None) -> None:
    """Refuse any decision while the scheduler is closing."""
    # 2. A closing scheduler ends every decision without a write.
    if ctx.closing:
        raise RuleViolation(2, "the scheduler is closing; open it again to decide", task_id=task_id)


def held_elsewhere(task: TaskState, ctx: Context) -> bool:
    """Whether another worker of the fleet holds the running task (SPEC section 8)."""
    return (
        task.status == "running"
        and ctx.worker is not None
        and task.worker is not None
        and task.worker != ctx.worker
    )


def invocation_decision(draft: Draft, ctx: Context, task_id: str) -> TaskState:
    """Rules 2, 1, 9 (fencing, for a fleet) and 3, in that order, for a decision an
    invocation takes."""
    not_closing(ctx, task_id)
    task = require_task(draft, task_id)
    # 1. A task that is not running ends the invocation's decision without a write.
    if task.status != "running":
        raise RuleViolation(
            1,
            f"the task is {task.status}, not running; its invocation has ended",
            task_id=task_id,
        )
    # 9 (a fleet). Fencing: a task another worker holds was taken from this one.
    if held_elsewhere(task, ctx):
        assert ctx.worker is not None and task.worker is not None
        raise LeaseLost(task_id, ctx.worker, task.worker)
    # 3. An abort mark ends a run invocation at its next decision.
    if task.mode == "run" and task.abort_requested:
        raise RuleViolation(
            3,
            "the task is abort-marked; its run invocation has ended and its abort "
            "handler runs next",
            task_id=task_id,
        )
    return task
