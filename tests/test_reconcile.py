"""Reconcile of the dispatch run ledger (SPEC.md section 3): one test per outcome.

Running runs end done, failed (job failed/canceled/interrupted, job_lost),
orphaned (task gone, job gone) or superseded (rescheduled before it ran);
dispatching runs end failed expired or submit_exhausted, or are redriven.
Reconcile visits live runs round-robin, a bounded number a call.
"""

from __future__ import annotations

import pytest
from helpers.probes import settle

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.settings import RunSettings

T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC."""
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY_MS = 24 * HOUR


@pytest.fixture
def executor() -> InMemoryExecutor:
    """An executor in memory that fails only when told to."""
    return InMemoryExecutor()


@pytest.fixture
def runs(scheduler: Scheduler, clock: ManualClock, executor: InMemoryExecutor) -> Scheduler:
    """A scheduler at 2026-01-01 08:00 UTC handing runs to ``executor``."""
    clock.set(T0)
    scheduler.configure_runs(executor=executor, settings=RunSettings())
    return scheduler


def running_run(runs: Scheduler, kind: str = "job") -> tuple[str, str]:
    """A task with a manual run whose job was taken: (run id, job id)."""
    run_id = runs.mint_run(runs.submit(kind))
    job_id = runs.run(run_id).job_id
    assert job_id is not None and runs.run(run_id).status == "running"
    return run_id, job_id


def scheduled_run(runs: Scheduler, clock: ManualClock) -> tuple[str, str, str]:
    """A task scheduled for now with its scheduled run taken: (task, run id, job id)."""
    task = runs.submit("job")
    runs.schedule_run(task, clock.now)
    (run_id,) = runs.dispatch_due().fired
    job_id = runs.run(run_id).job_id
    assert job_id is not None
    return task, run_id, job_id


# ─── running runs ────────────────────────────────────────────────────────────


def test_reconcile_done_when_job_completed(runs: Scheduler, executor: InMemoryExecutor) -> None:
    run_id, job_id = running_run(runs)
    executor.finish(job_id, "completed", completed_at=T0 + 5)
    assert settle(runs, run_id) == "done"
    run = runs.run(run_id)
    assert run.status == "done" and run.completed_at == T0 + 5 and run.error is None
    assert runs.ledger.markers[run.task_id] == "done"


@pytest.mark.parametrize("job_status", ["failed", "canceled", "interrupted"])
def test_reconcile_failed_when_job_failed_canceled_or_interrupted(
    runs: Scheduler, executor: InMemoryExecutor, job_status: str
) -> None:
    run_id, job_id = running_run(runs)
    executor.finish(job_id, job_status)
    assert settle(runs, run_id) == f"failed:{job_status}"
    run = runs.run(run_id)
    assert run.status == "failed" and run.error is not None and run.error.code == job_status
    assert run.last_known_status == job_status


def test_reconcile_failed_takes_the_jobs_error_code(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    run_id, job_id = running_run(runs)
    executor.finish(job_id, "failed", error_code="model_overloaded")
    assert settle(runs, run_id) == "failed:model_overloaded"


def test_reconcile_records_a_live_job_status_change(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    run_id, job_id = running_run(runs)
    assert settle(runs, run_id) == "unchanged"  # still queued
    executor.start(job_id)
    assert settle(runs, run_id) == "running"
    assert runs.run(run_id).last_known_status == "running"
    assert type(runs.run_history(run_id)[-1]).__name__ == "RunStarted"


def test_reconcile_orphaned_when_task_ended(runs: Scheduler) -> None:
    run_id, _ = running_run(runs, kind="leaf")
    runs.run_until_idle()  # the task itself finishes: its row is gone
    assert runs.task(runs.run(run_id).task_id).status == "terminal"
    assert settle(runs, run_id) == "orphaned"
    assert runs.run(run_id).error.code == "orphaned"  # type: ignore[union-attr]


def test_reconcile_job_lost_after_the_lost_window(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    run_id, job_id = running_run(runs)
    executor.lose(job_id)
    clock.advance(6 * HOUR)
    assert settle(runs, run_id) == "unchanged"  # not yet past the window
    clock.advance(1)
    assert settle(runs, run_id) == "failed:job_lost"
    assert runs.ledger.markers[runs.run(run_id).task_id] == "failed"


# ─── rescheduled before it ran ───────────────────────────────────────────────


def test_reconcile_superseded_when_rescheduled(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task, run_id, job_id = scheduled_run(runs, clock)
    runs.schedule_run(task, clock.now + 3 * HOUR)
    assert settle(runs, run_id) == "superseded"
    assert executor.jobs[job_id].status == "canceled"
    assert runs.run(run_id).error.code == "superseded"  # type: ignore[union-attr]


def test_reconcile_superseded_with_the_job_status_when_it_ended_first(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task, run_id, job_id = scheduled_run(runs, clock)
    executor.finish(job_id, "interrupted")
    runs.schedule_run(task, clock.now + HOUR)
    assert settle(runs, run_id) == "superseded:interrupted"


def test_reconcile_done_when_rescheduled_but_job_completed(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task, run_id, job_id = scheduled_run(runs, clock)
    executor.finish(job_id, "completed", completed_at=T0 + 7)
    runs.schedule_run(task, clock.now + HOUR)
    assert settle(runs, run_id) == "done"
    assert runs.run(run_id).completed_at == T0 + 7


def test_reconcile_done_when_the_answer_was_committing(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task, run_id, job_id = scheduled_run(runs, clock)
    runs.schedule_run(task, clock.now + HOUR)
    executor.fail_next_cancel("answer_committing")
    assert settle(runs, run_id) == "done"
    assert executor.jobs[job_id].status == "completed"


def test_reconcile_orphaned_when_cancel_finds_no_job(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task, run_id, _ = scheduled_run(runs, clock)
    runs.schedule_run(task, clock.now + HOUR)
    executor.fail_next_cancel("not_found")
    assert settle(runs, run_id) == "orphaned"
    assert "not found" in runs.run(run_id).error.message  # type: ignore[union-attr]


def test_reconcile_unchanged_when_cancel_fails(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task, run_id, _ = scheduled_run(runs, clock)
    runs.schedule_run(task, clock.now + HOUR)
    executor.fail_next_cancel("persistence")
    assert settle(runs, run_id) == "unchanged"
    assert settle(runs, run_id) == "superseded"  # the next visit cancels


# ─── dispatching runs ────────────────────────────────────────────────────────


def test_reconcile_expired_when_day_rolled_over_while_dispatching(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    executor.fail_next_submit("drain")
    run_id = runs.mint_run(runs.submit("job"))
    clock.advance(DAY_MS)
    assert settle(runs, run_id) == "failed:expired"


def test_reconcile_expired_is_checked_before_exhaustion(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    executor.fail_next_submit("transient", times=3)
    run_id = runs.mint_run(runs.submit("job"))
    for _ in range(2):
        clock.advance(3 * MINUTE)
        settle(runs, run_id)
    assert runs.run(run_id).submit_attempts == 3
    clock.advance(DAY_MS)
    assert settle(runs, run_id) == "failed:expired"


def test_reconcile_submit_exhausted(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    executor.fail_next_submit("fence", times=2, retry_after_ms=MINUTE)
    executor.fail_next_submit("transient")
    run_id = runs.mint_run(runs.submit("job"))
    clock.advance(MINUTE)
    assert settle(runs, run_id) == "dispatching:fence"
    clock.advance(MINUTE)
    assert settle(runs, run_id) == "dispatching:transient"
    assert settle(runs, run_id) == "failed:submit_exhausted"
    assert len(executor.requests) == 3


def test_reconcile_redrives_a_fresh_run_after_the_dispatch_wall(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """A crash between mint and submit leaves a dispatching run; it is redriven."""
    from tasktrail.domain.runs.admission import mint

    settings = runs.run_settings
    task = runs.submit("job")
    run = runs._decide(mint, task, trigger="manual", settings=settings, slot_free=True)
    assert settle(runs, run.run_id) == "unchanged"  # retry_after: 25 s after it fired
    clock.advance(25_001)
    assert settle(runs, run.run_id) == "running"


# ─── visiting ────────────────────────────────────────────────────────────────


def test_reconcile_visits_live_runs_round_robin_bounded_per_tick(runs: Scheduler) -> None:
    run_ids = [running_run(runs)[0] for _ in range(5)]
    visits = [runs.reconcile().visited for _ in range(3)]
    assert [len(v) for v in visits] == [2, 2, 2]
    assert visits[0] == run_ids[0:2] and visits[1] == run_ids[2:4]
    assert visits[2] == [run_ids[4], run_ids[0]]  # the cursor wraps around
    runs.configure_runs(settings=RunSettings(reconcile_per_tick=5))
    assert sorted(runs.reconcile().visited) == sorted(run_ids)


def test_reconcile_never_visits_ended_runs(runs: Scheduler, executor: InMemoryExecutor) -> None:
    run_id, job_id = running_run(runs)
    executor.finish(job_id)
    settle(runs, run_id)
    assert runs.reconcile().visited == []
    assert runs.ledger.live == {}


def test_reconcile_outcomes_replay_from_the_store(
    store_url: str, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    clock.set(T0)
    with Scheduler.open(store_url, clock=clock) as live:
        live.configure_runs(executor=executor, settings=RunSettings(reconcile_per_tick=10))
        ids = [live.mint_run(live.submit("job", phase="start")) for _ in range(3)]
        jobs = [live.run(r).job_id for r in ids]
        executor.finish(jobs[0] or "", "completed")
        executor.finish(jobs[1] or "", "canceled")
        executor.lose(jobs[2] or "")
        clock.advance(6 * HOUR + 1)
        outcomes = live.reconcile().outcomes
        assert [outcomes[r] for r in ids] == ["done", "failed:canceled", "failed:job_lost"]
        rows = live.ledger.rows()
    with Scheduler.open(store_url, clock=clock) as again:
        assert again.ledger.rows() == rows
        counts = again.ledger.per_day["2026-01-01"]
        assert counts.runs == 3 and counts.ended == {"done": 1, "failed": 2}
