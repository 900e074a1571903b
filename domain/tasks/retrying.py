"""Retrying a phase that failed (rule 23): the event, its fold and the decision.

A phase that raised, or ran past its timeout, under a :class:`~.retry.Retry` policy is
tried again at the task's last checkpoint after a backoff, as a sleep (its invocation
ends and frees its slot): :class:`PhaseRetried`, folded as a ``SleepStarted`` with the
checkpoint's ``attempt`` one more. Once the policy's ``max_attempts`` are used up the
task ends ``failed`` with the last error (reason ``retries_exhausted``). The delay is
computed here from a number the application drew and recorded on the event; the fold
reads what was recorded, so a replay sleeps exactly as the live run did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..errors import InvalidArgument, RuleViolation
from ..world import Draft
from .context import Context
from .ending import end
from .events import TaskEvent, register_event
from .evolve import InvalidTransition, evolves, step
from .guards import invocation_decision
from .retry import Retry
from .state import Checkpoint, Outcome, TaskState
from .validation import time_ms

CAUSES = ("threw", "timeout")
"""Why a phase failed: it raised, or it ran past its timeout."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PhaseRetried(TaskEvent):
    """A phase failed (``cause``: it ``threw`` ``message``, or ran past its
    ``timeout``); its task sleeps ``delay_s`` seconds, until ``until``, to resume at
    the checkpoint ``phase`` with ``attempt`` (the tries made so far). Rule 23."""

    command: ClassVar[str] = "retry_phase"  # the audit trail's name for it

    phase: str
    attempt: int
    delay_s: float
    until: float
    cause: str
    message: str | None = None


register_event(PhaseRetried)


@evolves(PhaseRetried)
def _retried(state: TaskState, event: PhaseRetried) -> TaskState:
    """A sleep at the failed checkpoint, one attempt on (rule 11: a new state, progress)."""
    if state.status != "running":
        raise InvalidTransition(f"task {state.id}: PhaseRetried while {state.status}")
    return step(
        state,
        event,
        status="sleeping",
        mode=None,
        worker=None,
        checkpoint=Checkpoint(event.phase, event.attempt),
        until=event.until,
        restarts=0,
    )


def tries_made(task: TaskState) -> int:
    """How many times the task's current phase has been tried, this one included: one
    more than its checkpoint's ``attempt`` (what :class:`PhaseRetried` records)."""
    checkpoint = task.checkpoint
    return (checkpoint.attempt or 0) + 1 if checkpoint is not None else 1


def retry_phase(
    draft: Draft,
    ctx: Context,
    task_id: str,
    *,
    retry: Retry,
    message: str,
    cause: str,
    draw: float,
) -> TaskState:
    """The running task's phase failed (``cause``, with the error ``message``): sleep
    the backoff at its checkpoint and try again, or, its tries used up, end it
    ``failed`` with that error (rule 23). ``draw`` (in ``[0, 1)``, the application's)
    places the delay within the policy's jitter.

    Behind the guards of an invocation's decision (rules 2, 1, 9 and 3): an abort mark
    that came first beats the retry, and the abort handler runs next."""
    task = invocation_decision(draft, ctx, task_id)
    if cause not in CAUSES or not 0 <= draw < 1:
        raise InvalidArgument(f"a retry's cause {cause!r} or draw {draw!r} is out of range")
    if task.mode != "run" or task.checkpoint is None:
        raise RuleViolation(23, "only a run invocation's phase is retried", task_id=task_id)
    tried = tries_made(task)
    # 23. A failed phase with tries left sleeps its backoff, then runs again at its
    #     checkpoint; with none left, the task ends failed with the last error.
    if tried < retry.max_attempts:
        delay_s = retry.delay_s(tried - 1, draw)
        until = time_ms(ctx.now + delay_s * 1000, "until", task_id)
        return draft.emit(
            PhaseRetried(
                task_id=task_id,
                at=ctx.now,
                rule=23,
                phase=task.checkpoint.phase,
                attempt=tried,
                delay_s=delay_s,
                until=until,
                cause=cause,
                message=message,
            )
        )
    detail = {"attempts": tried, "cause": cause}
    end(draft, ctx, task, Outcome("failed", message, detail, "retries_exhausted"), rule=23)
    state = draft.get(task_id)
    assert state is not None
    return state
