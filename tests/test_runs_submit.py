"""The dispatch run ledger (SPEC.md section 3): submit errors and scheduled dispatch.

Each submit error class has a test named for it, and ``dispatch_due`` fires the due
schedules once, going on past a failed submit. Reconcile outcomes are in
``test_reconcile.py``.
"""

from __future__ import annotations

from helpers.probes import job_of
from helpers.runs_ledger import HOUR, MINUTE
from helpers.runs_ledger import executor as executor
from helpers.runs_ledger import runs as runs

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.settings import RunSettings

# ─── submit error classes ────────────────────────────────────────────────────


def test_submit_identity_conflict_fails_the_run(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("identity_conflict")
    run = runs.run(runs.mint_run(task))
    assert run.status == "failed" and run.error is not None
    assert run.error.code == "identity_conflict" and run.submit_attempts == 0
    assert runs.run(runs.mint_run(task)).attempt == 2  # a new attempt, a new client id


def test_submit_adopt_takes_the_live_job(runs: Scheduler, executor: InMemoryExecutor) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("adopt")  # the job landed, but the answer says "already active"
    run = runs.run(runs.mint_run(task))
    assert run.status == "running" and run.submit_attempts == 0
    assert run.job_id == executor.job_of(run.client_job_id).job_id  # type: ignore[union-attr]
    assert [type(e).__name__ for e in runs.run_history(run.run_id)] == ["RunMinted", "RunAdopted"]


def test_submit_adopt_with_no_live_job_retries_like_transient(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("adopt", adopt_finds_job=False)
    run = runs.run(runs.mint_run(task))
    assert run.status == "dispatching" and run.submit_attempts == 1
    assert run.last_submit_error == "adopt" and run.retry_after == clock.now + 2 * MINUTE


def test_submit_adopt_on_redrive_never_submits_twice(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """A submit whose answer was lost leaves a live job; the redrive finds it first."""
    task = runs.submit("job")
    executor.fail_next_submit("transient")
    run_id = runs.mint_run(task)
    executor.admit(executor.requests[-1])  # the job landed after all
    clock.advance(3 * MINUTE)
    runs.reconcile()
    assert runs.run(run_id).status == "running"
    assert len(executor.requests) == 1


def test_submit_fence_waits_its_retry_after(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("fence", retry_after_ms=5 * MINUTE)
    run_id = runs.mint_run(task)
    run = runs.run(run_id)
    assert run.status == "dispatching" and run.submit_attempts == 1
    assert run.retry_after == clock.now + 5 * MINUTE
    clock.advance(4 * MINUTE)
    assert runs.reconcile().outcomes[run_id] == "unchanged"
    clock.advance(MINUTE)
    assert runs.reconcile().outcomes[run_id] == "running"


def test_submit_drain_does_not_consume_an_attempt(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("drain", times=5)
    run_id = runs.mint_run(task)
    for _ in range(4):
        clock.advance(2 * MINUTE)
        runs.reconcile()
    run = runs.run(run_id)
    assert run.status == "dispatching" and run.submit_attempts == 0 and run.drains == 5
    clock.advance(2 * MINUTE)
    runs.reconcile()
    assert runs.run(run_id).status == "running" and runs.run(run_id).attempt == 1


def test_submit_transient_retries_after_the_spacing(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("transient")
    run_id = runs.mint_run(task)
    assert runs.run(run_id).retry_after == clock.now + 2 * MINUTE
    assert runs.run(run_id).submit_attempts == 1
    clock.advance(MINUTE)
    assert runs.reconcile().outcomes[run_id] == "unchanged"
    clock.advance(MINUTE)
    assert runs.reconcile().outcomes[run_id] == "running"
    assert runs.run(run_id).client_job_id == executor.requests[0].client_job_id


# ─── scheduled dispatch ──────────────────────────────────────────────────────


def test_dispatch_due_fires_due_schedules_once(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    early, late, far = (runs.submit("job") for _ in range(3))
    runs.schedule_run(early, clock.now - HOUR)
    runs.schedule_run(late, clock.now + HOUR)
    runs.schedule_run(far, clock.now - 4 * HOUR)  # beyond the 3 h catch-up window
    report = runs.dispatch_due()
    assert [runs.run(r).task_id for r in report.fired] == [early]
    assert runs.run(report.fired[0]).trigger == "scheduled"
    executor.finish(job_of(runs, report.fired[0]))
    runs.reconcile()
    clock.advance(HOUR + 11 * MINUTE)
    fired = runs.dispatch_due().fired
    assert [runs.run(r).task_id for r in fired] == [late]  # early is done: not again
    runs.schedule_run(early, clock.now)  # rescheduled: due again
    assert [runs.run(r).task_id for r in runs.dispatch_due().fired] == [early]


def test_dispatch_due_goes_on_after_a_failed_submit_and_stops_at_a_drain(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    runs.configure_runs(settings=RunSettings(per_tick=5))
    tasks = [runs.submit("job") for _ in range(4)]
    for task in tasks:
        runs.schedule_run(task, clock.now)
    executor.fail_next_submit("identity_conflict")
    executor.fail_next_submit("transient")
    executor.fail_next_submit("drain")
    report = runs.dispatch_due()
    assert report.reason == "admissions_closed" and report.fired == []
    assert list(report.submit_errors.values()) == ["identity_conflict", "transient", "drain"]
    assert len(report.minted) == 3
