"""The reconcile rules: settling a live run from what its job became (SPEC.md section 3).

Reconcile visits each live run in turn. :func:`reconcile_running` and
:func:`reconcile_dispatching` apply the checks that need no executor and say
what to do next (a :data:`ReconcileStep`); :func:`record_snapshot` and
:func:`record_cancel` record what the executor then answered, which comes in as
data (a :class:`~.executor.JobSnapshot`, a :class:`CancelObservation`).

The rules are named, not numbered; each is stated once, in a comment above the
branch that applies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..tasks.context import Context
from ..world import Draft
from .events import RunStarted
from .executor import FAILED_JOB_STATUSES, JobSnapshot
from .outcomes import done, emit_run, fail, orphan, run_fields, supersede
from .reading import get_run, today
from .schedule import scheduled_at
from .settings import RunSettings
from .state import RunState

ReconcileStep = Literal[
    "skip",
    "wait",
    "snapshot",
    "cancel",
    "redrive",
    "orphaned",
    "job_lost",
    "expired",
    "submit_exhausted",
]


@dataclass(frozen=True, slots=True)
class CancelObservation:
    """What cancelling a rescheduled run's job came to, as the application saw it.

    ``applied``/``not_applied``: the cancel answered (with ``job``);
    ``committed``: its answer was committing and the job was completed (``job``);
    ``not_found``: the executor has no such job; ``error``: anything else.
    """

    kind: Literal["applied", "not_applied", "committed", "not_found", "error"]
    job: JobSnapshot | None = None


# ─── reconcile ──────────────────────────────────────────────────────────────


def _lost(draft: Draft, ctx: Context, run: RunState, settings: RunSettings) -> bool:
    # No job after the lost window: failed job_lost.
    if ctx.now - run.fired_at > settings.job_lost_ms:
        message = f"no job {settings.job_lost_ms:.0f} ms after the run fired"
        fail(draft, ctx, run, "job_lost", message)
        return True
    return False


def reconcile_running(
    draft: Draft, ctx: Context, run_id: str, settings: RunSettings
) -> ReconcileStep:
    """The first checks of a ``running`` run, before the executor is asked.

    Returns ``orphaned`` or ``job_lost`` (recorded here), ``cancel`` (the task
    was rescheduled: cancel its job, then :func:`record_cancel`), ``snapshot``
    (read the job, then :func:`record_snapshot`), ``wait`` or ``skip``.
    """
    run = get_run(draft, run_id)
    if run.status != "running":
        return "skip"
    task = draft.get(run.task_id)
    # Row gone (the task ended): orphaned.
    if task is None or task.status == "terminal":
        orphan(draft, ctx, run, "the task has ended")
        return "orphaned"
    # Rescheduled before it ran: cancel its job, then superseded.
    run_at = scheduled_at(draft, run.task_id)
    if (
        run.scheduled_for is not None
        and run_at is not None
        and run_at != run.scheduled_for
        and run.job_id is not None
    ):
        return "cancel"
    if run.job_id is None:
        return "job_lost" if _lost(draft, ctx, run, settings) else "wait"
    return "snapshot"


def record_snapshot(
    draft: Draft,
    ctx: Context,
    run_id: str,
    snapshot: JobSnapshot | None,
    settings: RunSettings,
) -> RunState:
    """What a ``running`` run's job snapshot says: done, failed, still live, or lost."""
    run = get_run(draft, run_id)
    if run.status != "running":
        return run
    # No snapshot: the same lost-window rule as no job.
    if snapshot is None:
        _lost(draft, ctx, run, settings)
        return get_run(draft, run_id)
    # Job completed: done.
    if snapshot.status == "completed":
        return done(draft, ctx, run, snapshot)
    # Job failed, canceled or interrupted: failed, with the job's code.
    if snapshot.status in FAILED_JOB_STATUSES:
        return fail(
            draft,
            ctx,
            run,
            snapshot.error_code or snapshot.status,
            snapshot.error_message or f"job {snapshot.status}",
            completed_at=snapshot.completed_at,
            job_status=snapshot.status,
        )
    if snapshot.status != run.last_known_status:
        return emit_run(
            draft, RunStarted(**run_fields(run), at=ctx.now, job_status=snapshot.status)
        )
    return run


def record_cancel(
    draft: Draft, ctx: Context, run_id: str, observation: CancelObservation
) -> RunState:
    """What cancelling a rescheduled run's job came to."""
    run = get_run(draft, run_id)
    if run.status != "running":
        return run
    job = observation.job
    if observation.kind == "applied":
        return supersede(draft, ctx, run, "superseded", "rescheduled before it ran")
    # The job finished first, or its answer was committing: done.
    if observation.kind == "committed" or (job is not None and job.status == "completed"):
        return done(draft, ctx, run, job)
    # It ended otherwise first: superseded, with the job's status as the code.
    if job is not None and job.status in FAILED_JOB_STATUSES:
        return supersede(draft, ctx, run, job.status, job.error_message or f"job {job.status}")
    # The job is gone: orphaned.
    if observation.kind == "not_found":
        return orphan(draft, ctx, run, "the job was not found")
    return run


def reconcile_dispatching(
    draft: Draft,
    ctx: Context,
    run_id: str,
    settings: RunSettings,
    *,
    submit_in_flight: bool = False,
) -> ReconcileStep:
    """A ``dispatching`` run: ``expired``, ``submit_exhausted`` (both recorded
    here), ``redrive`` (submit again with the same client job id) or ``skip``."""
    run = get_run(draft, run_id)
    if run.status != "dispatching":
        return "skip"
    # Day rolled over while dispatching: failed expired (checked before exhaustion).
    if run.day != today(ctx, settings):
        fail(draft, ctx, run, "expired", f"day {run.day} ended while the run was dispatching")
        return "expired"
    # Submit attempts used up: failed submit_exhausted.
    if run.submit_attempts >= settings.submit_attempts and run.job_id is None:
        fail(draft, ctx, run, "submit_exhausted", f"{run.submit_attempts} submits failed")
        return "submit_exhausted"
    if submit_in_flight or (run.retry_after is not None and run.retry_after > ctx.now):
        return "skip"
    return "redrive"
