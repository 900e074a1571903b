"""The admission rules of a dispatch run, and minting one (SPEC.md section 3).

:func:`admit_manual` and :func:`admit_scheduled` check, in order, whether a
run of a task may start today, and raise :class:`AdmissionRefused` (whose
``code`` names the rule) otherwise, which appends nothing;
:func:`dispatch_blocked` says why no scheduled run may fire today at all;
:func:`due_tasks` lists the scheduled tasks that may fire now; :func:`mint`
admits a run and emits its :class:`~.events.RunMinted`; :func:`admit_run` asks every
check :func:`mint` makes but the payload's, minting nothing. The day is the
calendar date of ``ctx.now`` in the configured zone; nothing here reads the
wall clock, the environment, storage or an executor.

The rules are named, not numbered; each is stated once, in a comment above the
branch that applies it.
"""

from __future__ import annotations

from typing import Any, Literal

from ..errors import InvalidArgument, Refused, RuleViolation
from ..tasks.context import Context
from ..tasks.live_index import submission_rank
from ..tasks.state import TaskState
from ..tasks.validation import json_value, require_task
from ..world import Draft
from .events import TRIGGERS, RunMinted, Trigger
from .identity import client_job_id, local_day
from .ledger import Ledger, ledger_of, live_schedules
from .outcomes import emit_run
from .reading import today
from .schedule import scheduled_at
from .settings import RunSettings
from .state import RunState

AdmissionCode = Literal[
    "durable_jobs_off",
    "admissions_closed",
    "maintenance_drain_active",
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
    """A run was not minted; ``code`` names the rule (the gate's
    ``durable_jobs_off``, ``admissions_closed``, ``maintenance_drain_active``;
    ``task_running``, ``runs_exhausted``, ``run_spacing``, ``cap_off``,
    ``cap_reached``, ``submit_exhausted``, ``dispatch_slots_busy``,
    ``scheduled_future``, ``task_ended``). Nothing was appended."""

    def __init__(self, code: AdmissionCode, reason: str, *, task_id: str | None = None) -> None:
        self.code: AdmissionCode = code
        super().__init__(f"{code}: {reason}", task_id=task_id)


def _live_task(draft: Draft, task_id: str) -> TaskState:
    task = require_task(draft, task_id)
    if task.status == "terminal":
        raise AdmissionRefused(
            "task_ended", "the task has ended; a run needs a live task", task_id=task_id
        )
    return task


def _no_run_in_flight(ledger: Ledger, task_id: str, day: str) -> None:
    _no_live_run_today(ledger, task_id, day)
    _not_marked_running(ledger, task_id)


def _no_live_run_today(ledger: Ledger, task_id: str, day: str) -> None:
    # One in-flight run per task and day.
    live = ledger.live_run(task_id, day)
    if live is not None:
        raise AdmissionRefused(
            "task_running",
            f"run {live.run_id} is still {live.status}; wait for it to end",
            task_id=task_id,
        )


def _not_marked_running(ledger: Ledger, task_id: str) -> None:
    # A run whose job is taken (the task's marker) also blocks a new one, whatever its day.
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
    require_task(draft, task_id)
    # runs.manual_order (dispatcher, runTaskNow): the day's live run is asked before the
    # task itself, so a task that ended while its run is live answers task_running.
    _no_live_run_today(ledger, task_id, day)
    _live_task(draft, task_id)
    _not_marked_running(ledger, task_id)
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
    # The daily cap counts every run of the day, every task and status: a count no
    # stream's version guards, so the store refuses a decision on it if a run was
    # minted since the world was read (another worker's, on another machine).
    draft.read_across(RunMinted)
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
    # Only live tasks' schedules: an ended task is never admitted.
    for task_id, run_at in list(live_schedules(draft.world).items()):
        if not (run_at <= ctx.now and ctx.now - run_at <= settings.catch_up_ms):
            continue
        if task_id in ledger.markers:
            continue
        try:
            admit_scheduled(draft, ctx, task_id, settings, slot_free=True)
        except Refused:
            continue
        due.append(task_id)
    return sorted(due, key=lambda t: submission_rank(draft.world, t))


def _arguments(
    ctx: Context, task_id: str, trigger: str, settings: RunSettings, day: str | None
) -> str:
    """The checks of a mint's arguments (the scheduler open, the trigger, the day);
    returns today."""
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
    return current


def _admit(
    draft: Draft, ctx: Context, task_id: str, trigger: str, settings: RunSettings, slot_free: bool
) -> None:
    if trigger == "manual":
        admit_manual(draft, ctx, task_id, settings, slot_free=slot_free)
    else:
        admit_scheduled(draft, ctx, task_id, settings, slot_free=slot_free)


def admit_run(
    draft: Draft,
    ctx: Context,
    task_id: str,
    *,
    trigger: Trigger,
    settings: RunSettings,
    slot_free: bool,
    day: str | None = None,
) -> None:
    """Every check :func:`mint` makes but the payload's, in its order, minting nothing:
    raises what :func:`mint` would (an :class:`AdmissionRefused` for a rule)."""
    _arguments(ctx, task_id, trigger, settings, day)
    _admit(draft, ctx, task_id, trigger, settings, slot_free)


def mint(
    draft: Draft,
    ctx: Context,
    task_id: str,
    *,
    trigger: Trigger,
    settings: RunSettings,
    slot_free: bool,
    day: str | None = None,
    payload: Any = None,
) -> RunState:
    """Admit and mint a run: ``dispatching``, attempt 1 + the task's runs that day,
    carrying the host's ``payload`` (JSON)."""
    current = _arguments(ctx, task_id, trigger, settings, day)
    payload = json_value(payload, "a run's payload", task_id if isinstance(task_id, str) else None)
    _admit(draft, ctx, task_id, trigger, settings, slot_free)
    attempt = 1 + len(ledger_of(draft.world).runs_of(task_id, current))
    scheduled_for = scheduled_at(draft, task_id)
    return emit_run(
        draft,
        RunMinted(
            task_id=task_id,
            at=ctx.now,
            day=current,
            attempt=attempt,
            tz=settings.tz,
            trigger=trigger,
            client_job_id=client_job_id(task_id, settings.tz, current, attempt),
            scheduled_for=scheduled_for,
            retry_after=ctx.now + settings.dispatch_wall_ms,
            payload=payload,
            # runs.catch_up (dispatcher: dispatchDueTasks mints what it fires with
            # catchUp, runTaskNow without): a scheduled run is flagged, fired on time
            # or late; a manual run never.
            catch_up=trigger == "scheduled",
        ),
    )
