"""Round seven of the yui runtime-cleanup audit (seeds 000 and 001, SPEC.md section 2): a
Worker settles a runtime-cleanup obligation by itself. yui queues a cleanup when a role is
stopped (001, ``stopTaskRoleSessions``) or its task completed (000,
``queueSelectedCompletedTaskRuntimeCleanups``), signals the role so a pass does it at once
(000, ``processSelectedRoleRuntimeCleanups``), and puts a cleanup that did not get done on
the delivery retry timer (000, ``#scheduleRuntimeCleanupRetries``; 001,
``#terminalizePreparedAfterRetryExhaustion`` skips the ``runtime-cleanup:`` identity, so
it is never given up). The rules are written down in docs/seed-fidelity.md ("Round seven
(runtime cleanups)")."""

from __future__ import annotations

import logging

import pytest
from helpers.probes import of_type

from tasktrail.domain import ManualClock, Registry, Scheduler
from tasktrail.domain.app.worker import Worker
from tasktrail.domain.turns.events import (
    RuntimeCleanupClaimed,
    RuntimeCleanupFailed,
    RuntimeCleanupRequired,
    RuntimeCleanupSettled,
)
from tasktrail.domain.turns.pass_events import PassStarted
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.state import LEADER

BACKOFF = (250, 500, 1000, 2000, 2000, 2000)
"""yui's delivery retry delays at the default base (``min(2000, 250 * 2**min(n, 3))``)."""


class Cleanups(Runtime):
    """Answers every cleanup with ``answer`` (raises it if it is an exception), noting
    when (scheduler clock) each was asked."""

    def __init__(self, clock: ManualClock, answer: bool | Exception = True) -> None:
        self.clock = clock
        self.answer = answer
        self.asked: list[tuple[float, str, str]] = []

    def cleanup(self, task_id: str, role: str) -> bool:
        self.asked.append((self.clock.now, task_id, role))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def stopped_role(scheduler: Scheduler, task: str, role: str) -> None:
    """Run one Turn of ``role`` to its end, then stop the role (an open obligation)."""
    turn = scheduler.start_turn(task, role)
    scheduler.complete_turn(task, role, turn)
    assert scheduler.stop_roles(task, [role]) == [role]


def asked_at(runtime: Cleanups, role: str) -> list[float]:
    return [at for at, _, asked in runtime.asked if asked == role]


def test_yui_idle_worker_settles_a_stopped_roles_cleanup_with_no_other_work(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """Seed 001 ``stopTaskRoleSessions`` queues the cleanup; seed 000
    ``processSelectedRoleRuntimeCleanups`` runs it in the pass the role's signal starts."""
    task = scheduler.submit("crew", id="t1", phase="lead")  # no definition: no phases run
    stopped_role(scheduler, task, "worker")
    assert scheduler.next_turn_deadline() is None  # no Turn work makes a pass due
    runtime = Cleanups(clock)
    worker = Worker(scheduler, runtime=runtime)
    due = worker.next_deadline()
    assert due is not None and due <= clock.now  # the idle Worker wakes at once for it
    report = worker.tick()
    assert runtime.asked == [(clock.now, task, "worker")]
    assert report.cleanups == {task: {"worker": "settled"}}
    (settled,) = of_type(scheduler, RuntimeCleanupSettled)
    assert settled.role == "worker" and settled.pass_id is None
    obligations = scheduler.cleanup_obligations(task)
    assert obligations is not None and obligations.open_roles() == []
    assert of_type(scheduler, PassStarted) == []  # a cleanup alone runs no recorded pass
    assert scheduler.next_cleanup_attempt() is None
    worker.tick()
    assert len(runtime.asked) == 1


def test_yui_idle_worker_cleans_up_a_completed_tasks_roles(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """Seed 000 ``queueSelectedCompletedTaskRuntimeCleanups``: a completed task's roles
    owe their runtime a cleanup, queued and done without waiting for other work."""
    task = scheduler.submit("leaf", id="t1")
    turn = scheduler.start_turn(task, LEADER)
    scheduler.complete_turn(task, LEADER, turn)
    runtime = Cleanups(clock)
    worker = Worker(scheduler, runtime=runtime)
    report = worker.tick()  # its phase finishes it completed, then its Leader is cleaned up
    assert report.ended == [task]
    assert runtime.asked == [(clock.now, task, LEADER)]
    (required,) = of_type(scheduler, RuntimeCleanupRequired)
    assert (required.role, required.cause) == (LEADER, "cleanup.completed_task")
    assert [e.role for e in of_type(scheduler, RuntimeCleanupSettled)] == [LEADER]
    assert scheduler.next_cleanup_attempt() is None


def test_yui_cleanup_not_done_is_asked_again_after_the_backoff_not_every_tick(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """Seed 000 ``#scheduleRuntimeCleanupRetries``: a cleanup left undone waits on the
    delivery retry timer (``min(2000, base * 2**min(attempt, 3))``), not a poll."""
    task = scheduler.submit("crew", id="t1", phase="lead")
    stopped_role(scheduler, task, "worker")
    runtime = Cleanups(clock, answer=False)
    worker = Worker(scheduler, runtime=runtime)
    start = clock.now
    worker.tick()
    expected = [start]
    for delay in BACKOFF:
        due = expected[-1] + delay
        assert worker.next_deadline() == due
        clock.set(due - 1)
        worker.tick()
        worker.tick()
        assert asked_at(runtime, "worker") == expected  # not before its time
        clock.set(due)
        worker.tick()
        expected.append(due)
        assert asked_at(runtime, "worker") == expected
    # A pass run for another reason tries it too, and that attempt counts for the wait.
    clock.advance(700)
    scheduler.controller_pass(runtime=runtime)
    assert asked_at(runtime, "worker")[-1] == clock.now
    assert scheduler.next_cleanup_attempt() == clock.now + 2000


def test_yui_cleanup_attempt_that_is_not_done_appends_nothing(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """Seed 000: a cleanup outcome that is neither done nor failed only re-arms the
    in-memory retry timer; tasktrail records no event for it. (Round nine: the first
    attempt claims the obligation for this worker, an intent recorded once; the
    attempts after it, under the same claim, append nothing.)"""
    task = scheduler.submit("crew", id="t1", phase="lead")
    stopped_role(scheduler, task, "worker")
    worker = Worker(scheduler, runtime=Cleanups(clock, answer=False))
    assert worker.tick().cleanups == {task: {"worker": "open"}}
    (claimed,) = of_type(scheduler, RuntimeCleanupClaimed)
    assert claimed.worker == scheduler.worker
    head = scheduler.store.head()
    for _ in range(7):
        clock.advance(2_000)
        report = worker.tick()
        assert report.cleanups in ({}, {task: {"worker": "open"}})
    assert scheduler.store.head() == head
    assert scheduler.cleanup_attempts.tries(task, "worker", 1) == 8


def test_yui_failed_cleanup_is_retried_on_the_backoff_and_never_given_up(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """Seed 001 ``#terminalizePreparedAfterRetryExhaustion``: a ``runtime-cleanup:``
    retry is never terminalized at the delivery retry limit; each failure is recorded
    after the call (effect, then event)."""
    scheduler.configure_turns(delivery_retry_limit=2)
    task = scheduler.submit("crew", id="t1", phase="lead")
    stopped_role(scheduler, task, "worker")
    runtime = Cleanups(clock, answer=OSError("the worker session would not stop"))
    worker = Worker(scheduler, runtime=runtime)
    start = clock.now
    worker.tick()
    expected = [start]
    for delay in BACKOFF:  # three times past the retry limit of 2
        clock.set(expected[-1] + delay - 1)
        worker.tick()
        assert asked_at(runtime, "worker") == expected
        clock.set(expected[-1] + delay)
        report = worker.tick()
        expected.append(clock.now)
        assert report.cleanups == {task: {"worker": "failed"}}
    assert asked_at(runtime, "worker") == expected
    failed = of_type(scheduler, RuntimeCleanupFailed)
    assert [e.at for e in failed] == expected
    assert all("would not stop" in e.error for e in failed)
    obligations = scheduler.cleanup_obligations(task)
    assert obligations is not None and obligations.obligations["worker"].failures == 7
    assert obligations.open_roles() == ["worker"]
    runtime.answer = True
    clock.advance(2_000)
    worker.tick()
    assert [e.role for e in of_type(scheduler, RuntimeCleanupSettled)] == ["worker"]


def test_yui_two_obligations_keep_separate_backoffs(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """Seed 000/001: the delivery retry timers are keyed by role
    (``role:<task>/<role>``), each with its own attempt count."""
    first = scheduler.submit("crew", id="t1", phase="lead")
    second = scheduler.submit("crew", id="t2", phase="lead")
    stopped_role(scheduler, first, "worker")
    runtime = Cleanups(clock, answer=False)
    worker = Worker(scheduler, runtime=runtime)
    start = clock.now
    worker.tick()
    clock.set(start + 250)
    worker.tick()  # the first obligation's second attempt: next due at +750
    clock.set(start + 300)
    stopped_role(scheduler, second, "reviewer")
    stopped_role(scheduler, first, "reviewer")
    assert worker.next_deadline() == clock.now  # the new ones are due at once
    worker.tick()
    assert runtime.asked[2:] == [
        (start + 300, first, "reviewer"),
        (start + 300, second, "reviewer"),
    ]
    # Each waits its own backoff: the reviewers 250 ms after their first attempt, the
    # first worker 500 ms after its second.
    assert worker.next_deadline() == start + 550
    clock.set(start + 550)
    worker.tick()
    assert [role for at, _, role in runtime.asked if at == start + 550] == ["reviewer"] * 2
    clock.set(start + 750)
    worker.tick()
    assert [(task, role) for at, task, role in runtime.asked if at == start + 750] == [
        (first, "worker")
    ]


def test_yui_a_new_obligation_of_the_role_starts_its_backoff_afresh(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """Seed 000/001: a retry whose identity changed starts its attempts again; a role's
    next obligation is another identity, even at the same clock reading."""
    task = scheduler.submit("crew", id="t1", phase="lead")
    stopped_role(scheduler, task, "worker")
    runtime = Cleanups(clock, answer=False)
    worker = Worker(scheduler, runtime=runtime)
    for _ in range(3):
        worker.tick()
        clock.advance(1_000)
    assert scheduler.cleanup_attempts.tries(task, "worker", 1) == 3
    scheduler.settle_cleanup(task, "worker")  # settled by the host, not by this Worker
    stopped_role(scheduler, task, "worker")  # a new Turn, stopped again: a new obligation
    assert worker.next_deadline() == clock.now
    worker.tick()
    assert asked_at(runtime, "worker")[-1] == clock.now
    assert scheduler.cleanup_attempts.tries(task, "worker", 2) == 1
    assert worker.next_deadline() == clock.now + 250


def test_yui_a_restarted_worker_tries_open_obligations_at_once(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Seed 000/001: the retry timers and their attempt counts are the controller's
    memory; a controller that starts again does the queued cleanups at once."""
    first = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task = first.submit("crew", id="t1", phase="lead")
    stopped_role(first, task, "worker")
    runtime = Cleanups(clock, answer=False)
    worker = Worker(first, runtime=runtime)
    for _ in range(4):
        worker.tick()
        clock.advance(300)
    next_due = worker.next_deadline()
    assert next_due is not None and next_due > clock.now  # backing off
    first.close()
    second = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    try:
        restarted = Worker(second, runtime=runtime)
        assert restarted.next_deadline() == clock.now
        restarted.tick()
        assert asked_at(runtime, "worker")[-1] == clock.now
    finally:
        second.close()


def test_yui_a_fenced_tasks_cleanup_waits_for_the_fence_with_the_backoff(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """Seed 000 ``maintenanceFence`` / ``onMaintenanceFenceDefer``: tasktrail defers a
    fenced task's whole per-task pass (round four), so its cleanup waits too, heard as a
    deferral, and is tried again on the backoff, not at every poll."""
    task = scheduler.submit("crew", id="t1", phase="lead", project_ids=["p1"])
    stopped_role(scheduler, task, "worker")
    runtime = Cleanups(clock)
    deferred: list[tuple[str, tuple[str, ...]]] = []
    fence = {"p1"}
    worker = Worker(
        scheduler,
        runtime=runtime,
        maintenance=lambda p: p in fence,
        on_deferred=lambda t, p: deferred.append((t, p)),
    )
    worker.tick()
    assert runtime.asked == [] and deferred == [(task, ("p1",))]
    assert worker.next_deadline() == clock.now + 250
    fence.clear()
    clock.advance(250)
    worker.tick()
    assert runtime.asked == [(clock.now, task, "worker")]


def test_yui_a_fence_that_raises_fails_that_tasks_cleanups_alone_and_backs_off(
    scheduler: Scheduler, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Seed 000 asks its maintenance fence within the task's own work, so a fence that
    throws fails that task alone: the Worker's cleanups outside a pass do the same (the
    error reported, the attempt backed off), and the other task's cleanup is done."""
    fenced = scheduler.submit("crew", id="t1", phase="lead", project_ids=["broken"])
    other = scheduler.submit("crew", id="t2", phase="lead", project_ids=["fine"])
    stopped_role(scheduler, fenced, "worker")
    stopped_role(scheduler, other, "worker")
    runtime = Cleanups(clock)

    def fence(project: str) -> bool:
        if project == "broken":
            raise RuntimeError("fence store away")
        return False

    worker = Worker(scheduler, runtime=runtime, maintenance=fence)
    with caplog.at_level(logging.WARNING, logger="tasktrail.worker"):
        worker.tick()  # does not raise
    assert runtime.asked == [(clock.now, other, "worker")]
    assert "runtime cleanup of t1 failed: RuntimeError: fence store away" in caplog.text
    assert worker.next_deadline() == clock.now + 250  # backed off, not every poll


def test_yui_a_cleanup_another_worker_settled_is_not_asked_again(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    """Seed 000 ``processSelectedRoleRuntimeCleanups``: each role's cleanup reads the
    role's mailbox from the store when it is attempted (``store.getWorkMailbox``), so a
    cleanup settled meanwhile is no longer there to do. Two workers on one store: the
    one that did not settle it asks its runtime nothing and reports no error."""
    first = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="a")
    second = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="b")
    task = first.submit("crew", id="t1", phase="lead")
    stopped_role(first, task, "worker")
    seen = second.cleanup_obligations(task)  # the second worker folds the open obligation
    assert seen is not None and seen.open_roles() == ["worker"]
    first.settle_cleanup(task, "worker")
    runtime = Cleanups(clock)
    report = second.run_cleanups(runtime=runtime)
    assert runtime.asked == []
    assert report.errors == {} and report.cleanups == {}
    assert second.next_cleanup_attempt() is None
    second.close()
    first.close()


def test_a_runtime_without_a_cleanup_of_its_own_is_not_asked_outside_a_pass(
    scheduler: Scheduler, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Runtime.cleanup`` itself answers "not done" for good: a host whose runtime does
    not implement it has nothing a Worker could settle, so its open obligations make no
    deadline and are not asked every backoff (a call per obligation every 2 s, growing
    with every completed task); a pass still asks those in its scope, as before."""
    asked: list[tuple[str, str]] = []

    def default_cleanup(self: Runtime, task_id: str, role: str) -> bool:
        asked.append((task_id, role))
        return False

    monkeypatch.setattr(Runtime, "cleanup", default_cleanup)
    task = scheduler.submit("crew", id="t1", phase="lead")
    stopped_role(scheduler, task, "worker")

    class Delivers(Runtime):  # delivery only: cleanup is Runtime's own
        pass

    worker = Worker(scheduler, runtime=Delivers())
    worker.tick()
    clock.advance(10_000)
    worker.tick()
    assert asked == []
    assert worker.next_deadline() == scheduler.next_heartbeat()
