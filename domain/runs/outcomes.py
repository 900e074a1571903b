"""Recording what came of a run as its events (SPEC.md section 3).

What an executor answered comes in as data (a :class:`~.executor.JobSnapshot`,
a submit error class): :func:`record_taken` and :func:`record_submit_failed`
record a submit's outcome; :func:`fail`, :func:`orphan`, :func:`supersede` and
:func:`done` emit the events that end a run, for these and for reconcile.
Everything is emitted into a :class:`~..world.Draft` with :func:`emit_run`.

The rules are named, not numbered; each is stated once, in a comment above the
branch that applies it.
"""

from __future__ import annotations

from typing import TypedDict

from ..tasks.context import Context
from ..world import Draft
from .events import (
    RunAdopted,
    RunDone,
    RunEvent,
    RunFailed,
    RunOrphaned,
    RunSubmitFailed,
    RunSubmitted,
    RunSuperseded,
    SubmitErrorClass,
)
from .executor import JobSnapshot
from .reading import get_run
from .state import RunState


class _RunKey(TypedDict):
    task_id: str
    day: str
    attempt: int


def run_fields(run: RunState) -> _RunKey:
    """The fields naming ``run`` in each of its events."""
    return {"task_id": run.task_id, "day": run.day, "attempt": run.attempt}


def emit_run(draft: Draft, event: RunEvent) -> RunState:
    """Emit one run event into the draft; the run's state after it."""
    state = draft.emit_stream(event)
    assert isinstance(state, RunState)
    return state


def fail(
    draft: Draft,
    ctx: Context,
    run: RunState,
    code: str,
    message: str,
    *,
    completed_at: float | None = None,
    job_status: str | None = None,
) -> RunState:
    """The run ends ``failed`` with ``code``."""
    at = ctx.now if completed_at is None else completed_at
    return emit_run(
        draft,
        RunFailed(
            **run_fields(run),
            at=ctx.now,
            code=code,
            message=message,
            completed_at=at,
            job_status=job_status,
        ),
    )


def orphan(draft: Draft, ctx: Context, run: RunState, message: str) -> RunState:
    """The run ends ``orphaned``."""
    return emit_run(
        draft, RunOrphaned(**run_fields(run), at=ctx.now, message=message, completed_at=ctx.now)
    )


def supersede(draft: Draft, ctx: Context, run: RunState, code: str, message: str) -> RunState:
    """The run ends ``superseded`` with ``code``."""
    return emit_run(
        draft,
        RunSuperseded(
            **run_fields(run), at=ctx.now, code=code, message=message, completed_at=ctx.now
        ),
    )


def done(draft: Draft, ctx: Context, run: RunState, job: JobSnapshot | None) -> RunState:
    """The run ends ``done``, at the job's completion time if it has one."""
    at = job.completed_at if job is not None and job.completed_at is not None else ctx.now
    return emit_run(draft, RunDone(**run_fields(run), at=ctx.now, completed_at=at))


def record_taken(
    draft: Draft, ctx: Context, run_id: str, job: JobSnapshot, *, adopted: bool
) -> RunState | None:
    """The run's job was accepted (or a live one adopted): ``running``. ``None`` when
    the run is no longer dispatching (another writer ended it)."""
    run = get_run(draft, run_id)
    if run.status != "dispatching":
        return None
    cls = RunAdopted if adopted else RunSubmitted
    return emit_run(
        draft, cls(**run_fields(run), at=ctx.now, job_id=job.job_id, job_status=job.status)
    )


def record_submit_failed(
    draft: Draft,
    ctx: Context,
    run_id: str,
    error_class: SubmitErrorClass,
    message: str,
    *,
    retry_after_ms: float,
) -> RunState | None:
    """A submit failed: ``identity_conflict`` fails the run; every other class keeps
    it ``dispatching`` until ``now + retry_after_ms``, and all but ``drain`` use up a
    submit attempt. ``None`` when the run is no longer dispatching."""
    run = get_run(draft, run_id)
    if run.status != "dispatching":
        return None
    # A drain (maintenance) does not consume an attempt; identity_conflict ends the run.
    consumed = error_class not in ("drain", "identity_conflict")
    state = emit_run(
        draft,
        RunSubmitFailed(
            **run_fields(run),
            at=ctx.now,
            error_class=error_class,
            message=message,
            retry_after=ctx.now + retry_after_ms,
            consumed=consumed,
        ),
    )
    if error_class == "identity_conflict":
        state = fail(draft, ctx, run, "identity_conflict", message)
    return state
