"""One test per numbered rule of SPEC.md section 1; each fails if its rule is broken."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import crash, finishing
from helpers.probes import refused, running

from tasktrail.domain import (
    ManualClock,
    Registry,
    RuleViolation,
    Scheduler,
    TaskDefinition,
    UnknownTask,
)

# 1 ──────────────────────────────────────────────────────────────────────────


def test_rule_01_decision_on_non_running_task_writes_nothing(scheduler: Scheduler) -> None:
    waiting = running(scheduler)
    other = scheduler.submit("leaf")
    scheduler.wait(waiting, [other])
    error = refused(scheduler, 1, scheduler.checkpoint, waiting, "end")
    assert "waiting" in str(error) and waiting in str(error)

    sleeper = running(scheduler)
    scheduler.sleep(sleeper, until=scheduler.now() + 1000)
    refused(scheduler, 1, scheduler.finish, sleeper, "completed")

    done = running(scheduler)
    scheduler.finish(done, "completed")
    refused(scheduler, 1, scheduler.memo, done, "k", 1)

    pending = scheduler.submit("job")
    refused(scheduler, 1, scheduler.checkpoint, pending, "end")


def test_rule_01_completing_task_takes_no_decision(scheduler: Scheduler) -> None:
    owner = running(scheduler)
    scheduler.submit("leaf", owner=owner)
    scheduler.finish(owner, "completed")
    assert scheduler.task(owner).status == "completing"
    refused(scheduler, 1, scheduler.checkpoint, owner, "end")


def _submitted_under(scheduler: Scheduler, owner: str) -> list[str]:
    """The tasks the log records as submitted with ``owner`` as their owner."""
    return [
        r.event.task_id
        for r in scheduler.store.read()
        if type(r.event).__name__ == "TaskSubmitted" and r.event.owner_id == owner  # type: ignore[attr-defined]
    ]


@pytest.mark.parametrize("ending", ["sleep", "wait", "finish", "finish_holding"])
def test_rule_01_owned_submit_after_the_invocation_ended_is_refused(
    store_url: str, clock: ManualClock, registry: Registry, ending: str
) -> None:
    """A phase that put its task to sleep, made it wait, or finished it (terminal, or
    holding its outcome for a child) has ended its invocation: a child it submits
    after that is refused under rule 1 and appends nothing."""
    seen: dict[str, object] = {}

    def phase(invocation) -> None:
        if ending == "sleep":
            invocation.sleep(invocation.now() + 60_000)
        elif ending == "wait":
            invocation.wait([seen["other"]])
        else:
            if ending == "finish_holding":
                seen["first"] = invocation.submit("leaf")
            invocation.finish("completed")
        store = invocation.scheduler.store
        seen["head"] = store.head()
        try:
            seen["late"] = invocation.submit("leaf")
        except RuleViolation as refusal:
            seen["refusal"], seen["head_after"] = refusal, store.head()
            raise

    registry.register(TaskDefinition("ender", 1, {"start": phase}))
    scheduler = Scheduler.open(store_url, clock=clock, worker="w", registry=registry)
    try:
        seen["other"] = scheduler.submit("leaf", phase="go")
        task_id = scheduler.submit("ender")
        scheduler.run_pass()
        refusal = seen.get("refusal")
        assert isinstance(refusal, RuleViolation) and "late" not in seen, seen
        assert refusal.rule == 1 and refusal.task_id == task_id
        assert seen["head_after"] == seen["head"], "a refused submit appended events"
        expected = [seen["first"]] if ending == "finish_holding" else []
        assert _submitted_under(scheduler, task_id) == expected
    finally:
        scheduler.close()


# 2 ──────────────────────────────────────────────────────────────────────────


def test_rule_02_closing_scheduler_ends_every_decision(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    decisions: list[str] = []

    def closing_phase(invocation) -> None:
        invocation.scheduler.closing = True  # what close() sets before it stops tasks
        try:
            invocation.checkpoint("end")
        except RuleViolation as error:
            decisions.append(f"rule {error.rule}")
            raise

    registry.register(TaskDefinition("closer", 1, {"start": closing_phase, "end": finishing()}))
    scheduler = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    task_id = scheduler.submit("closer")
    before = scheduler.store.head()
    scheduler.run_pass()
    assert decisions == ["rule 2"]
    assert scheduler.store.head() == before + 1  # the reservation only
    assert scheduler.task(task_id).checkpoint.phase == "start"
    refused(scheduler, 2, scheduler.submit, "job")
    refused(scheduler, 2, scheduler.abort, task_id)
    scheduler.closing = False
    scheduler.close()
    with pytest.raises(RuleViolation) as caught:
        scheduler.submit("job")
    assert caught.value.rule == 2


# 3 ──────────────────────────────────────────────────────────────────────────


def test_rule_03_abort_mark_ends_run_invocation_at_next_decision(scheduler: Scheduler) -> None:
    task_id = running(scheduler)
    scheduler.abort(task_id)
    refused(scheduler, 3, scheduler.checkpoint, task_id, "end")
    refused(scheduler, 3, scheduler.finish, task_id, "completed")
    # The run invocation has ended: the abort invocation may now be reserved.
    assert scheduler.reserve(task_id) == "abort"
    scheduler.finish(task_id, "aborted")
    assert scheduler.task(task_id).outcome.status == "aborted"


def test_rule_03_abort_invocation_waits_for_owned_live_work(scheduler: Scheduler) -> None:
    owner = scheduler.submit("job")
    child = running(scheduler, "leaf", owner=owner)
    scheduler.abort(owner)
    refused(scheduler, 3, scheduler.reserve, owner)
    assert scheduler.task(child).abort_requested
    # The child's run invocation ends at its next decision; its abort handler ends it.
    refused(scheduler, 3, scheduler.checkpoint, child, "go")
    assert scheduler.reserve(child) == "abort"
    scheduler.finish(child, "aborted")
    assert scheduler.reserve(owner) == "abort"


def test_rule_03_owned_submit_after_an_abort_mark_arrived_is_refused(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Another writer abort-marks a task while its phase runs: the run invocation has
    ended, so the child the phase submits next is refused under rule 3, appends
    nothing, and the abort handler runs next."""
    seen: dict[str, object] = {}
    operator = Scheduler.open(store_url, clock=clock, worker="operator")

    def phase(invocation) -> None:
        assert operator.abort(invocation.task_id, actor="ops", reason="stop it")
        seen["head"] = operator.store.head()
        try:
            seen["late"] = invocation.submit("leaf")
        except RuleViolation as refusal:
            seen["refusal"], seen["head_after"] = refusal, operator.store.head()
            raise

    def aborted(invocation) -> None:
        invocation.finish("aborted")

    registry.register(TaskDefinition("marked", 1, {"start": phase}, abort=aborted))
    scheduler = Scheduler.open(store_url, clock=clock, worker="w", registry=registry)
    try:
        task_id = scheduler.submit("marked")
        scheduler.run_pass()
        refusal = seen.get("refusal")
        assert isinstance(refusal, RuleViolation) and "late" not in seen, seen
        assert refusal.rule == 3 and refusal.task_id == task_id
        assert seen["head_after"] == seen["head"], "a refused submit appended events"
        assert _submitted_under(scheduler, task_id) == []
        scheduler.run_pass()  # the invocation ended: the abort handler runs next
        assert scheduler.task(task_id).outcome.status == "aborted"  # type: ignore[union-attr]
    finally:
        scheduler.close()
        operator.close()


# 4 ──────────────────────────────────────────────────────────────────────────


def test_rule_04_terminal_is_absorbing(scheduler: Scheduler) -> None:
    task_id = running(scheduler)
    scheduler.finish(task_id, "completed")
    before = scheduler.store.head()
    assert scheduler.abort(task_id) is False  # a no-op, not an error
    assert scheduler.store.head() == before
    assert scheduler.task(task_id).abort_requested is False
    refused(scheduler, 4, scheduler.reserve, task_id)
    refused(scheduler, 4, scheduler.submit, "leaf", owner=task_id)
    assert scheduler.retry(task_id) is False
    assert scheduler.store.head() == before


# 5 ──────────────────────────────────────────────────────────────────────────


def test_rule_05_finish_with_live_owned_tasks_holds_outcome(scheduler: Scheduler) -> None:
    owner = running(scheduler)
    first = scheduler.submit("leaf", owner=owner)
    second = scheduler.submit("leaf", owner=owner)
    scheduler.finish(owner, "completed")
    held = scheduler.task(owner)
    assert held.status == "completing" and held.outcome.status == "completed"
    scheduler.reserve(first)
    scheduler.finish(first, "completed")
    assert scheduler.task(owner).status == "completing"
    scheduler.reserve(second)
    scheduler.finish(second, "failed")
    ended = scheduler.task(owner)
    assert ended.status == "terminal" and ended.outcome.status == "completed"
    assert scheduler.history(owner)[-1].rule == 5


def test_rule_05_release_climbs_the_ownership_tree(scheduler: Scheduler) -> None:
    root = running(scheduler)
    middle = running(scheduler, owner=root)
    leaf = scheduler.submit("leaf", owner=middle)
    scheduler.finish(middle, "completed")
    scheduler.finish(root, "completed")
    assert scheduler.task(root).status == "completing"
    scheduler.reserve(leaf)
    scheduler.finish(leaf, "completed")
    assert scheduler.task(middle).status == "terminal"
    assert scheduler.task(root).status == "terminal"


# 6 ──────────────────────────────────────────────────────────────────────────


def test_rule_06_cascade_marks_live_descendants(scheduler: Scheduler) -> None:
    root = running(scheduler)
    child = scheduler.submit("job", owner=root)
    grandchild = scheduler.submit("leaf", owner=child)
    done = running(scheduler, "leaf", owner=root)
    scheduler.finish(done, "completed")
    scheduler.abort(root)
    assert scheduler.task(child).abort_requested
    assert scheduler.task(grandchild).abort_requested
    assert not scheduler.task(done).abort_requested
    cascade = [e for e in scheduler.history(grandchild) if type(e).__name__ == "AbortMarked"]
    assert cascade and cascade[0].rule == 6 and cascade[0].by == root


def test_rule_06_held_failure_cascades_and_new_work_is_marked(scheduler: Scheduler) -> None:
    owner = running(scheduler)
    child = scheduler.submit("job", owner=owner)
    scheduler.finish(owner, "failed", error="boom")
    assert scheduler.task(owner).status == "completing"
    assert scheduler.task(child).abort_requested
    # A descendant waits for its cascade mark instead of running a phase.
    assert scheduler.reserve(child) == "abort"


def test_rule_06_held_completion_does_not_cascade(scheduler: Scheduler) -> None:
    owner = running(scheduler)
    child = scheduler.submit("job", owner=owner)
    scheduler.finish(owner, "completed")
    assert not scheduler.task(child).abort_requested
    assert scheduler.reserve(child) == "run"


def test_rule_06_recovery_marks_a_restart_marked_owner_below_another(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Found by the long profile's kills (test_many_kills_lose_nothing_acknowledged):
    at open, abandon_on_restart marks two owners, one below the other, with restart
    marks (no request mark); the cascades then ran in id order, the lower one's first,
    and the upper one's passed over the lower owner as walked already, leaving a live
    descendant of a cancelling owner without its rule 6 mark."""
    scheduler = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    upper = scheduler.submit("job", id="z-upper", abandon_on_restart=True)
    lower = scheduler.submit("job", id="a-lower", owner=upper, abandon_on_restart=True)
    below = scheduler.submit("leaf", id="m-below", owner=lower)
    scheduler.close()
    scheduler = Scheduler.open(sqlite_url, clock=clock, worker="w", registry=registry)
    assert scheduler.task(upper).abort_reason == "restart"
    assert scheduler.task(lower).request_marked  # rule 6, by its cancelling owner
    assert scheduler.task(below).request_marked
    scheduler.close()


def test_rule_06_submit_below_cancelling_owner_is_marked(scheduler: Scheduler) -> None:
    owner = scheduler.submit("job")
    scheduler.abort(owner)
    child = scheduler.submit("leaf", owner=owner)
    assert scheduler.task(child).abort_requested


# 7 ──────────────────────────────────────────────────────────────────────────


def test_rule_07_wait_names_existing_tasks(scheduler: Scheduler) -> None:
    waiter = running(scheduler)
    refused(scheduler, 7, scheduler.wait, waiter, ["no-such-task"])
    refused(scheduler, 7, scheduler.wait, waiter, [])


def test_rule_07_fail_fast_names_only_owned_tasks(scheduler: Scheduler) -> None:
    waiter = running(scheduler)
    stranger = scheduler.submit("leaf")
    refused(scheduler, 7, scheduler.wait, waiter, [stranger], "failFast")
    own = scheduler.submit("leaf", owner=waiter)
    scheduler.wait(waiter, [own], "failFast")
    assert scheduler.task(waiter).status == "waiting"


def test_rule_07_wait_cycle_refused(scheduler: Scheduler) -> None:
    a, b, c = (running(scheduler) for _ in range(3))
    scheduler.wait(a, [b])
    scheduler.wait(b, [c])
    error = refused(scheduler, 7, scheduler.wait, c, [a])
    assert "cycle" in str(error)
    refused(scheduler, 7, scheduler.wait, c, [c])


def test_rule_07_fail_fast_wakes_on_first_failure_all_waits_for_all(
    scheduler: Scheduler,
) -> None:
    fast = running(scheduler)
    patient = running(scheduler)
    f1, f2 = scheduler.submit("leaf", owner=fast), scheduler.submit("leaf", owner=fast)
    scheduler.wait(fast, [f1, f2], "failFast", phase="end")
    scheduler.wait(patient, [f1, f2], "all", phase="end")
    refused(scheduler, 7, scheduler.reserve, fast)
    scheduler.reserve(f1)
    scheduler.finish(f1, "failed")
    assert scheduler.reserve(fast) == "run"
    refused(scheduler, 7, scheduler.reserve, patient)
    scheduler.reserve(f2)
    scheduler.finish(f2, "completed")
    assert scheduler.reserve(patient) == "run"


def test_rule_07_fail_fast_wakes_on_a_held_failure(scheduler: Scheduler) -> None:
    waiter = running(scheduler)
    child = running(scheduler, owner=waiter)
    scheduler.submit("leaf", owner=child)
    scheduler.wait(waiter, [child], "failFast")
    scheduler.finish(child, "failed")
    assert scheduler.task(child).status == "completing"
    assert scheduler.reserve(waiter) == "run"


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


# 14 ─────────────────────────────────────────────────────────────────────────


def test_rule_14_memos_disappear_when_outcome_is_decided(scheduler: Scheduler) -> None:
    task_id = running(scheduler)
    scheduler.memo(task_id, "draft", {"words": 120})
    assert scheduler.memo(task_id, "draft") == {"words": 120}
    scheduler.finish(task_id, "completed")
    assert scheduler.task(task_id).memos == {}

    holder = running(scheduler)
    scheduler.memo(holder, "k", 1)
    scheduler.submit("leaf", owner=holder)
    scheduler.finish(holder, "completed")
    assert scheduler.task(holder).status == "completing"
    assert scheduler.task(holder).memos == {}


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
