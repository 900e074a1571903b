"""The dispatcher's behaviour, fourth round (seed 003, glasses-server's task-dispatcher):
reconcile outcomes at their edges, the round-robin visit and the submit error classes
with their attempt counting. Each test names the behaviour and the seed function it
comes from; the fixes are written down in docs/seed-fidelity.md, "Round four"."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from helpers.probes import job_of, settle

from tasktrail.domain import ManualClock, RunSettings, Scheduler
from tasktrail.domain.runs.events import RunSubmitFailed
from tasktrail.domain.runs.executor import JobSnapshot, OrphanFenceError, SubmitRequest
from tasktrail.domain.runs.gate import SwitchedGate
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.replay import replay

T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC."""
SECOND = 1_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY_MS = 24 * HOUR
LOST = 6 * HOUR
"""The default lost window (``job_lost_ms``)."""


# ─── reconcile outcomes at their edges ──────────────────────────────────────────


def test_dispatcher_lost_window_counts_from_when_the_run_fired_not_its_submit(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """reconcileOne: ``now - firedAt > TASK_JOB_LOST_MS`` (strictly), with ``firedAt`` the
    mint: a run submitted late (here after a six-hour fence) whose job then vanishes is
    lost one ms past six hours after it was minted, not after its submit. A job that is
    there is never lost, however long it runs."""
    executor.fail_next_submit("fence", retry_after_ms=LOST)
    lost = runs.mint_run(runs.submit("job", id="lost"))
    kept = runs.mint_run(runs.submit("job", id="kept"))
    clock.advance(LOST)
    assert settle(runs, lost) == "running"  # the fence is over: submitted now
    executor.lose(job_of(runs, lost))
    assert settle(runs, lost) == "unchanged"  # exactly the window: not yet lost
    clock.advance(1)
    assert settle(runs, lost) == "failed:job_lost"
    assert settle(runs, kept) == "unchanged"  # its job is queued: never lost
    assert runs.run(kept).status == "running"


def test_dispatcher_task_ended_and_rescheduled_is_orphaned_without_a_cancel(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """reconcileOne: a row gone is checked before a reschedule: a run whose task both
    ended and was moved is orphaned, and its job is not cancelled."""
    task = runs.submit("leaf", id="t1")
    runs.schedule_run(task, clock.now)
    (run_id,) = runs.dispatch_due().fired
    runs.schedule_run(task, clock.now + HOUR)
    runs.run_until_idle()  # the task ends
    assert settle(runs, run_id) == "orphaned"
    assert executor.jobs[job_of(runs, run_id)].status == "queued"


def test_dispatcher_cleared_schedule_supersedes_nothing(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """reconcileOne supersedes only when the row has a run time (``row.run_at``) other
    than the run's: a schedule cleared leaves the run to its job, which is not
    cancelled; the run ends done as its job does."""
    task = runs.submit("job", id="t1")
    runs.schedule_run(task, clock.now)
    (run_id,) = runs.dispatch_due().fired
    runs.schedule_run(task, None)
    assert settle(runs, run_id) == "unchanged"
    assert executor.jobs[job_of(runs, run_id)].status == "queued"
    executor.finish(job_of(runs, run_id), "completed")
    assert settle(runs, run_id) == "done"


def test_dispatcher_dispatching_run_of_a_rescheduled_task_is_redriven_then_superseded(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """decideDispatchingAction does not look at the row: a dispatching run whose task
    was rescheduled is submitted again; once running, its job is cancelled and the run
    superseded."""
    task = runs.submit("job", id="t1")
    runs.schedule_run(task, clock.now)
    executor.fail_next_submit("transient")
    (run_id,) = runs.dispatch_due().minted
    runs.schedule_run(task, clock.now + 3 * HOUR)
    clock.advance(2 * MINUTE)
    assert settle(runs, run_id) == "running"
    assert settle(runs, run_id) == "superseded"
    assert executor.jobs[job_of(runs, run_id)].status == "canceled"


def test_dispatcher_dispatching_run_expires_at_local_midnight_of_the_configured_zone(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """decideDispatchingAction compares the run's day with the tick's local day
    (``localClock(now, config.timezone).day``): in New York a run minted at 23:00 and
    fenced past midnight waits until 23:59:59.999 and is expired at 00:00 sharp."""
    runs.configure_runs(settings=RunSettings(tz="America/New_York"))
    midnight = T0 + 21 * HOUR  # 2026-01-02 05:00 UTC: 00:00 in New York
    clock.set(midnight - HOUR)
    executor.fail_next_submit("fence", retry_after_ms=2 * HOUR)
    run_id = runs.mint_run(runs.submit("job"))
    assert runs.run(run_id).day == "2026-01-01"
    clock.set(midnight - 1)
    assert settle(runs, run_id) == "unchanged"
    clock.set(midnight)
    assert settle(runs, run_id) == "failed:expired"


def test_dispatcher_day_rollover_expires_a_run_whose_submit_is_in_flight(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """decideDispatchingAction: the day is checked before the submits in flight, so a
    reconcile that runs past midnight while a run's submit is still out fails it
    expired; the submit's late answer does not bring it back."""
    outcomes: list[str] = []

    def past_midnight(request: SubmitRequest) -> None:
        executor.on_submit = None
        clock.advance(DAY_MS)
        outcomes.extend(runs.reconcile().outcomes.values())

    executor.on_submit = past_midnight
    run_id = runs.mint_run(runs.submit("job"))
    assert outcomes == ["failed:expired"]
    assert runs.run(run_id).status == "failed"


@pytest.mark.parametrize("job_end", ["completed", "failed"])
@pytest.mark.parametrize("job_time", [float("nan"), float("inf"), "2026-01-01T09:00:00Z", True])
def test_dispatcher_job_end_without_a_usable_time_ends_the_run_now(
    scheduler: Scheduler,
    clock: ManualClock,
    executor: InMemoryExecutor,
    sqlite_url: str,
    job_end: str,
    job_time: Any,
) -> None:
    """reconcileOne ends a run at the job's ``completedAt ?? now``: a job whose end time
    is no finite number of ms ends the run at the scheduler's now, which the stored
    event and a replay read back."""
    clock.set(T0)
    scheduler.configure_runs(executor=executor, settings=RunSettings())
    run_id = scheduler.mint_run(scheduler.submit("job"))
    job_id = job_of(scheduler, run_id)
    executor.finish(job_id, job_end)
    executor.jobs[job_id] = replace(executor.jobs[job_id], completed_at=job_time)
    clock.advance(MINUTE)
    assert settle(scheduler, run_id).split(":")[0] == (
        "done" if job_end == "completed" else "failed"
    )
    assert scheduler.run(run_id).completed_at == T0 + MINUTE
    stored = scheduler.run_history(run_id)[-1]  # read back from the store
    assert stored.completed_at == T0 + MINUTE  # type: ignore[attr-defined]
    (row,) = replay(sqlite_url, snapshots=False).ledger
    assert row["completed_at"] == T0 + MINUTE


# ─── the round-robin visit ───────────────────────────────────────────────────────


def test_dispatcher_reconcile_cursor_is_an_index_into_each_ticks_live_runs(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    """reconcileDispatch: the tick lists the live runs in ledger order, starts at
    ``cursor % live.length`` and advances the cursor by ``reconcilePerTick`` whatever
    the tick did, an empty tick too: runs that ended shift the others under it."""
    assert runs.reconcile().visited == []  # nothing live: the cursor still moves, to 2
    a, b, c, d, e = (runs.mint_run(runs.submit("job", id=f"t{i}")) for i in range(5))
    for run_id in (c, d):
        executor.finish(job_of(runs, run_id), "completed")
    assert runs.reconcile().visited == [c, d]  # 2 % 5; both end done
    assert list(runs.ledger.live) == [a, b, e]
    assert runs.reconcile().visited == [b, e]  # 4 % 3 = 1: a waits for the wrap
    assert runs.reconcile().visited == [a, b]  # 6 % 3 = 0


def test_dispatcher_a_run_that_waits_takes_its_place_in_the_ticks_bound(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """reconcileDispatch counts every run it visits toward ``reconcilePerTick``, one
    that only waits for its ``retryAfter`` too; a drain met by one redrive does not
    stop the tick (the next run is visited)."""
    executor.fail_next_submit("transient", task_id="t1")
    executor.fail_next_submit("fence", retry_after_ms=HOUR, task_id="t0")
    drained = runs.mint_run(runs.submit("job", id="t1"))
    waiting = runs.mint_run(runs.submit("job", id="t0"))
    last = runs.mint_run(runs.submit("job", id="t2"))
    clock.advance(2 * MINUTE)
    executor.fail_next_submit("drain", task_id="t1")
    report = runs.reconcile()
    assert report.outcomes == {drained: "dispatching:drain", waiting: "unchanged"}
    assert report.visited == [drained, waiting]
    assert runs.reconcile().visited == [last, drained]


# ─── submit error classes and their attempts ─────────────────────────────────────


def test_dispatcher_identity_conflict_on_a_redrive_fails_the_run_and_uses_no_attempt(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """adoptOrSubmit: an identity conflict ends the run failed at once, wherever the
    submit came from (here reconcile's redrive), without counting a submit attempt and
    without marking the task."""
    executor.fail_next_submit("transient")
    run_id = runs.mint_run(runs.submit("job", id="t1"))
    clock.advance(2 * MINUTE)
    executor.fail_next_submit("identity_conflict")
    assert settle(runs, run_id) == "failed:identity_conflict"
    run = runs.run(run_id)
    assert run.submit_attempts == 1 and len(executor.requests) == 2
    assert "t1" not in runs.ledger.markers


def test_dispatcher_only_consuming_submit_errors_count_toward_exhaustion(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """adoptOrSubmit: every class but a drain (and an identity conflict) adds a submit
    attempt, an ``adopt`` that found no live job included; decideDispatchingAction fails
    the run ``submit_exhausted`` at the visit after the last one, its retryAfter
    (here a fence's hour) notwithstanding."""
    executor.fail_next_submit("transient")
    executor.fail_next_submit("drain")
    executor.fail_next_submit("adopt", adopt_finds_job=False)
    executor.fail_next_submit("drain")
    executor.fail_next_submit("fence", retry_after_ms=HOUR)
    run_id = runs.mint_run(runs.submit("job"))
    seen = []
    for _ in range(4):
        clock.advance(2 * MINUTE)
        seen.append(settle(runs, run_id))
    assert seen == [
        "dispatching:drain",
        "dispatching:adopt",
        "dispatching:drain",
        "dispatching:fence",
    ]
    run = runs.run(run_id)
    assert (run.submit_attempts, run.drains, run.retry_after) == (3, 2, clock.now + HOUR)
    assert settle(runs, run_id) == "failed:submit_exhausted"
    assert len(executor.requests) == 5


def test_dispatcher_fence_waits_its_own_retry_after_even_when_shorter_than_the_spacing(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """adoptOrSubmit: a fence sets ``retryAfter = now + error.retryAfterMs`` (not the
    submit spacing); decideDispatchingAction redrives once ``retryAfter > now`` no
    longer holds, so at that very ms."""
    executor.fail_next_submit("fence", retry_after_ms=10 * SECOND)
    run_id = runs.mint_run(runs.submit("job"))
    assert runs.run(run_id).retry_after == clock.now + 10 * SECOND
    clock.advance(10 * SECOND - 1)
    assert settle(runs, run_id) == "unchanged"
    clock.advance(1)
    assert settle(runs, run_id) == "running"


class FenceWithout(InMemoryExecutor):
    """Fences the first submit with a retry_after an executor should not give."""

    def __init__(self, retry_after_ms: Any) -> None:
        super().__init__()
        self.fence_ms = retry_after_ms

    def submit(self, request: SubmitRequest) -> JobSnapshot:
        if not self.requests:
            self.requests.append(request)
            raise OrphanFenceError("fenced", retry_after_ms=self.fence_ms)
        return super().submit(request)


@pytest.mark.parametrize("fence_ms", [None, float("nan"), float("inf"), "soon"])
def test_dispatcher_fence_without_a_usable_retry_after_waits_the_submit_spacing(
    scheduler: Scheduler, clock: ManualClock, sqlite_url: str, fence_ms: Any
) -> None:
    """adoptOrSubmit waits a fence's retryAfterMs, and the submit spacing otherwise. A
    fence whose retry_after is not a finite number is recorded as waiting the spacing:
    it neither escapes ``mint_run`` after the run was minted nor records a time a
    replay cannot read back."""
    clock.set(T0)
    scheduler.configure_runs(executor=FenceWithout(fence_ms), settings=RunSettings())
    run_id = scheduler.mint_run(scheduler.submit("job"))
    run = scheduler.run(run_id)
    assert (run.status, run.last_submit_error, run.submit_attempts) == ("dispatching", "fence", 1)
    assert run.retry_after == T0 + 2 * MINUTE
    stored = scheduler.run_history(run_id)[-1]  # read back from the store
    assert isinstance(stored, RunSubmitFailed) and stored.retry_after == T0 + 2 * MINUTE
    (row,) = replay(sqlite_url, snapshots=False).ledger
    assert (row["run_id"], row["status"]) == (run_id, "dispatching")
    clock.advance(2 * MINUTE)
    assert settle(scheduler, run_id) == "running"


def test_dispatcher_redrive_asks_only_about_a_drain(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor, gate: SwitchedGate
) -> None:
    """reconcileDispatch takes the maintenance lease and nothing else: with durable jobs
    off and admissions closed, a dispatching run is still redriven (only new runs are
    refused)."""
    executor.fail_next_submit("transient")
    run_id = runs.mint_run(runs.submit("job"))
    gate.durable_jobs = False
    gate.admissions = False
    clock.advance(2 * MINUTE)
    assert settle(runs, run_id) == "running"
