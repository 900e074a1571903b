"""The dispatcher's behaviour, third round (seed 003, glasses-server's task-dispatcher):
orders of checks, timing windows and reconcile outcomes the earlier rounds did not pin.
Each test names the behaviour and the seed function it comes from; the fixes are
written down in docs/seed-fidelity.md, "Round three"."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from helpers.probes import job_of, refused_with, settle

from tasktrail.domain import ManualClock, RunSettings, Scheduler
from tasktrail.domain.runs.executor import CancelResult
from tasktrail.domain.runs.gate import SwitchedGate
from tasktrail.domain.runs.memory_executor import InMemoryExecutor

T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC."""
DAY = "2026-01-01"
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY_MS = 24 * HOUR


# ─── orders of the checks ────────────────────────────────────────────────────────


def test_dispatcher_manual_run_answers_its_own_rules_before_a_drain(
    runs: Scheduler, gate: SwitchedGate, executor: InMemoryExecutor
) -> None:
    """runTaskNow: durable jobs and admissions first, then the run's own rules
    (task_running, scheduled_future, runs_exhausted, the reserved slot), and the
    maintenance lease last, just before minting."""
    busy, spent, fresh = (runs.submit("job", id=name) for name in ("busy", "spent", "fresh"))
    runs.mint_run(busy)
    for status in ("failed", "canceled", "completed"):
        run_id = runs.mint_run(spent)
        executor.finish(job_of(runs, run_id), status)
        settle(runs, run_id)
    gate.draining = True
    assert refused_with(runs, busy) == "task_running"
    assert refused_with(runs, spent) == "runs_exhausted"
    assert refused_with(runs, fresh) == "admissions_closed"  # a drain, as runTaskNow says
    seen: list[str] = []

    def while_the_slot_is_taken(request: Any) -> None:
        executor.on_submit = None
        gate.draining = True
        seen.append(refused_with(runs, fresh))
        gate.draining = False

    gate.draining = False
    executor.on_submit = while_the_slot_is_taken
    runs.mint_run(runs.submit("job", id="other"))
    assert seen == ["dispatch_slots_busy"]
    assert gate.leases == 0
    # The gate's own questions still come first.
    gate.draining, gate.admissions = True, False
    assert refused_with(runs, busy) == "admissions_closed"
    gate.durable_jobs = False
    assert refused_with(runs, busy) == "durable_jobs_off"


def test_dispatcher_manual_run_of_an_ended_task_in_flight_is_task_running(
    runs: Scheduler,
) -> None:
    """runTaskNow asks the live ledger (task_running) before it looks the row up."""
    run_id = runs.mint_run(runs.submit("leaf", id="t1"))
    runs.run_until_idle()  # the task ends; its run is live until reconcile orphans it
    assert runs.task("t1").status == "terminal" and runs.run(run_id).status == "running"
    assert refused_with(runs, "t1") == "task_running"
    settle(runs, run_id)
    assert refused_with(runs, "t1") == "task_ended"


def test_dispatcher_manual_run_answers_scheduled_future_before_runs_exhausted(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """runTaskNow: a task scheduled for a later day (in the configured zone) is refused
    scheduled_future before its runs of the day are counted."""
    runs.configure_runs(settings=RunSettings(tz="Europe/Berlin", runs_per_day=1))
    task = runs.submit("job", id="t1")
    executor.finish(job_of(runs, run_id := runs.mint_run(task)), "failed")
    settle(runs, run_id)
    assert refused_with(runs, task) == "runs_exhausted"
    # 23:30 UTC is today in UTC but tomorrow in Berlin.
    runs.schedule_run(task, clock.now + 15 * HOUR + 30 * MINUTE)
    assert refused_with(runs, task) == "scheduled_future"


def test_dispatcher_scheduled_tick_answers_cap_off_before_a_drain(
    runs: Scheduler, gate: SwitchedGate, clock: ManualClock
) -> None:
    """dispatchDueTasks: durable jobs, admissions, then a cap of 0 (cap_off), and only
    then the maintenance lease."""
    runs.configure_runs(settings=RunSettings(cap_per_day=0))
    runs.schedule_run(runs.submit("job", id="t1"), clock.now)
    gate.draining = True
    head = runs.store.head()
    assert runs.dispatch_due().reason == "cap_off"
    gate.admissions = False
    assert runs.dispatch_due().reason == "admissions_closed"
    assert runs.store.head() == head and gate.leases == 0


# ─── scheduled dispatch ──────────────────────────────────────────────────────────


def test_dispatcher_failed_submits_do_not_use_up_the_tick(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """dispatchDueTasks counts toward per_tick only the runs it fired; a run whose
    submit failed is minted and the loop goes on to the next due task."""
    tasks = [runs.submit("job", id=f"t{n}") for n in range(4)]
    for task in tasks:
        runs.schedule_run(task, clock.now)
    executor.fail_next_submit("transient", task_id="t0")
    executor.fail_next_submit("fence", task_id="t1")
    report = runs.dispatch_due()
    assert [runs.run(r).task_id for r in report.minted] == tasks
    assert [runs.run(r).task_id for r in report.fired] == ["t2", "t3"]
    assert report.submit_errors == {f"t0|{DAY}|1": "transient", f"t1|{DAY}|1": "fence"}


def test_dispatcher_run_spacing_counts_from_the_latest_run_of_either_trigger(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """pickEligible spaces a task's scheduled runs from its latest run that day,
    whatever fired it: a manual run starts the spacing again."""
    task = runs.submit("job", id="t1")
    first = runs.mint_run(task, trigger="scheduled")
    executor.finish(job_of(runs, first), "failed")
    runs.reconcile()
    clock.advance(5 * MINUTE)
    manual = runs.mint_run(task)
    executor.finish(job_of(runs, manual), "failed")
    runs.reconcile()
    clock.advance(6 * MINUTE)  # 11 min after the scheduled run, 6 after the manual one
    assert refused_with(runs, task, trigger="scheduled") == "run_spacing"
    clock.advance(4 * MINUTE)  # exactly the spacing after the manual run
    assert runs.run(runs.mint_run(task, trigger="scheduled")).attempt == 3


def test_dispatcher_manual_run_keeps_its_reserved_slot_while_background_ones_are_busy(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    """acquireSlots: the manual slot is reserved apart from the per_tick background ones."""
    runs.configure_runs(settings=RunSettings(per_tick=1))
    scheduled, other, manual = (runs.submit("job", id=n) for n in ("s", "o", "m"))
    seen: list[str] = []

    def while_the_background_slot_is_taken(request: Any) -> None:
        executor.on_submit = None
        seen.append(refused_with(runs, other, trigger="scheduled"))
        seen.append(runs.run(runs.mint_run(manual)).status)

    executor.on_submit = while_the_background_slot_is_taken
    runs.mint_run(scheduled, trigger="scheduled")
    assert seen == ["dispatch_slots_busy", "running"]


# ─── submit windows ──────────────────────────────────────────────────────────────


def test_dispatcher_drain_waits_the_submit_spacing(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """adoptOrSubmit: a drain's retry comes after the submit spacing (and uses no attempt)."""
    executor.fail_next_submit("drain")
    run_id = runs.mint_run(runs.submit("job"))
    assert runs.run(run_id).retry_after == clock.now + 2 * MINUTE
    clock.advance(2 * MINUTE - 1)
    assert settle(runs, run_id) == "unchanged"
    clock.advance(1)
    assert settle(runs, run_id) == "running"
    assert len(executor.requests) == 2


def test_dispatcher_reconcile_skips_a_run_whose_submit_is_in_flight(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """decideDispatchingAction: a run whose submit is in flight in this process is not
    redriven, even past its retry_after; the submit's own answer settles it."""
    outcomes: list[str] = []

    def reconcile_meanwhile(request: Any) -> None:
        executor.on_submit = None
        clock.advance(HOUR)  # well past the 25 s dispatch wall
        outcomes.extend(runs.reconcile().outcomes.values())

    executor.on_submit = reconcile_meanwhile
    run_id = runs.mint_run(runs.submit("job"))
    assert outcomes == ["unchanged"]
    assert len(executor.requests) == 1 and runs.run(run_id).status == "running"


def test_dispatcher_expired_is_checked_before_retry_after(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """decideDispatchingAction: a day that rolled over fails the run expired at once,
    even while its retry_after is still ahead."""
    executor.fail_next_submit("fence", retry_after_ms=2 * DAY_MS)
    run_id = runs.mint_run(runs.submit("job"))
    clock.advance(DAY_MS)
    assert settle(runs, run_id) == "failed:expired"
    assert len(executor.requests) == 1


# ─── reconcile of running runs ───────────────────────────────────────────────────


def test_dispatcher_running_run_outlives_its_day(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """decideDispatchingAction expires only dispatching runs: a running run whose day
    is over is still settled from its job (done), never expired."""
    run_id = runs.mint_run(runs.submit("job"))
    clock.advance(DAY_MS - HOUR)  # 07:00 the next day; its job is there, so not lost
    executor.start(job_of(runs, run_id))
    assert settle(runs, run_id) == "running"  # its new job status, nothing more
    executor.finish(job_of(runs, run_id), "completed")
    assert settle(runs, run_id) == "done"


def test_dispatcher_task_gone_is_orphaned_before_its_job_is_read(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    """reconcileOne: a row gone is checked first; the run is orphaned even when its
    job completed, and the job is not cancelled."""
    run_id = runs.mint_run(runs.submit("leaf", id="t1"))
    job_id = job_of(runs, run_id)
    runs.run_until_idle()
    executor.finish(job_id, "completed")
    assert settle(runs, run_id) == "orphaned"
    assert executor.jobs[job_id].status == "completed"


def test_dispatcher_manual_run_of_a_scheduled_task_is_superseded_when_rescheduled(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """mintRun records the row's run_at on every run, manual ones too, and reconcile
    supersedes a run scheduled for another time; a run minted before the task had a
    schedule has none and is not superseded by one."""
    scheduled = runs.submit("job", id="t1")
    runs.schedule_run(scheduled, clock.now + HOUR)
    run_id = runs.mint_run(scheduled)
    assert runs.run(run_id).scheduled_for == clock.now + HOUR
    runs.schedule_run(scheduled, clock.now + 2 * HOUR)
    assert settle(runs, run_id) == "superseded"
    assert executor.jobs[job_of(runs, run_id)].status == "canceled"

    plain = runs.submit("job", id="t2")
    plain_run = runs.mint_run(plain)
    runs.schedule_run(plain, clock.now + HOUR)
    assert settle(runs, plain_run) == "unchanged"
    executor.finish(job_of(runs, plain_run), "completed")
    assert settle(runs, plain_run) == "done"


class StubbornExecutor(InMemoryExecutor):
    """Answers the first cancel "not applied" while the job stays live."""

    refusals: int = 1

    def cancel(self, job_id: str) -> CancelResult:
        if self.refusals:
            self.refusals -= 1
            job = self.snapshot(job_id)
            assert job is not None
            return CancelResult(applied=False, job=job)
        return super().cancel(job_id)


def test_dispatcher_cancel_not_applied_to_a_live_job_is_tried_again(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """reconcileOne: a cancel that did not apply while the job is still live records
    nothing; the next visit cancels again."""
    clock.set(T0)
    executor = StubbornExecutor()
    scheduler.configure_runs(executor=executor)
    task = scheduler.submit("job", id="t1")
    scheduler.schedule_run(task, clock.now)
    (run_id,) = scheduler.dispatch_due().fired
    scheduler.schedule_run(task, clock.now + HOUR)
    assert settle(scheduler, run_id) == "unchanged"
    assert scheduler.run(run_id).status == "running"
    assert settle(scheduler, run_id) == "superseded"


def test_dispatcher_committing_answer_is_completed_with_what_the_job_has(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """reconcileOne: a cancel that meets an answer being committed completes the job
    with its response, else its partial text, else nothing; the run is done."""
    task = runs.submit("job", id="t1")
    runs.schedule_run(task, clock.now)
    (run_id,) = runs.dispatch_due().fired
    job_id = job_of(runs, run_id)
    executor.jobs[job_id] = replace(executor.jobs[job_id], partial_text="half an answer")
    runs.schedule_run(task, clock.now + HOUR)
    executor.fail_next_cancel("answer_committing")
    assert settle(runs, run_id) == "done"
    assert executor.jobs[job_id].response == "half an answer"


@pytest.mark.parametrize("job_end", ["completed", "committing"])
def test_dispatcher_rescheduled_task_fires_at_its_new_time_after_a_cancel_found_it_done(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor, job_end: str
) -> None:
    """reconcileOne marks the task done or failed only from the job's own snapshot: a
    run the cancel of a reschedule found completed (or committing) ends done without
    a marker, so the task's new schedule still fires."""
    task = runs.submit("job", id="t1")
    runs.schedule_run(task, clock.now)
    (run_id,) = runs.dispatch_due().fired
    if job_end == "completed":
        executor.finish(job_of(runs, run_id), "completed")
    else:
        executor.fail_next_cancel("answer_committing")
    runs.schedule_run(task, clock.now + HOUR)
    assert settle(runs, run_id) == "done"
    clock.advance(HOUR)
    assert [runs.run(r).task_id for r in runs.dispatch_due().fired] == ["t1"]


def test_dispatcher_schedule_that_supersedes_nothing_keeps_the_task_running(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """reconcileOne marks a task running again while its run's job runs and the new
    schedule does not supersede it (the run had no schedule, or the task was moved
    back to the run's time), so runTaskNow and dispatchDueTasks stay refused the next
    day while that job still runs."""
    plain = runs.submit("job", id="plain")
    plain_run = runs.mint_run(plain)  # no schedule: nothing to supersede
    runs.schedule_run(plain, clock.now + DAY_MS + HOUR)  # tomorrow 09:00
    moved = runs.submit("job", id="moved")
    runs.schedule_run(moved, clock.now)
    (moved_run,) = runs.dispatch_due().fired
    runs.schedule_run(moved, clock.now + HOUR)
    runs.schedule_run(moved, clock.now)  # back to the run's time before any reconcile
    for run_id in (plain_run, moved_run):
        assert settle(runs, run_id) == "unchanged"
    clock.advance(DAY_MS + HOUR)  # tomorrow 09:00; both jobs still queued
    assert runs.dispatch_due().minted == []
    assert refused_with(runs, plain) == "task_running"
    assert refused_with(runs, moved) == "task_running"
    executor.finish(job_of(runs, plain_run), "completed")
    assert settle(runs, plain_run) == "done"
    assert runs.run(runs.mint_run(plain)).day == "2026-01-02"


# ─── adopt-or-submit, by the state of the job it finds ─────────────────────────


def test_dispatcher_redrive_adopts_a_live_job_in_its_status_and_never_an_ended_one(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """adoptOrSubmit takes a job found by the client job id only while it is live (in
    whatever live status it is); an ended one is submitted over, never adopted."""
    live_task, ended_task = runs.submit("job", id="live"), runs.submit("job", id="ended")
    executor.fail_next_submit("transient", times=2)
    live_run, ended_run = runs.mint_run(live_task), runs.mint_run(ended_task)
    live_job = executor.admit(executor.requests[0])  # both submits landed after all
    ended_job = executor.admit(executor.requests[1])
    executor.start(live_job.job_id)
    executor.finish(ended_job.job_id, "completed")
    clock.advance(2 * MINUTE)
    outcomes = runs.reconcile().outcomes
    assert outcomes[live_run] == "running"
    assert runs.run(live_run).last_known_status == "running"
    assert runs.run(live_run).job_id == live_job.job_id
    assert outcomes[ended_run] != "running" and runs.run(ended_run).job_id is None
    assert [r.client_job_id for r in executor.requests[2:]] == [runs.run(ended_run).client_job_id]


def test_dispatcher_dispatching_run_of_an_ended_task_is_redriven_then_orphaned(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """decideDispatchingAction does not look at the task: a dispatching run whose task
    ended is submitted again, and the running run is then orphaned."""
    executor.fail_next_submit("transient")
    run_id = runs.mint_run(runs.submit("leaf", id="t1"))
    runs.run_until_idle()
    clock.advance(2 * MINUTE)
    assert settle(runs, run_id) == "running"
    assert settle(runs, run_id) == "orphaned"
