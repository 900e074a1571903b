"""The dispatch run ledger (SPEC.md section 3): its admission rules.

Each admission rule has a test named for it; every refusal is checked to append
nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import event_count
from helpers.probes import job_of
from helpers.runs_ledger import DAY_MS, HOUR, MINUTE
from helpers.runs_ledger import executor as executor
from helpers.runs_ledger import runs as runs

from tasktrail.domain import ManualClock, RuleViolation, Scheduler
from tasktrail.domain.runs.admission import AdmissionRefused
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.settings import RunSettings


def refused(scheduler: Scheduler, code: str, command: Callable[..., Any], *args: Any, **kw: Any):
    """Run a command that must be refused with ``code``; check it appended nothing."""
    before = scheduler.store.head()
    with pytest.raises(AdmissionRefused) as caught:
        command(*args, **kw)
    assert caught.value.code == code, caught.value
    assert scheduler.store.head() == before, "a refused command appended events"
    return caught.value


# ─── admission rules ─────────────────────────────────────────────────────────


def test_ledger_one_in_flight_run_per_task_day(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("transient")
    dispatching = runs.mint_run(task)
    assert runs.run(dispatching).status == "dispatching"
    refused(runs, "task_running", runs.mint_run, task)
    clock.advance(3 * MINUTE)
    runs.reconcile()  # redriven: running
    assert runs.run(dispatching).status == "running"
    refused(runs, "task_running", runs.mint_run, task)
    refused(runs, "task_running", runs.mint_run, task, trigger="scheduled")
    other = runs.submit("job")
    assert runs.run(runs.mint_run(other)).attempt == 1  # other tasks are not held up


def test_ledger_task_running_across_days_while_its_job_runs(
    runs: Scheduler, clock: ManualClock
) -> None:
    task = runs.submit("job")
    yesterday = runs.mint_run(task)
    clock.advance(DAY_MS)
    assert runs.run(yesterday).status == "running"
    refused(runs, "task_running", runs.mint_run, task)


def test_ledger_runs_exhausted_after_runs_per_day(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    for status in ("failed", "canceled", "completed"):
        run_id = runs.mint_run(task)
        executor.finish(job_of(runs, run_id), status)
        runs.reconcile()
    refusal = refused(runs, "runs_exhausted", runs.mint_run, task)
    assert "3 runs today" in str(refusal) and refusal.task_id == task


def test_ledger_run_spacing_applies_to_scheduled_runs(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    first = runs.mint_run(task, trigger="scheduled")
    executor.finish(job_of(runs, first), "failed")
    runs.reconcile()
    clock.advance(9 * MINUTE)
    refused(runs, "run_spacing", runs.mint_run, task, trigger="scheduled")
    # Manual runs ignore the spacing.
    manual = runs.mint_run(task)
    executor.finish(job_of(runs, manual), "failed")
    runs.reconcile()
    clock.advance(10 * MINUTE)
    assert runs.run(runs.mint_run(task, trigger="scheduled")).attempt == 3


def test_ledger_cap_off_at_zero(runs: Scheduler, clock: ManualClock) -> None:
    runs.configure_runs(settings=RunSettings(cap_per_day=0))
    task = runs.submit("job")
    runs.schedule_run(task, clock.now)
    head = runs.store.head()
    report = runs.dispatch_due()
    assert report.reason == "cap_off" and report.fired == [] and runs.store.head() == head
    refused(runs, "cap_off", runs.mint_run, task, trigger="scheduled")
    assert runs.run(runs.mint_run(task)).trigger == "manual"  # manual runs ignore the cap


def test_ledger_cap_reached_counts_every_run_of_the_day(
    runs: Scheduler, clock: ManualClock
) -> None:
    runs.configure_runs(settings=RunSettings(cap_per_day=2))
    a, b, c = (runs.submit("job") for _ in range(3))
    runs.mint_run(a)  # a manual run counts towards the cap too
    runs.mint_run(b, trigger="scheduled")
    refused(runs, "cap_reached", runs.mint_run, c, trigger="scheduled")
    runs.schedule_run(c, clock.now)
    assert runs.dispatch_due().reason == "cap_reached"
    clock.advance(DAY_MS)
    assert runs.run(runs.mint_run(c, trigger="scheduled")).day == "2026-01-02"


def test_ledger_one_reserved_manual_slot(runs: Scheduler, executor: InMemoryExecutor) -> None:
    first, second = runs.submit("job"), runs.submit("job")
    seen: list[AdmissionRefused] = []

    def concurrent_manual_run(request: Any) -> None:
        # While the first manual submit is in flight, a second manual run is asked for.
        executor.on_submit = None
        head = runs.store.head()
        with pytest.raises(AdmissionRefused) as caught:
            runs.mint_run(second)
        assert runs.store.head() == head
        seen.append(caught.value)

    executor.on_submit = concurrent_manual_run
    runs.mint_run(first)
    assert [r.code for r in seen] == ["dispatch_slots_busy"]
    assert runs.run(runs.mint_run(second)).status == "running"  # the slot was released


def test_ledger_background_slots_per_tick(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    runs.configure_runs(settings=RunSettings(per_tick=1))
    tasks = [runs.submit("job") for _ in range(3)]
    seen: list[str] = []

    def concurrent_scheduled_run(request: Any) -> None:
        executor.on_submit = None
        with pytest.raises(AdmissionRefused) as caught:
            runs.mint_run(tasks[2], trigger="scheduled")
        seen.append(caught.value.code)

    executor.on_submit = concurrent_scheduled_run
    runs.mint_run(tasks[1], trigger="scheduled")
    assert seen == ["dispatch_slots_busy"]
    # dispatch_due fires at most per_tick runs a call.
    for task in tasks:
        runs.schedule_run(task, clock.now)
    clock.advance(11 * MINUTE)
    assert len(runs.dispatch_due().fired) == 1
    assert len(runs.dispatch_due().fired) == 1


def test_ledger_scheduled_future_cannot_run_now(runs: Scheduler, clock: ManualClock) -> None:
    task = runs.submit("job")
    runs.schedule_run(task, clock.now + DAY_MS)
    refusal = refused(runs, "scheduled_future", runs.mint_run, task)
    assert "2026-01-02" in str(refusal)
    runs.schedule_run(task, clock.now + 2 * HOUR)  # later today is fine
    assert runs.run(runs.mint_run(task)).scheduled_for == clock.now + 2 * HOUR


def test_ledger_submit_exhausted_stops_scheduled_runs_for_the_day(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("transient", times=3)
    run_id = runs.mint_run(task, trigger="scheduled")
    for _ in range(2):
        clock.advance(3 * MINUTE)
        runs.reconcile()
    runs.reconcile()
    assert runs.run(run_id).error.code == "submit_exhausted"  # type: ignore[union-attr]
    clock.advance(11 * MINUTE)
    refused(runs, "submit_exhausted", runs.mint_run, task, trigger="scheduled")
    assert runs.run(runs.mint_run(task)).attempt == 2  # a manual run may still try


def test_ledger_task_ended_cannot_run(runs: Scheduler) -> None:
    task = runs.submit("leaf")
    runs.run_until_idle()
    assert runs.task(task).status == "terminal"
    refused(runs, "task_ended", runs.mint_run, task)


def test_every_refusal_appends_nothing(runs: Scheduler, clock: ManualClock) -> None:
    ended = runs.submit("leaf")
    runs.run_until_idle()
    busy, future = runs.submit("job"), runs.submit("job")
    runs.mint_run(busy)
    runs.schedule_run(future, clock.now + 2 * DAY_MS)
    head, count = runs.store.head(), event_count(runs.store)
    for code, task, trigger in [
        ("task_running", busy, "manual"),
        ("task_running", busy, "scheduled"),
        ("scheduled_future", future, "manual"),
        ("task_ended", ended, "manual"),
    ]:
        refused(runs, code, runs.mint_run, task, trigger=trigger)
    assert runs.store.head() == head and event_count(runs.store) == count


def test_no_executor_refuses_to_mint(scheduler: Scheduler) -> None:
    task = scheduler.submit("job")
    head = scheduler.store.head()
    with pytest.raises(Exception, match="configure_runs"):
        scheduler.mint_run(task)
    assert scheduler.store.head() == head


def test_a_closed_scheduler_mints_nothing(runs: Scheduler) -> None:
    task = runs.submit("job")
    runs.close()
    with pytest.raises(RuleViolation) as caught:
        runs.mint_run(task)
    assert caught.value.rule == 2
