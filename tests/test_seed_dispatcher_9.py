"""The dispatcher's behaviour, ninth round (seed 003, glasses-server's task-dispatcher):
the corners earlier rounds touched least. Which refusal wins when several apply to a
mint or a tick, day boundaries to the last instant, catch-up windows at their edges,
reconcile's order when several outcomes apply at once, how a superseded run's job is
cancelled, what a redrive's wait counts from, what adopt does with a job in each state,
and the reconcile cursor as the live set shrinks. Each test names the behaviour and the
seed function it comes from; the fixes are written down in docs/seed-fidelity.md,
"Round nine (dispatcher)"."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from helpers.probes import job_of, refused_with, settle

from tasktrail.domain import ManualClock, RunSettings, Scheduler
from tasktrail.domain.dispatch import run_ticks
from tasktrail.domain.runs.executor import (
    ActiveJobError,
    CancelResult,
    JobSnapshot,
    SubmitRequest,
)
from tasktrail.domain.runs.gate import SwitchedGate
from tasktrail.domain.runs.identity import client_job_id
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.replay import replay

T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC."""
DAY, NEXT_DAY = "2026-01-01", "2026-01-02"
SECOND = 1_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
MIDNIGHT = T0 + 16 * HOUR
"""2026-01-02 00:00 UTC: where 2026-01-01 ends in the default zone."""
LAST_INSTANT = math.nextafter(float(MIDNIGHT), 0.0)
"""The last clock value (a float, a fraction of a ms) before that midnight."""
SPACING = 2 * MINUTE
"""The default submit spacing."""
LOST = 6 * HOUR
"""The default lost window (``job_lost_ms``)."""
CATCH_UP = 3 * HOUR
"""The default catch-up window (``catch_up_ms``)."""


def failed_and_settled(runs: Scheduler, executor: InMemoryExecutor, run_id: str) -> None:
    """End the run's job failed and reconcile it, so the task may run again."""
    executor.finish(job_of(runs, run_id), "failed")
    assert settle(runs, run_id) == "failed:failed"


# ─── day boundaries ───────────────────────────────────────────────────────────────


def test_dispatcher_run_minted_in_the_last_instant_of_a_day_belongs_to_that_day(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """mintRun and decideDispatchingAction read the day of ``now`` as a date of whole
    milliseconds (a JavaScript date drops a fraction of a ms): a run minted at the last
    ms of a day, or in the last fraction of it, is that day's, with that day's attempt
    and client job id, and is not expired until the next day begins."""
    clock.set(MIDNIGHT - 1)
    whole = runs.run(runs.mint_run(runs.submit("job", id="whole"), day=DAY))
    clock.set(LAST_INSTANT)
    executor.fail_next_submit("drain")
    fraction = runs.run(runs.mint_run(runs.submit("job", id="fraction"), day=DAY))
    assert (whole.day, fraction.day) == (DAY, DAY)
    assert fraction.client_job_id == client_job_id("fraction", "UTC", DAY, 1)
    assert runs.today() == DAY
    assert settle(runs, fraction.run_id) == "unchanged"  # still its day: it waits
    clock.set(MIDNIGHT)
    assert runs.today() == NEXT_DAY
    assert settle(runs, fraction.run_id) == "failed:expired"


def test_dispatcher_task_scheduled_for_the_first_instant_of_tomorrow_is_scheduled_future(
    runs: Scheduler, clock: ManualClock
) -> None:
    """runTaskNow refuses a task whose scheduled day is after today: a schedule at the
    next midnight is tomorrow's, one in the last fraction of a ms before it is today's
    (its day read as a date of whole milliseconds)."""
    tomorrow, tonight = runs.submit("job", id="tomorrow"), runs.submit("job", id="tonight")
    runs.schedule_run(tomorrow, MIDNIGHT)
    runs.schedule_run(tonight, LAST_INSTANT)
    assert refused_with(runs, tomorrow) == "scheduled_future"
    assert runs.run(runs.mint_run(tonight)).scheduled_for == LAST_INSTANT


def test_dispatcher_catch_up_after_midnight_is_a_run_of_the_day_it_fired(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """pickEligible and mintRun count a run on the day it was minted, not the day it was
    scheduled for: a schedule of 23:50 caught up at 00:05 fires as attempt 1 of the new
    day (with that day's client job id), beside yesterday's run of it still dispatching
    (today's runs only are looked at), counts toward the new day's cap, not the old one's,
    and yesterday's run is then expired."""
    runs.configure_runs(settings=RunSettings(cap_per_day=2))
    task = runs.submit("job", id="late")
    runs.schedule_run(task, MIDNIGHT - 10 * MINUTE)
    clock.set(MIDNIGHT - 5 * MINUTE)
    executor.fail_next_submit("transient")
    (stuck,) = runs.dispatch_due().minted
    assert runs.run(stuck).day == DAY
    clock.set(MIDNIGHT + 5 * MINUTE)
    (fired,) = runs.dispatch_due().fired
    run = runs.run(fired)
    assert (run.day, run.attempt, run.catch_up) == (NEXT_DAY, 1, True)
    assert run.client_job_id == client_job_id("late", "UTC", NEXT_DAY, 1)
    assert (runs.ledger.runs_on(DAY), runs.ledger.runs_on(NEXT_DAY)) == (1, 1)
    assert settle(runs, stuck) == "failed:expired"
    # One more run of the new day reaches its cap of 2; yesterday's run is not counted.
    other = runs.submit("job", id="other")
    runs.schedule_run(other, MIDNIGHT - 1)
    assert runs.run(runs.dispatch_due().fired[0]).day == NEXT_DAY
    third = runs.submit("job", id="third")
    runs.schedule_run(third, MIDNIGHT - 1)
    assert runs.dispatch_due().reason == "cap_reached"


# ─── catch-up windows ─────────────────────────────────────────────────────────────


def test_dispatcher_catch_up_window_holds_both_of_its_edges(
    runs: Scheduler, clock: ManualClock
) -> None:
    """dispatchDueTasks fires a task found due within its catch-up window (the seed's test
    of the window is not in the diff; this pins tasktrail's reading of it): due at its
    time exactly, due at the window's end exactly, not a ms later nor a ms before its
    time. Each run the tick fires is flagged catch-up (round ten), on time too."""
    runs.configure_runs(settings=RunSettings(per_tick=4))
    at, edge, past, early = (runs.submit("job", id=n) for n in ("at", "edge", "past", "early"))
    runs.schedule_run(at, clock.now)
    runs.schedule_run(edge, clock.now - CATCH_UP)
    runs.schedule_run(past, clock.now - CATCH_UP - 1)
    runs.schedule_run(early, clock.now + 1)
    fired = {runs.run(r).task_id: runs.run(r).catch_up for r in runs.dispatch_due().fired}
    assert fired == {"at": True, "edge": True}
    clock.advance(1)
    assert [runs.run(r).task_id for r in runs.dispatch_due().fired] == ["early"]


# ─── which refusal wins ───────────────────────────────────────────────────────────


def test_dispatcher_scheduled_tick_answers_durable_jobs_off_before_everything(
    runs: Scheduler, gate: SwitchedGate, clock: ManualClock
) -> None:
    """dispatchDueTasks asks durable jobs first, then admissions, then the cap of 0, then
    the maintenance lease: with every one of them refusing, the tick says durable jobs
    are off, and asks for no lease."""
    runs.configure_runs(settings=RunSettings(cap_per_day=0))
    runs.schedule_run(runs.submit("job", id="t1"), clock.now)
    gate.durable_jobs, gate.admissions, gate.draining = False, False, True
    head = runs.store.head()
    assert runs.dispatch_due().reason == "durable_jobs_off"
    assert runs.store.head() == head and gate.leases == 0


def test_dispatcher_manual_run_asks_the_gate_before_it_looks_the_task_up(
    runs: Scheduler, gate: SwitchedGate
) -> None:
    """runTaskNow asks durable jobs and admissions before it reads the ledger or the
    task's row: a task that does not exist is refused by the gate first."""
    gate.durable_jobs = False
    assert refused_with(runs, "no-such-task") == "durable_jobs_off"
    gate.durable_jobs, gate.admissions = True, False
    assert refused_with(runs, "no-such-task") == "admissions_closed"


def test_dispatcher_busy_reserved_slot_is_answered_after_the_tasks_own_refusals(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """runTaskNow checks the task (its live run of the day, its row, its marker, a later
    day's schedule, its runs of the day) before it takes the reserved manual slot: while
    another manual run holds the slot, each of those refusals wins over
    ``dispatch_slots_busy``, which only a task with none of them gets."""
    runs.configure_runs(settings=RunSettings(runs_per_day=1))
    ended = runs.submit("leaf", id="ended")
    runs.run_until_idle()
    executor.fail_next_submit("drain")
    live = runs.submit("job", id="live")
    runs.mint_run(live)  # dispatching: its run of the day is in flight
    future = runs.submit("job", id="future")
    runs.schedule_run(future, MIDNIGHT)
    spent = runs.submit("job", id="spent")
    failed_and_settled(runs, executor, runs.mint_run(spent))
    free, holder = runs.submit("job", id="free"), runs.submit("job", id="holder")
    seen: dict[str, str] = {}

    def while_the_manual_slot_is_held(request: SubmitRequest) -> None:
        executor.on_submit = None
        for task in (ended, live, future, spent, free):
            seen[task] = refused_with(runs, task)

    executor.on_submit = while_the_manual_slot_is_held
    runs.mint_run(holder)
    assert seen == {
        "ended": "task_ended",
        "live": "task_running",
        "future": "scheduled_future",
        "spent": "runs_exhausted",
        "free": "dispatch_slots_busy",
    }
    assert runs.run(runs.mint_run(free)).status == "running"  # the slot was given back


def test_dispatcher_running_marker_is_answered_before_a_later_days_schedule(
    runs: Scheduler, clock: ManualClock
) -> None:
    """runTaskNow checks the row's running marker before its scheduled day: a task whose
    job of yesterday still runs, since scheduled for a later day, is ``task_running``."""
    task = runs.submit("job", id="t1")
    runs.mint_run(task)
    clock.set(MIDNIGHT + HOUR)
    runs.schedule_run(task, MIDNIGHT + 2 * 24 * HOUR)
    assert refused_with(runs, task) == "task_running"


@pytest.mark.parametrize("kind", ["identity_conflict", "adopt", "fence", "transient"])
def test_dispatcher_tick_goes_on_past_every_submit_error_but_a_drain(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor, kind: Any
) -> None:
    """dispatchDueTasks breaks its loop only for ``task_running``, ``dispatch_slots_busy``
    and ``admissions_closed`` (a drain): a submit that failed any other way (an identity
    conflict, an adopt that found no live job, a fence, a transient error) leaves the
    next due task to fire in the same tick."""
    first, second = runs.submit("job", id="t0"), runs.submit("job", id="t1")
    for task in (first, second):
        runs.schedule_run(task, clock.now)
    executor.fail_next_submit(kind, task_id="t0", adopt_finds_job=False)
    report = runs.dispatch_due()
    assert [runs.run(r).task_id for r in report.fired] == ["t1"]
    assert report.submit_errors == {f"t0|{DAY}|1": kind} and report.reason is None


# ─── reconcile: several outcomes at once ───────────────────────────────────────────


def test_dispatcher_ended_task_whose_job_is_gone_is_orphaned_not_lost(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """reconcileOne asks for the task's row before anything about the job: a task that
    ended while its job vanished, past the lost window, is orphaned, not failed
    ``job_lost``."""
    run_id = runs.mint_run(runs.submit("leaf", id="t1"))
    executor.lose(job_of(runs, run_id))
    runs.run_until_idle()
    clock.advance(LOST + 1)
    assert settle(runs, run_id) == "orphaned"


def test_dispatcher_rescheduled_run_whose_job_is_gone_is_orphaned_by_its_cancel(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """reconcileOne cancels a rescheduled run's job before it reads the job: a job that
    vanished answers the cancel "not found", so the run is orphaned, neither superseded
    nor failed ``job_lost`` (its lost window passed too)."""
    task = runs.submit("job", id="t1")
    runs.schedule_run(task, clock.now)
    (run_id,) = runs.dispatch_due().fired
    executor.lose(job_of(runs, run_id))
    clock.advance(LOST + 1)
    runs.schedule_run(task, clock.now + HOUR)
    assert settle(runs, run_id) == "orphaned"


# ─── a superseded run's job ───────────────────────────────────────────────────────


class FailingCancel(InMemoryExecutor):
    """Raises an error no executor names on its first cancel."""

    failures: int = 1

    def cancel(self, job_id: str) -> CancelResult:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("the executor's connection dropped")
        return super().cancel(job_id)


def test_dispatcher_committing_answer_that_is_empty_is_completed_empty(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """reconcileOne completes a job whose answer was committing with its response when
    it has one, an empty one too; only a job with no response at all is completed with
    its partial text."""
    task = runs.submit("job", id="t1")
    runs.schedule_run(task, clock.now)
    (run_id,) = runs.dispatch_due().fired
    job_id = job_of(runs, run_id)
    executor.jobs[job_id] = replace(executor.jobs[job_id], response="", partial_text="half")
    runs.schedule_run(task, clock.now + HOUR)
    executor.fail_next_cancel("answer_committing")
    assert settle(runs, run_id) == "done"
    assert executor.jobs[job_id].response == ""


def test_dispatcher_cancel_that_raises_anything_else_is_tried_again(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """reconcileOne records nothing when a cancel throws an error that is neither a
    committing answer, a job not found, nor a persistence error: the run stays running
    with its job, and the next visit cancels again and supersedes it."""
    clock.set(T0)
    executor = FailingCancel()
    scheduler.configure_runs(executor=executor)
    task = scheduler.submit("job", id="t1")
    scheduler.schedule_run(task, clock.now)
    (run_id,) = scheduler.dispatch_due().fired
    scheduler.schedule_run(task, clock.now + HOUR)
    assert settle(scheduler, run_id) == "unchanged"
    assert scheduler.run(run_id).status == "running"
    assert settle(scheduler, run_id) == "superseded"
    assert executor.jobs[job_of(scheduler, run_id)].status == "canceled"


@pytest.mark.parametrize(
    ("job_end", "outcome"),
    [
        ("completed", "done"),
        ("failed", "superseded:failed"),
        ("canceled", "superseded:canceled"),
        ("interrupted", "superseded:interrupted"),
    ],
)
def test_dispatcher_cancel_that_finds_the_job_ended_settles_by_how_it_ended(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor, job_end: str, outcome: str
) -> None:
    """reconcileOne: a cancel not applied because the job had ended makes the run done
    when the job completed, else superseded with the job's status as its code; the job
    is cancelled no further."""
    task = runs.submit("job", id="t1")
    runs.schedule_run(task, clock.now)
    (run_id,) = runs.dispatch_due().fired
    job_id = job_of(runs, run_id)
    executor.finish(job_id, job_end)
    runs.schedule_run(task, clock.now + HOUR)
    assert settle(runs, run_id) == outcome
    assert executor.jobs[job_id].status == job_end


def test_dispatcher_superseded_run_counts_toward_the_days_attempts_and_spacing(
    runs: Scheduler, clock: ManualClock
) -> None:
    """pickEligible counts a superseded run among the task's runs of the day: a task
    rescheduled five minutes on fires at its new time only once the run spacing since the
    superseded run has passed, as attempt 2, flagged catch-up."""
    task = runs.submit("job", id="t1")
    runs.schedule_run(task, clock.now)
    (first,) = runs.dispatch_due().fired
    runs.schedule_run(task, clock.now + 5 * MINUTE)
    assert settle(runs, first) == "superseded"
    clock.advance(5 * MINUTE)
    assert runs.dispatch_due().fired == []  # 5 of the 10 minutes of spacing
    clock.advance(5 * MINUTE - 1)
    assert runs.dispatch_due().fired == []
    clock.advance(1)
    (second,) = runs.dispatch_due().fired
    run = runs.run(second)
    assert (run.attempt, run.catch_up, run.scheduled_for) == (2, True, T0 + 5 * MINUTE)


def test_dispatcher_dispatching_run_expires_by_today_in_the_zone_now_configured(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """decideDispatchingAction compares the run's day with today in the zone configured
    when it reconciles, not the zone the run was minted in: a zone already in the next
    day expires a run of 2026-01-01 two hours after it was minted, one still in
    2026-01-01 keeps a run alive past midnight UTC."""
    executor.fail_next_submit("drain", times=2)
    ahead = runs.mint_run(runs.submit("job", id="ahead"))
    clock.set(T0 + 2 * HOUR)  # 10:00 UTC: 2026-01-02 00:00 in Kiritimati
    runs.configure_runs(settings=RunSettings(tz="Pacific/Kiritimati"))
    assert settle(runs, ahead) == "failed:expired"
    runs.configure_runs(settings=RunSettings(tz="UTC"))
    behind = runs.mint_run(runs.submit("job", id="behind"))
    clock.set(MIDNIGHT + HOUR)  # 01:00 UTC: 2026-01-01 17:00 in Los Angeles
    runs.configure_runs(settings=RunSettings(tz="America/Los_Angeles"))
    executor.fail_next_submit("drain")
    assert settle(runs, behind) == "dispatching:drain"


# ─── a redrive's wait ─────────────────────────────────────────────────────────────


def test_dispatcher_failed_redrive_waits_from_its_own_submit(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """adoptOrSubmit sets ``retryAfter = now + wait`` at each failed submit: a redrive made
    late (three minutes after the run's retry time) that fails again waits the spacing
    from the redrive, to the ms, and a fence met by the next redrive waits its own time
    from then."""
    executor.fail_next_submit("transient", times=2)
    run_id = runs.mint_run(runs.submit("job", id="t1"))
    assert runs.run(run_id).retry_after == T0 + SPACING
    clock.set(T0 + SPACING + 3 * MINUTE)
    assert settle(runs, run_id) == "dispatching:transient"
    redriven = clock.now
    assert runs.run(run_id).retry_after == redriven + SPACING
    clock.set(redriven + SPACING - 1)
    assert settle(runs, run_id) == "unchanged"
    clock.set(redriven + SPACING)
    executor.fail_next_submit("fence", retry_after_ms=7 * SECOND)
    assert settle(runs, run_id) == "dispatching:fence"
    assert runs.run(run_id).retry_after == clock.now + 7 * SECOND
    assert runs.run(run_id).submit_attempts == 3


@pytest.mark.parametrize("fence_ms", [0, -5 * SECOND])
def test_dispatcher_fence_of_no_time_is_redriven_at_the_next_visit(
    runs: Scheduler,
    clock: ManualClock,
    executor: InMemoryExecutor,
    sqlite_url: str,
    fence_ms: int,
) -> None:
    """adoptOrSubmit takes a fence's ``retryAfterMs`` as it is: a fence of zero or less
    puts the run's retry time at or before now, so the next visit redrives it at once (an
    attempt used), and the log replays."""
    executor.fail_next_submit("fence", retry_after_ms=fence_ms)
    run_id = runs.mint_run(runs.submit("job", id="t1"))
    assert runs.run(run_id).retry_after == clock.now + fence_ms
    assert settle(runs, run_id) == "running"
    assert runs.run(run_id).submit_attempts == 1
    (row,) = replay(sqlite_url, snapshots=False).ledger
    assert (row["status"], row["submit_attempts"]) == ("running", 1)


# ─── adopt-or-submit and the job's state ──────────────────────────────────────────


def _job_in(executor: InMemoryExecutor, request: SubmitRequest, status: str) -> JobSnapshot:
    """A job for ``request`` that the executor admitted and moved to ``status``."""
    job = executor.admit(request)
    if status == "running":
        return executor.start(job.job_id)
    if status != "queued":
        return executor.finish(job.job_id, status)
    return job


@pytest.mark.parametrize(
    "status", ["queued", "running", "completed", "failed", "canceled", "interrupted"]
)
def test_dispatcher_redrive_looks_up_a_job_and_adopts_it_only_while_it_is_live(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor, status: str
) -> None:
    """adoptOrSubmit looks the client job id up first: a job there that is queued or
    running is adopted in that status, without a submit; one that ended, however it
    ended, is never adopted: the run submits again."""
    executor.fail_next_submit("transient")
    run_id = runs.mint_run(runs.submit("job", id="t1"))
    job = _job_in(executor, executor.requests[0], status)  # the submit landed after all
    clock.advance(SPACING)
    settle(runs, run_id)
    run = runs.run(run_id)
    if status in ("queued", "running"):
        assert (run.status, run.job_id, run.last_known_status) == ("running", job.job_id, status)
        assert len(executor.requests) == 1
    else:
        assert run.job_id != job.job_id
        assert [r.run_id for r in executor.requests] == [run_id, run_id]


class AdmitsThenRefuses(InMemoryExecutor):
    """Admits each submit's job in ``status`` and then answers that a live job is there
    (an answer lost while the job moved on)."""

    status: str = "queued"

    def submit(self, request: SubmitRequest) -> JobSnapshot:
        self.requests.append(request)
        _job_in(self, request, self.status)
        raise ActiveJobError("a job with this client id is live")


@pytest.mark.parametrize(
    "status", ["queued", "running", "completed", "failed", "canceled", "interrupted"]
)
def test_dispatcher_adopt_error_takes_the_job_only_while_it_is_live(
    scheduler: Scheduler, clock: ManualClock, status: str
) -> None:
    """adoptOrSubmit, on an active-job error, looks the client job id up again: a job that
    is queued or running is adopted in that status (no attempt used); one that ended is
    not, and the run waits the submit spacing with an attempt used."""
    clock.set(T0)
    executor = AdmitsThenRefuses()
    executor.status = status
    scheduler.configure_runs(executor=executor)
    run = scheduler.run(scheduler.mint_run(scheduler.submit("job", id="t1")))
    if status in ("queued", "running"):
        assert (run.status, run.last_known_status, run.submit_attempts) == ("running", status, 0)
    else:
        assert (run.status, run.job_id, run.last_submit_error) == ("dispatching", None, "adopt")
        assert (run.submit_attempts, run.retry_after) == (1, T0 + SPACING)


# ─── the reconcile cursor as the live set shrinks ─────────────────────────────────


class SteppedTime:
    """Stands in for the ``time`` module in :mod:`run_ticks`: ``monotonic`` answers each
    of ``readings`` in turn, then the last one."""

    def __init__(self, *readings: float) -> None:
        self.readings = list(readings)

    def monotonic(self) -> float:
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]


def test_dispatcher_reconcile_tick_cut_short_by_its_wall_still_moves_the_cursor(
    runs: Scheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reconcileDispatch advances its cursor by ``reconcilePerTick`` after the loop,
    whether the loop visited that many or its wall budget stopped it sooner: the runs the
    cut tick did not reach wait for the cursor to come round."""
    a, b, c, d, e = (runs.mint_run(runs.submit("job", id=f"t{i}")) for i in range(5))
    # The deadline is read at 0 and the first visit starts at 0; the second finds 41 s.
    monkeypatch.setattr(run_ticks, "time", SteppedTime(0.0, 0.0, 41.0))
    assert runs.reconcile().visited == [a]
    monkeypatch.undo()
    assert runs.reconcile().visited == [c, d]
    assert runs.reconcile().visited == [e, a]
    assert runs.reconcile().visited == [b, c]  # 6 % 5: b, skipped by the cut, comes round


def test_dispatcher_reconcile_visits_each_live_run_once_when_fewer_than_its_bound(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    """reconcileDispatch takes the first ``reconcilePerTick`` of the tick's live runs,
    rotated at ``cursor % live.length``: once the live set shrank below the bound each
    live run is visited once a tick (none twice), from where the cursor falls, and a
    tick with none live still moves the cursor."""
    runs.configure_runs(settings=RunSettings(reconcile_per_tick=3))
    a, b, c, d, e = (runs.mint_run(runs.submit("job", id=f"t{i}")) for i in range(5))
    for run_id in (a, b, c):
        executor.finish(job_of(runs, run_id), "completed")
    assert runs.reconcile().visited == [a, b, c]  # from 0; all three end done
    assert runs.reconcile().visited == [e, d]  # 3 % 2 = 1: two visits, not three
    for run_id in (d, e):
        executor.finish(job_of(runs, run_id), "completed")
    assert runs.reconcile().visited == [d, e]  # 6 % 2 = 0; both end done
    assert runs.reconcile().visited == []  # nothing live: the cursor still moves, to 12
    f = runs.mint_run(runs.submit("job", id="t5"))
    assert runs.reconcile().visited == [f]  # 12 % 1 = 0
