"""Rules 8 to 13 and 15 of SPEC.md section 1: when a task may run (again).

One test per numbered rule; each fails if its rule is broken. Sleeps are finite and
end on an abort mark (rule 8), recovery counts restarts and parks a task that never
progresses (rule 9), close is not a crash (rule 10), progress resets the restart count
(rule 11), abort handlers have a restart limit too (rule 12), blocked reasons are
computed from the registry, never stored (rule 13), and ``wake()`` says whether and
when to run (rule 15).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import crash, finishing
from helpers.probes import refused, running

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition, UnknownTask

# 8 ──────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("until", [-1, math.inf, math.nan, "soon", True, None])
def test_rule_08_sleep_needs_finite_non_negative_until(scheduler: Scheduler, until) -> None:
    task_id = running(scheduler)
    refused(scheduler, 8, scheduler.sleep, task_id, until)


def test_rule_08_abort_invocation_cannot_sleep(scheduler: Scheduler) -> None:
    task_id = scheduler.submit("job")
    scheduler.abort(task_id)
    assert scheduler.reserve(task_id) == "abort"
    refused(scheduler, 8, scheduler.sleep, task_id, scheduler.now() + 10)


def test_rule_08_sleep_is_due_at_until_and_abort_mark_ends_it(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task_id = running(scheduler)
    scheduler.sleep(task_id, until=clock.now + 500, phase="end")
    refused(scheduler, 8, scheduler.reserve, task_id)
    clock.advance(499)
    refused(scheduler, 8, scheduler.reserve, task_id)
    clock.advance(1)
    assert scheduler.reserve(task_id) == "run"
    assert scheduler.task(task_id).checkpoint.phase == "end"

    marked = running(scheduler)
    scheduler.sleep(marked, until=clock.now + 10_000)
    scheduler.abort(marked)
    assert scheduler.reserve(marked) == "abort"


# 9 ──────────────────────────────────────────────────────────────────────────


def test_rule_09_recovery_counts_restarts_and_parks(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    first = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry, restart_limit=2)
    task_id = running(first)
    crash(first)
    second = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry, restart_limit=2)
    assert second.task(task_id).status == "pending"
    assert second.task(task_id).restarts == 1
    assert second.parked == []
    second.reserve(task_id)
    crash(second)
    third = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry, restart_limit=2)
    assert third.task(task_id).restarts == 2
    assert third.parked == [task_id]
    assert third.blocked_reason(task_id) == "restart_limit"
    refused(third, 9, third.reserve, task_id)
    assert third.run_pass().reserved == []
    assert third.retry(task_id) is True
    assert third.task(task_id).restarts == 0
    assert third.reserve(task_id) == "run"
    third.close()


def test_rule_09_raised_limit_unparks_and_retry_edge_cases(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    first = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry, restart_limit=1)
    task_id = running(first)
    idle = first.submit("job")
    crash(first)
    second = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry, restart_limit=1)
    assert second.blocked_reason(task_id) == "restart_limit"
    second.restart_limit = 5  # a raised limit unparks at the next pass
    assert task_id in second.run_pass().reserved
    before = second.store.head()
    assert second.retry(idle) is False  # not parked: does nothing
    assert second.store.head() == before
    with pytest.raises(UnknownTask):
        second.retry("no-such-task")
    second.close()


# 10 ─────────────────────────────────────────────────────────────────────────


def test_rule_10_close_is_not_a_crash(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    first = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    task_id = running(first)
    first.close()
    second = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    task = second.task(task_id)
    assert task.status == "pending" and task.restarts == 0
    assert second.history(task_id)[-1].rule == 10
    second.close()


# 11 ─────────────────────────────────────────────────────────────────────────


def test_rule_11_progress_resets_restarts_same_checkpoint_does_not(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    first = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry, restart_limit=5)
    task_id = running(first)
    crash(first)
    second = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry, restart_limit=5)
    assert second.task(task_id).restarts == 1
    second.reserve(task_id)
    second.checkpoint(task_id, "start")  # the same checkpoint again: not progress
    assert second.task(task_id).restarts == 1
    second.checkpoint(task_id, "end")  # a different state: progress
    assert second.task(task_id).restarts == 0
    second.close()


# 12 ─────────────────────────────────────────────────────────────────────────


def test_rule_12_abort_handler_cut_off_restart_limit_times_ends_faulted(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(
        sqlite_url, clock=clock, worker="w", registry=registry, restart_limit=2
    )
    task_id = running(scheduler)
    crash(scheduler)
    scheduler = Scheduler.open(
        sqlite_url, clock=clock, worker="w", registry=registry, restart_limit=2
    )
    assert scheduler.task(task_id).restarts == 1
    scheduler.abort(task_id)
    assert scheduler.task(task_id).restarts == 0  # an abort mark resets restarts
    for cut_off in (1, 2):
        assert scheduler.reserve(task_id) == "abort"
        crash(scheduler)
        scheduler = Scheduler.open(
            sqlite_url, clock=clock, worker="w", registry=registry, restart_limit=2
        )
        assert scheduler.task(task_id).restarts == cut_off
    assert scheduler.reserve(task_id) is None
    outcome = scheduler.task(task_id).outcome
    assert outcome.status == "faulted" and outcome.reason == "restart_limit"
    scheduler.close()


def test_rule_12_request_mark_replaces_restart_mark(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    task_id = running(scheduler, abandon_on_restart=True)
    crash(scheduler)
    scheduler = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    assert scheduler.task(task_id).abort_reason == "restart"
    scheduler.abort(task_id)
    task = scheduler.task(task_id)
    assert task.abort_requested and task.abort_reason is None
    before = scheduler.store.head()
    scheduler.abort(task_id)  # a second request changes nothing
    assert scheduler.store.head() == before
    scheduler.close()


# 13 ─────────────────────────────────────────────────────────────────────────


def test_rule_13_blocked_reasons_come_from_the_registry(
    sqlite_url: str, clock: ManualClock
) -> None:
    registry = Registry([TaskDefinition("job", 2, {"start": finishing()})])
    scheduler = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    missing = scheduler.submit("ghost", phase="start")
    too_old = scheduler.submit("job", version=3)
    no_migration = scheduler.submit("job", version=1)
    assert scheduler.blocked_reason(missing) == "missing_definition"
    assert scheduler.blocked_reason(too_old) == "version_too_old"
    assert scheduler.blocked_reason(no_migration) == "migration_failed"
    for task_id in (missing, too_old, no_migration):
        refused(scheduler, 13, scheduler.reserve, task_id)
    # Blocked reasons are computed, never stored: a registry change unblocks.
    registry.register(TaskDefinition("ghost", 1, {"start": finishing()}))
    assert scheduler.blocked_reason(missing) is None
    scheduler.close()


def test_rule_13_failed_migration_blocks_and_migrate_takes_over(
    sqlite_url: str, clock: ManualClock
) -> None:
    def failing_migrate(task):
        raise ValueError("cannot read v1 memos")

    registry = Registry([TaskDefinition("job", 1, {"start": finishing()})])
    scheduler = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    old = scheduler.submit("job")
    registry.register(TaskDefinition("job", 2, {"start": finishing()}, migrate=failing_migrate))
    refused(scheduler, 13, scheduler.reserve, old)
    assert scheduler.blocked_reason(old) == "migration_failed"
    registry.register(
        TaskDefinition("job", 2, {"start": finishing(), "v2": finishing()}, migrate=lambda t: "v2")
    )
    scheduler.retry(old)
    assert scheduler.reserve(old) == "run"
    task = scheduler.task(old)
    assert task.version == 2 and task.checkpoint.phase == "v2"
    scheduler.close()


def test_rule_13_never_blocked_running_completing_or_request_marked(
    sqlite_url: str, clock: ManualClock
) -> None:
    registry = Registry([TaskDefinition("job", 1, {"start": finishing()})])
    scheduler = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    active = running(scheduler)
    owner = running(scheduler)
    scheduler.submit("job", owner=owner)
    scheduler.finish(owner, "completed")
    marked = scheduler.submit("job")
    scheduler.abort(marked)
    registry.unregister("job")
    assert scheduler.blocked_reason(active) is None
    assert scheduler.blocked_reason(owner) is None
    assert scheduler.blocked_reason(marked) is None
    scheduler.close()


def test_rule_13_abort_marked_task_no_definition_takes_ends_orphaned(
    sqlite_url: str, clock: ManualClock
) -> None:
    registry = Registry([TaskDefinition("job", 1, {"start": finishing()})])
    scheduler = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    owner = scheduler.submit("ghost", phase="start")
    child = scheduler.submit("job", owner=owner)
    scheduler.abort(owner)
    refused(scheduler, 3, scheduler.reserve, owner)  # something it owns is live
    scheduler.run_until_idle()  # the child aborts (no handler: aborted), then the owner
    assert scheduler.task(child).outcome.status == "aborted"
    outcome = scheduler.task(owner).outcome
    assert outcome.status == "orphaned" and outcome.reason == "missing_definition"
    scheduler.close()


# 15 ─────────────────────────────────────────────────────────────────────────


def test_rule_15_wake_answers_active_and_earliest_sleep(
    tmp_path: Path, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(tmp_path / "wake.db", clock=clock, registry=registry)
    assert scheduler.wake() == {"active": False, "at": None}
    late = running(scheduler)
    scheduler.sleep(late, until=clock.now + 2000)
    early = running(scheduler)
    scheduler.sleep(early, until=clock.now + 1000)
    assert scheduler.wake() == {"active": False, "at": clock.now + 1000}
    clock.advance(1000)
    assert scheduler.wake() == {"active": True, "at": clock.now + 1000}
    scheduler.reserve(early)
    assert scheduler.wake()["active"] is True  # running counts
    scheduler.finish(early, "completed")
    assert scheduler.wake() == {"active": False, "at": clock.now + 1000}
    parked_kind = scheduler.submit("ghost", phase="x")  # blocked: not active
    child = scheduler.submit("leaf", owner=parked_kind)
    scheduler.reserve(child)
    scheduler.sleep(child, until=clock.now + 1000)
    assert scheduler.wake()["active"] is False
    scheduler.abort(parked_kind)  # marked; it ends orphaned once its child has ended
    assert scheduler.reserve(child) == "abort"
    scheduler.finish(child, "aborted")
    # An abort-marked task no definition takes, owning nothing live, is work.
    assert scheduler.wake()["active"] is True
    scheduler.close()
