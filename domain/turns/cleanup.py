"""Runtime-cleanup obligations: each role of a completed task owes its runtime a
cleanup (``cleanup.completed_task``), kept on ``cleanup:<task id>`` so that it
outlives the task; an attempt settles the obligation, or is recorded as failed and
leaves it open.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Literal

from ..tasks.context import Context
from ..tasks.guards import not_closing as _open
from ..tasks.state import TaskState
from ..tasks.validation import require_task as _task
from ..world import Draft, World
from .checks import check_role
from .events import (
    RuntimeCleanupFailed,
    RuntimeCleanupRequired,
    RuntimeCleanupSettled,
    cleanup_stream_id,
)
from .refusals import TurnRuleViolation
from .settings import TurnSettings
from .state import CleanupState


def completed(task: TaskState) -> bool:
    """Whether the task's decided outcome is ``completed`` (held or terminal)."""
    return task.outcome is not None and task.outcome.status == "completed"


def cleanup_state(draft: Draft | World, task_id: str) -> CleanupState | None:
    """The cleanup obligations of a task's roles, or ``None`` if none were ever required."""
    stream_id = cleanup_stream_id(task_id)
    if isinstance(draft, Draft):
        state: CleanupState | None = draft.get_stream(stream_id)
    else:
        state = draft.streams.get(stream_id)
    return state


def require_cleanups(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    roles: Collection[str] | None = None,
    *,
    pass_id: str | None = None,
) -> list[str]:
    """Give each role of a completed task its runtime-cleanup obligation; returns
    the roles that got one now."""
    _open(ctx, task_id)
    task = draft.get(task_id)
    if task is None or not completed(task):
        return []
    state = cleanup_state(draft, task_id)
    known = state.obligations if state is not None else {}
    required: list[str] = []
    for name, role in task.roles.items():
        if (roles is not None and name not in roles) or name in known:
            continue
        # cleanup.completed_task: a completed task's roles owe a cleanup; a role with an
        # active Turn waits for it to end, unless the task is terminal (its Turns are frozen).
        if role.active is not None and task.status != "terminal":
            continue
        draft.emit_stream(
            RuntimeCleanupRequired(
                task_id=task_id,
                at=ctx.now,
                role=name,
                cause="cleanup.completed_task",
                pass_id=pass_id,
            )
        )
        required.append(name)
    return required


def settle_cleanup(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    role: str,
    *,
    error: str | None = None,
    pass_id: str | None = None,
) -> Literal["settled", "failed"]:
    """Settle a role's open cleanup obligation, or, given ``error``, record a failed
    attempt (the obligation stays open)."""
    _open(ctx, task_id)
    _task(draft, task_id)
    check_role(role, task_id)
    state = cleanup_state(draft, task_id)
    obligation = state.obligations.get(role) if state is not None else None
    if obligation is None or not obligation.open:
        raise TurnRuleViolation(
            "cleanup.no_obligation",
            f"role {role!r} has no open runtime-cleanup obligation",
            task_id=task_id,
        )
    if error is not None:
        draft.emit_stream(
            RuntimeCleanupFailed(
                task_id=task_id, at=ctx.now, role=role, error=str(error), pass_id=pass_id
            )
        )
        return "failed"
    draft.emit_stream(
        RuntimeCleanupSettled(task_id=task_id, at=ctx.now, role=role, pass_id=pass_id)
    )
    return "settled"
