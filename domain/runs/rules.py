"""The dispatch-run rules of SPEC.md section 3, as pure decide functions.

Each function takes a :class:`~.world.Draft` and a :class:`~.decide.Context`
and either emits run events with ``draft.emit_stream`` or raises a typed
refusal (:class:`AdmissionRefused`, whose ``code`` names the rule), which
appends nothing. The day is the calendar date of ``ctx.now`` in the
configured zone; nothing here reads the wall clock, the environment, storage
or an executor. What an executor answered comes in as data (a
:class:`~.dispatch.JobSnapshot`, a :class:`CancelObservation`).

The rules are named, not numbered; each is stated once, in a comment above the
branch that applies it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, TypedDict

from ..errors import InvalidArgument, Refused, RuleViolation
from ..tasks.rules import Context, _task
from ..tasks.state import TaskState
from ..world import Draft
from .executor import FAILED_JOB_STATUSES, JobSnapshot, RunSettings
from .state import (
    TRIGGERS,
    Ledger,
    RunAdopted,
    RunDone,
    RunEvent,
    RunFailed,
    RunMinted,
    RunOrphaned,
    RunStarted,
    RunState,
    RunSubmitFailed,
    RunSubmitted,
    RunSuperseded,
    ScheduleSet,
    ScheduleState,
    SubmitErrorClass,
    Trigger,
    client_job_id,
    ledger_of,
    local_day,
    run_identity,
    run_stream_id,
    schedule_stream_id,
)

AdmissionCode = Literal[
    "task_running",
    "task_ended",
    "scheduled_future",
    "runs_exhausted",
    "run_spacing",
    "submit_exhausted",
    "cap_off",
    "cap_reached",
    "dispatch_slots_busy",
]


class AdmissionRefused(Refused):
    """A run was not minted; ``code`` names the rule (``task_running``,
    ``runs_exhausted``, ``run_spacing``, ``cap_off``, ``cap_reached``,
    ``submit_exhausted``, ``dispatch_slots_busy``, ``scheduled_future``,
    ``task_ended``). Nothing was appended."""

    def __init__(self, code: AdmissionCode, reason: str, *, task_id: str | None = None) -> None:
        self.code: AdmissionCode = code
        super().__init__(f"{code}: {reason}", task_id=task_id)


class UnknownRun(Refused, KeyError):
    """A run id that no event in the store minted."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"no run {run_id!r} in this store")

    def __str__(self) -> str:  # KeyError would quote the message otherwise
        return Refused.__str__(self)


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


# ─── reading ────────────────────────────────────────────────────────────────


def today(ctx: Context, settings: RunSettings) -> str:
    """The local day of ``ctx.now`` in the configured zone."""
    return local_day(ctx.now, settings.tz)


def get_run(draft: Draft, run_id: str) -> RunState:
    """The run as this decision sees it; :class:`UnknownRun` if none was minted."""
    state = draft.get_stream(run_stream_id(run_id)) if isinstance(run_id, str) else None
    if not isinstance(state, RunState):
        raise UnknownRun(run_id)
    return state


def scheduled_at(draft: Draft, task_id: str) -> float | None:
    """The task's scheduled run time, if it has one."""
    state = draft.get_stream(schedule_stream_id(task_id))
    return state.run_at if isinstance(state, ScheduleState) else None


class _RunKey(TypedDict):
    task_id: str
    day: str
    attempt: int


def _run_fields(run: RunState) -> _RunKey:
    return {"task_id": run.task_id, "day": run.day, "attempt": run.attempt}


def _emit_run(draft: Draft, event: RunEvent) -> RunState:
    state = draft.emit_stream(event)
    assert isinstance(state, RunState)
    return state


# ─── schedule ───────────────────────────────────────────────────────────────


def set_schedule(draft: Draft, ctx: Context, task_id: str, run_at: float | None) -> None:
    """Set (or, with ``None``, clear) the time a task is scheduled to run at."""
    task = _task(draft, task_id)
    if task.status == "terminal":
        raise RuleViolation(4, "the task is terminal; it cannot be scheduled", task_id=task_id)
    if run_at is not None and (
        isinstance(run_at, bool)
        or not isinstance(run_at, int | float)
        or not math.isfinite(run_at)
        or run_at < 0
    ):
        raise InvalidArgument(
            f"run_at must be a finite time >= 0 in ms, or None, not {run_at!r}", task_id=task_id
        )
    draft.emit_stream(ScheduleSet(task_id=task_id, at=ctx.now, run_at=run_at))


# ─── admission ──────────────────────────────────────────────────────────────


def _live_task(draft: Draft, task_id: str) -> TaskState:
    task = _task(draft, task_id)
    if task.status == "terminal":
        raise AdmissionRefused(
            "task_ended", "the task has ended; a run needs a live task", task_id=task_id
        )
    return task


def _no_run_in_flight(ledger: Ledger, task_id: str, day: str) -> None:
    # One in-flight run per task and day; a run whose job is taken (the task's
    # marker) also blocks a new one, whatever its day.
    live = ledger.live_run(task_id, day)
    if live is not None:
        raise AdmissionRefused(
            "task_running",
            f"run {live.run_id} is still {live.status}; wait for it to end",
            task_id=task_id,
        )
    if ledger.markers.get(task_id) == "running":
        raise AdmissionRefused(
            "task_running", "a run of this task is running; wait for it to end", task_id=task_id
        )


def _not_scheduled_future(draft: Draft, task_id: str, day: str, settings: RunSettings) -> None:
    # A task scheduled for a later day cannot run now.
    run_at = scheduled_at(draft, task_id)
    if run_at is not None and local_day(run_at, settings.tz) > day:
        raise AdmissionRefused(
            "scheduled_future",
            f"scheduled for {local_day(run_at, settings.tz)} ({settings.tz}), after today "
            f"({day}); reschedule it to run it now",
            task_id=task_id,
        )


def _attempts_left(runs: list[RunState], task_id: str, settings: RunSettings) -> None:
    # runs_per_day attempts a task and day, whatever their status.
    if len(runs) >= settings.runs_per_day:
        raise AdmissionRefused(
            "runs_exhausted",
            f"{len(runs)} runs today, the limit is {settings.runs_per_day}; try again tomorrow",
            task_id=task_id,
        )


def admit_manual(
    draft: Draft, ctx: Context, task_id: str, settings: RunSettings, *, slot_free: bool
) -> None:
    """The admission rules of a manual run, in order; raises :class:`AdmissionRefused`.

    Manual runs ignore the run spacing, the daily cap and an earlier
    ``submit_exhausted``.
    """
    day = today(ctx, settings)
    ledger = ledger_of(draft.world)
    _live_task(draft, task_id)
    _no_run_in_flight(ledger, task_id, day)
    _not_scheduled_future(draft, task_id, day, settings)
    _attempts_left(ledger.runs_of(task_id, day), task_id, settings)
    # One reserved manual slot.
    if not slot_free:
        raise AdmissionRefused(
            "dispatch_slots_busy",
            "another manual run is using the reserved slot; try again in a moment",
            task_id=task_id,
        )


def dispatch_blocked(draft: Draft, ctx: Context, settings: RunSettings) -> AdmissionCode | None:
    """Why no scheduled run may fire today at all (``cap_off``, ``cap_reached``), or ``None``."""
    # A daily cap of 0 turns scheduled dispatch off.
    if settings.cap_per_day == 0:
        return "cap_off"
    # The daily cap counts every run of the day, every task and status.
    if ledger_of(draft.world).runs_on(today(ctx, settings)) >= settings.cap_per_day:
        return "cap_reached"
    return None


def admit_scheduled(
    draft: Draft, ctx: Context, task_id: str, settings: RunSettings, *, slot_free: bool
) -> None:
    """The admission rules of a scheduled run, in order; raises :class:`AdmissionRefused`."""
    day = today(ctx, settings)
    ledger = ledger_of(draft.world)
    blocked = dispatch_blocked(draft, ctx, settings)
    if blocked == "cap_off":
        raise AdmissionRefused(
            "cap_off", "the daily cap is 0: scheduled dispatch is off", task_id=task_id
        )
    if blocked == "cap_reached":
        raise AdmissionRefused(
            "cap_reached",
            f"today ({day}) has {ledger.runs_on(day)} runs, the cap is {settings.cap_per_day}",
            task_id=task_id,
        )
    _live_task(draft, task_id)
    _no_run_in_flight(ledger, task_id, day)
    runs = ledger.runs_of(task_id, day)
    # A run that used up its submits stops scheduled runs of that task for the day.
    if any(r.error is not None and r.error.code == "submit_exhausted" for r in runs):
        raise AdmissionRefused(
            "submit_exhausted",
            "a run today used up its submits; scheduled runs resume tomorrow (run it manually)",
            task_id=task_id,
        )
    _attempts_left(runs, task_id, settings)
    # Scheduled runs of a task fire at least run_spacing apart.
    if runs:
        newest = max(r.fired_at for r in runs)
        if ctx.now - newest < settings.run_spacing_ms:
            raise AdmissionRefused(
                "run_spacing",
                f"the last run fired {ctx.now - newest:.0f} ms ago; scheduled runs are "
                f"{settings.run_spacing_ms:.0f} ms apart",
                task_id=task_id,
            )
    _not_scheduled_future(draft, task_id, day, settings)
    # per_tick background slots.
    if not slot_free:
        raise AdmissionRefused(
            "dispatch_slots_busy", "the background dispatch slots are busy", task_id=task_id
        )


def due_tasks(draft: Draft, ctx: Context, settings: RunSettings) -> list[str]:
    """Scheduled tasks that may fire now, in submission order.

    Due: live, scheduled at or before now but no longer ago than the catch-up
    window, with no marker (no run of this schedule taken yet), and admitted by
    :func:`admit_scheduled`.
    """
    ledger = ledger_of(draft.world)
    due = []
    for task_id, run_at in ledger.schedules.items():
        if not (run_at <= ctx.now and ctx.now - run_at <= settings.catch_up_ms):
            continue
        if task_id in ledger.markers:
            continue
        try:
            admit_scheduled(draft, ctx, task_id, settings, slot_free=True)
        except Refused:
            continue
        due.append(task_id)
    order = {task_id: n for n, task_id in enumerate(draft.world.tasks)}
    return sorted(due, key=lambda t: order.get(t, len(order)))


def mint(
    draft: Draft,
    ctx: Context,
    task_id: str,
    *,
    trigger: Trigger,
    settings: RunSettings,
    slot_free: bool,
    day: str | None = None,
) -> RunState:
    """Admit and mint a run: ``dispatching``, attempt 1 + the task's runs that day."""
    if ctx.closing:
        raise RuleViolation(2, "the scheduler is closing; open it again to dispatch")
    if trigger not in TRIGGERS:
        raise InvalidArgument(f"trigger must be 'manual' or 'scheduled', not {trigger!r}")
    current = today(ctx, settings)
    if day is not None and day != current:
        raise InvalidArgument(
            f"a run is minted for today ({current} in {settings.tz}), not {day!r}",
            task_id=task_id if isinstance(task_id, str) else None,
        )
    if trigger == "manual":
        admit_manual(draft, ctx, task_id, settings, slot_free=slot_free)
    else:
        admit_scheduled(draft, ctx, task_id, settings, slot_free=slot_free)
    attempt = 1 + len(ledger_of(draft.world).runs_of(task_id, current))
    return _emit_run(
        draft,
        RunMinted(
            task_id=task_id,
            at=ctx.now,
            day=current,
            attempt=attempt,
            tz=settings.tz,
            trigger=trigger,
            client_job_id=client_job_id(task_id, settings.tz, current, attempt),
            scheduled_for=scheduled_at(draft, task_id),
            retry_after=ctx.now + settings.dispatch_wall_ms,
        ),
    )


# ─── submit outcomes ────────────────────────────────────────────────────────


def _fail(
    draft: Draft,
    ctx: Context,
    run: RunState,
    code: str,
    message: str,
    *,
    completed_at: float | None = None,
    job_status: str | None = None,
) -> RunState:
    at = ctx.now if completed_at is None else completed_at
    return _emit_run(
        draft,
        RunFailed(
            **_run_fields(run),
            at=ctx.now,
            code=code,
            message=message,
            completed_at=at,
            job_status=job_status,
        ),
    )


def _orphan(draft: Draft, ctx: Context, run: RunState, message: str) -> RunState:
    return _emit_run(
        draft, RunOrphaned(**_run_fields(run), at=ctx.now, message=message, completed_at=ctx.now)
    )


def _supersede(draft: Draft, ctx: Context, run: RunState, code: str, message: str) -> RunState:
    return _emit_run(
        draft,
        RunSuperseded(
            **_run_fields(run), at=ctx.now, code=code, message=message, completed_at=ctx.now
        ),
    )


def _done(draft: Draft, ctx: Context, run: RunState, job: JobSnapshot | None) -> RunState:
    at = job.completed_at if job is not None and job.completed_at is not None else ctx.now
    return _emit_run(draft, RunDone(**_run_fields(run), at=ctx.now, completed_at=at))


def record_taken(
    draft: Draft, ctx: Context, run_id: str, job: JobSnapshot, *, adopted: bool
) -> RunState | None:
    """The run's job was accepted (or a live one adopted): ``running``. ``None`` when
    the run is no longer dispatching (another writer ended it)."""
    run = get_run(draft, run_id)
    if run.status != "dispatching":
        return None
    cls = RunAdopted if adopted else RunSubmitted
    return _emit_run(
        draft, cls(**_run_fields(run), at=ctx.now, job_id=job.job_id, job_status=job.status)
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
    state = _emit_run(
        draft,
        RunSubmitFailed(
            **_run_fields(run),
            at=ctx.now,
            error_class=error_class,
            message=message,
            retry_after=ctx.now + retry_after_ms,
            consumed=consumed,
        ),
    )
    if error_class == "identity_conflict":
        state = _fail(draft, ctx, run, "identity_conflict", message)
    return state


# ─── reconcile ──────────────────────────────────────────────────────────────


def _lost(draft: Draft, ctx: Context, run: RunState, settings: RunSettings) -> bool:
    # No job after the lost window: failed job_lost.
    if ctx.now - run.fired_at > settings.job_lost_ms:
        message = f"no job {settings.job_lost_ms:.0f} ms after the run fired"
        _fail(draft, ctx, run, "job_lost", message)
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
        _orphan(draft, ctx, run, "the task has ended")
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
        return _done(draft, ctx, run, snapshot)
    # Job failed, canceled or interrupted: failed, with the job's code.
    if snapshot.status in FAILED_JOB_STATUSES:
        return _fail(
            draft,
            ctx,
            run,
            snapshot.error_code or snapshot.status,
            snapshot.error_message or f"job {snapshot.status}",
            completed_at=snapshot.completed_at,
            job_status=snapshot.status,
        )
    if snapshot.status != run.last_known_status:
        return _emit_run(
            draft, RunStarted(**_run_fields(run), at=ctx.now, job_status=snapshot.status)
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
        return _supersede(draft, ctx, run, "superseded", "rescheduled before it ran")
    # The job finished first, or its answer was committing: done.
    if observation.kind == "committed" or (job is not None and job.status == "completed"):
        return _done(draft, ctx, run, job)
    # It ended otherwise first: superseded, with the job's status as the code.
    if job is not None and job.status in FAILED_JOB_STATUSES:
        return _supersede(draft, ctx, run, job.status, job.error_message or f"job {job.status}")
    # The job is gone: orphaned.
    if observation.kind == "not_found":
        return _orphan(draft, ctx, run, "the job was not found")
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
        _fail(draft, ctx, run, "expired", f"day {run.day} ended while the run was dispatching")
        return "expired"
    # Submit attempts used up: failed submit_exhausted.
    if run.submit_attempts >= settings.submit_attempts and run.job_id is None:
        _fail(draft, ctx, run, "submit_exhausted", f"{run.submit_attempts} submits failed")
        return "submit_exhausted"
    if submit_in_flight or (run.retry_after is not None and run.retry_after > ctx.now):
        return "skip"
    return "redrive"


__all__ = [
    "AdmissionCode",
    "AdmissionRefused",
    "CancelObservation",
    "ReconcileStep",
    "UnknownRun",
    "admit_manual",
    "admit_scheduled",
    "dispatch_blocked",
    "due_tasks",
    "get_run",
    "mint",
    "reconcile_dispatching",
    "reconcile_running",
    "record_cancel",
    "record_snapshot",
    "record_submit_failed",
    "record_taken",
    "run_identity",
    "scheduled_at",
    "set_schedule",
    "today",
]
