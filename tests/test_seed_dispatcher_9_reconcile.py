"""The dispatcher's behaviour, ninth round (seed 003, glasses-server's task-dispatcher): the
corners earlier rounds touched least, in reconcile. Its order when several outcomes apply
at once, how a superseded run's job is cancelled (and what such a run still counts for; a
dispatching run expired by today in the zone now configured), and the reconcile cursor as
the live set shrinks. Each test names the behaviour and the seed function it comes from;
the fixes are written down in docs/seed-fidelity.md, "Round nine (dispatcher)"."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers.probes import job_of, settle
from helpers.seed_dispatcher_9 import HOUR, LOST, MIDNIGHT, MINUTE, T0

from tasktrail.domain import ManualClock, RunSettings, Scheduler
from tasktrail.domain.dispatch import run_ticks
from tasktrail.domain.runs.executor import CancelResult
from tasktrail.domain.runs.memory_executor import InMemoryExecutor

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
