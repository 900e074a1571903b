"""The decisions a controller pass records about itself: its start (clearing the
retries of tasks that ended or hold their outcome) and its finish, a task deferred for
maintenance, and a blocked or failed per-task pass with its task-pass retry, due after
``min(2000, base * 2**min(attempt, 3))`` ms up to the limit (a failure of the same keys
once the retry was due is the next attempt, one while it is armed uses none, a failure
of other keys starts again at 0, and a success clears it). Only a task that has not
decided its outcome gets a retry.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import RuleViolation
from ..tasks.context import Context
from ..world import Draft
from .keys import natural_key
from .pass_events import (
    SCHEDULER_WIDE,
    TASK_PASS_STREAM_PREFIX,
    PassFinished,
    PassStarted,
    PassTaskBlocked,
    PassTaskDeferred,
    PassTaskFailed,
    TaskPassRetryAbandoned,
    TaskPassRetryCleared,
    TaskPassRetryScheduled,
)
from .settings import TurnSettings, retry_delay_ms
from .state import TaskPassRetry
from .wakeups import outcome_decided


def start_pass(
    draft: Draft,
    ctx: Context,
    pass_id: str,
    scope: str,
    keys: Sequence[str],
    task_ids: Sequence[str],
    concurrency: int,
    retried: Sequence[str],
    ended_retries: Sequence[str],
) -> None:
    """Record a pass's start, clearing the retries of tasks that have ended."""
    if ctx.closing:
        raise RuleViolation(2, "the scheduler is closing; no pass runs")
    for task_id in ended_retries:
        draft.emit_stream(
            TaskPassRetryCleared(task_id=task_id, at=ctx.now, why="task_ended", pass_id=pass_id)
        )
    draft.emit_stream(
        PassStarted(
            task_id=SCHEDULER_WIDE,
            at=ctx.now,
            pass_id=pass_id,
            scope=scope,
            keys=tuple(keys),
            task_ids=tuple(task_ids),
            concurrency=concurrency,
            retried=tuple(retried),
        )
    )


def defer_task(
    draft: Draft, ctx: Context, pass_id: str, task_id: str, project_ids: Sequence[str]
) -> None:
    """A task of a project under maintenance is deferred for the pass (never failed)."""
    draft.emit_stream(
        PassTaskDeferred(
            task_id=task_id, at=ctx.now, pass_id=pass_id, project_ids=tuple(project_ids)
        )
    )


def record_task_failure(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    pass_id: str,
    task_id: str,
    keys: Sequence[str],
    error: str,
    *,
    blocked: bool,
    taken_over: bool = False,
    arm: bool = True,
) -> float | None:
    """Record a blocked or failed per-task pass and arm its retry; returns when the
    retry is due, or ``None`` once the retry limit is reached, the task ended or holds
    its outcome, or ``arm`` is false (a full pass is requested: it does this work).
    ``taken_over``: a full pass did the armed retry's work, so this failure is that
    retry's next attempt whatever keys it covered."""
    event_type = PassTaskBlocked if blocked else PassTaskFailed
    draft.emit_stream(event_type(task_id=task_id, at=ctx.now, pass_id=pass_id, error=error))
    task = draft.get(task_id)
    retry: TaskPassRetry | None = draft.get_stream(f"{TASK_PASS_STREAM_PREFIX}{task_id}")
    # passes.retry_active_only (yui): only an active task's pass is retried; a task that
    # decided its outcome has its retry cleared.
    if task is None or outcome_decided(task):
        if retry is not None:
            draft.emit_stream(
                TaskPassRetryCleared(task_id=task_id, at=ctx.now, why="task_ended", pass_id=pass_id)
            )
        return None
    if not arm:
        return None
    identity = tuple(sorted(keys, key=natural_key))
    # A retry of other keys is another failure: its attempts start again (unless a full
    # pass took the retry over: then it is the same work, failing again).
    same = retry is not None and (retry.keys == identity or taken_over)
    if retry is not None and same and not taken_over and retry.retry_at > ctx.now:
        # passes.retry_armed (yui): one retry per task; a failure while it is armed, not
        # fired yet, uses no attempt: only the failures of the retries that fired count.
        return retry.retry_at
    attempt = retry.attempt + 1 if retry is not None and same else 0
    if attempt >= settings.task_pass_retry_limit:
        draft.emit_stream(
            TaskPassRetryAbandoned(
                task_id=task_id, at=ctx.now, keys=identity, attempts=attempt, pass_id=pass_id
            )
        )
        return None
    retry_at = ctx.now + retry_delay_ms(settings.pass_retry_base_ms, attempt)
    draft.emit_stream(
        TaskPassRetryScheduled(
            task_id=task_id,
            at=ctx.now,
            keys=identity,
            attempt=attempt,
            retry_at=retry_at,
            pass_id=pass_id,
        )
    )
    return retry_at


def record_task_success(draft: Draft, ctx: Context, pass_id: str, task_id: str) -> None:
    """A per-task pass that succeeded clears the task's retry."""
    if draft.get_stream(f"{TASK_PASS_STREAM_PREFIX}{task_id}") is not None:
        draft.emit_stream(
            TaskPassRetryCleared(task_id=task_id, at=ctx.now, why="succeeded", pass_id=pass_id)
        )


def finish_pass(draft: Draft, ctx: Context, pass_id: str, outcomes: dict[str, str]) -> None:
    """Record the end of a pass with what it did to each task."""

    def having(status: str) -> tuple[str, ...]:
        return tuple(t for t, s in outcomes.items() if s == status)

    draft.emit_stream(
        PassFinished(
            task_id=SCHEDULER_WIDE,
            at=ctx.now,
            pass_id=pass_id,
            done=having("done"),
            blocked=having("blocked"),
            deferred=having("deferred"),
            failed=having("failed"),
            skipped=having("skipped"),
        )
    )
