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

from typing import Literal, TypedDict

from ..errors import Refused
from ..tasks.context import Context
from ..tasks.fields import finite_number
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


def ended_at(job_time: object, ctx: Context) -> float:
    """When a run ended: the time its job reports, else now."""
    # runs.job_time (dispatcher: ``completedAt ?? now``): a time the executor gives that
    # is no finite number of ms counts as none, so the event holds one a replay reads.
    at = finite_number(job_time)
    return ctx.now if at is None else at


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
    """The run ends ``failed`` with ``code``, at ``completed_at`` (the job's) if usable."""
    at = ended_at(completed_at, ctx)
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
    at = ended_at(job.completed_at if job is not None else None, ctx)
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


SubmitFailureCode = Literal["identity_conflict", "admissions_closed", "submit_failed"]


def submit_failure_code(error_class: SubmitErrorClass) -> SubmitFailureCode:
    """The code the dispatcher throws to its caller for a submit that failed."""
    # runs.submit_failed (dispatcher): an identity conflict is its own code, a drain
    # closes admissions, anything else is a failed submit.
    if error_class == "identity_conflict":
        return "identity_conflict"
    if error_class == "drain":
        return "admissions_closed"
    return "submit_failed"


class SubmitFailed(Refused):
    """A run was minted but its submit failed (``mint_run(...,
    raise_on_submit_error=True)``): raised after the failure was recorded on the
    run. ``code`` is ``identity_conflict`` (the run failed), ``admissions_closed``
    (the executor is draining; no attempt used) or ``submit_failed`` (an attempt
    used); reconcile redrives a run still ``dispatching``."""

    def __init__(self, run_id: str, error_class: SubmitErrorClass, *, task_id: str) -> None:
        self.run_id = run_id
        self.error_class = error_class
        self.code: SubmitFailureCode = submit_failure_code(error_class)
        then = (
            "the run failed"
            if self.code == "identity_conflict"
            else "it stays dispatching and reconcile submits it again"
        )
        super().__init__(
            f"{self.code}: the submit of run {run_id} failed ({error_class}); "
            f"recorded on the run, {then}",
            task_id=task_id,
        )
