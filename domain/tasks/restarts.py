"""Restarts: recovery after a crash (rule 9), close (rule 10) and ``retry`` (rule 9).

At open after a crash, :func:`recover` puts every running task back to
``pending`` with one restart counted and derives what the crash may have left
undone; at every open, :func:`abandon` marks the tasks submitted with
``abandon_on_restart``; at close, :func:`stop` puts the tasks it stops back to
``pending`` with none counted; :func:`retry` clears a parked task's restart count.

Each rule is applied in exactly one place, with its number in a comment above
the branch that applies it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..world import Draft
from .context import Context
from .definitions import parked
from .ending import cascade, release_owner
from .events import AbortMarked, RestartsCleared, TaskRecovered, TaskStopped
from .guards import not_closing
from .restart_limit import limit_deciding
from .validation import act_fields, require_task


def recover(
    draft: Draft, ctx: Context, lost: Callable[[str | None], bool] | None = None
) -> list[str]:
    """Rule 9, at open after a crash: every running task back to pending, one restart
    counted. Returns the tasks that the restart limit now parks.

    For a fleet, ``lost(worker)`` says which workers' tasks are recovered: this
    worker's own name (reopened after a crash) and workers whose lease expired;
    a task a live worker holds is never touched. ``None``: every running task.

    Also derives what a crash (or another writer) may have left undone: cascade
    marks below cancelling owners (rule 6) and held outcomes whose owned work is
    gone (rule 5).
    """
    parked_ids: list[str] = []
    recovered: list[str] = []
    world = draft.world
    # Each scan peeks: a task it passes over guards nothing, so a live worker moving its
    # own tasks meanwhile does not refuse the recovery (under load, every attempt was).
    for task_id in sorted(world.live):
        task = draft.peek(task_id)
        if task is None or task.status != "running":
            continue
        # 9 (a fleet). Only the tasks of lost workers: a live worker keeps its own.
        if lost is not None and not lost(task.worker):
            continue
        # 9. Recovery: running becomes pending, and its restarts grow by one.
        task = draft.emit(
            TaskRecovered(
                task_id=task_id,
                at=ctx.now,
                rule=9,
                restarts=task.restarts + 1,
                worker=task.worker,
            )
        )
        recovered.append(task_id)
        if not task.abandon_on_restart and parked(task, ctx.restart_limit):
            parked_ids.append(task_id)
    # The worker's own name counts as lost only when it opens (its old process is gone):
    # then every flagged live task is abandoned, else those recovered from lost workers.
    abandon(draft, ctx, lost, None if lost is None or lost(ctx.worker) else recovered)
    # One walk over each tree: a cascade skips the subtrees earlier ones covered.
    visited: set[str] = set()
    for task_id in sorted(world.live):
        task = draft.peek(task_id)
        # Walked only when a mark is missing below: a walk rests on the owner, read
        # under a guard, and a live worker may be moving a cancelling owner.
        if (
            task is not None
            and task.cancelling()
            and task_id not in visited
            and _unmarked_below(draft, task_id)
        ):
            draft.get(task_id)  # acted on: read under a guard
            cascade(draft, ctx, task_id, visited)
    for task_id in sorted(world.live):
        task = draft.peek(task_id)
        if (
            task is not None
            and task.status == "completing"
            and not draft.peek_live_children(task_id)
        ):
            release_owner(draft, ctx, task_id)  # reads the owner under a guard
    return parked_ids


def _unmarked_below(draft: Draft, owner_id: str) -> bool:
    """Whether a live task below ``owner_id`` lacks its abort mark, peeked (unguarded)."""
    stack = [owner_id]
    while stack:
        for child in draft.peek_live_children(stack.pop()):
            if not child.request_marked:
                return True
            stack.append(child.id)
    return False


def abandon(
    draft: Draft,
    ctx: Context,
    lost: Callable[[str | None], bool] | None,
    task_ids: Iterable[str] | None = None,
) -> None:
    """Give tasks submitted with ``abandon_on_restart`` a ``restart`` abort mark:
    at open (``task_ids`` ``None``) every live one, whatever its status, after a
    crash or a clean close alike (pi-durable marks each such task it loads); at a
    heartbeat, those just recovered from lost workers. A task a live worker of the
    fleet is running is its worker's, not this one's to abandon."""
    for task_id in sorted(draft.world.live) if task_ids is None else task_ids:
        task = draft.peek(task_id)  # one it marks is read under a guard as it emits
        if task is None or not task.live or not task.abandon_on_restart or task.abort_requested:
            continue
        if task.status == "running" and lost is not None and not lost(task.worker):
            continue
        # 9. abandon_on_restart: nothing of the task or below it runs a phase again.
        draft.emit(AbortMarked(task_id=task_id, at=ctx.now, rule=9, reason="restart"))


def stop(draft: Draft, ctx: Context, task_ids: Iterable[str]) -> None:
    """Rule 10, at close: tasks the close stops go back to pending, no restart counted."""
    for task_id in task_ids:
        task = draft.get(task_id)
        if task is not None and task.status == "running":
            # 10. Close is not a crash.
            draft.emit(TaskStopped(task_id=task_id, at=ctx.now, rule=10))


def retry(
    draft: Draft, ctx: Context, task_id: str, *, actor: str | None = None, why: str | None = None
) -> bool:
    """Rule 9: clear a parked task's restart count (by ``actor``, because ``why``).
    Returns whether it was parked."""
    not_closing(ctx, task_id)
    task = require_task(draft, task_id)
    act = act_fields(actor, why, task_id)
    # 9. retry of a non-parked task does nothing.
    if task.status in ("terminal", "completing", "running") or not parked(
        task, limit_deciding(draft, ctx, task)
    ):
        return False
    draft.emit(RestartsCleared(task_id=task_id, at=ctx.now, **act))
    return True
