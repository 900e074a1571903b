"""yui's controller passes, seventh round (seed 000, yui 0.6.4 -> 0.6.6,
``FileTaskController``): per-task work under the concurrency bound
(``#runDirtySchedulerPass``, ``partitionDirtyScope``, ``taskConcurrency``), task-pass
retries with capped exponential backoff (``#scheduleTaskPassRetry``,
``#clearTaskPassRetry``), blocked tasks (``runtimeTaskFailureIds``, ``blockedTaskIds``)
and maintenance fences (``prepareActiveWorkspaces``). Each test names the seed
behaviour and fails when it breaks; docs/seed-fidelity.md, "Round seven (yui passes:
concurrency, backoff, blocked tasks)", says what changed."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from helpers.probes import of_type

from tasktrail.domain import InvalidArgument, ManualClock, Scheduler, Worker
from tasktrail.domain.turns.keys import role_key, task_key
from tasktrail.domain.turns.pass_events import (
    PassFinished,
    PassStarted,
    PassTaskBlocked,
    PassTaskFailed,
    TaskPassRetryAbandoned,
    TaskPassRetryCleared,
    TaskPassRetryScheduled,
)
from tasktrail.domain.turns.runtime import Runtime

WAIT = 10  # seconds a test thread waits for another (never reached when green)


def with_turns(scheduler: Scheduler, *ids: str, roles: tuple[str, ...] = ("worker",)) -> None:
    """Tasks with an undelivered Turn per role (due for delivery now)."""
    for task_id in ids:
        scheduler.submit("job", id=task_id)
        for role in roles:
            scheduler.start_turn(task_id, role)


class Scripted(Runtime):
    """A runtime whose drain notes each visit and runs ``on_drain(task_id, visit)``
    first; the runtime events of ``unreadable`` tasks cannot be applied, and delivering
    a Turn of a ``(task, role)`` in ``refusing`` raises."""

    def __init__(self, on_drain: Any = None) -> None:
        self.on_drain = on_drain
        self.unreadable: set[str] = set()
        self.refusing: set[tuple[str, str]] = set()
        self.drained: list[str] = []
        self.delivered: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def drain(self, scheduler: Any, task_id: str) -> None:
        with self._lock:
            self.drained.append(task_id)
            visit = self.drained.count(task_id)
        if self.on_drain is not None:
            self.on_drain(task_id, visit)
        if task_id in self.unreadable:
            raise ConnectionError(f"runtime events of {task_id} unreadable")

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if (task_id, role) in self.refusing:
            raise RuntimeError(f"{role} of {task_id}: socket closed")
        with self._lock:
            self.delivered.append((task_id, role))
        return "delivered"


def fire(scheduler: Scheduler, clock: ManualClock, task_id: str, runtime: Runtime) -> Any:
    """Let the task's armed retry come due and run the operator lane that fires it."""
    retry = scheduler.task_pass_retry(task_id)
    assert retry is not None
    clock.set(retry.retry_at)
    report = scheduler.controller_pass(["operator"], runtime=runtime)
    assert report.retried == [task_id]
    return report


# ─── per-task work under the concurrency bound ────────────────────────────────────


class Holding(Scripted):
    """Holds each per-task pass in its drain until the test releases that task."""

    def __init__(self) -> None:
        super().__init__(on_drain=self._hold)
        self.entered = {t: threading.Event() for t in ("t1", "t2", "t3")}
        self.release = {t: threading.Event() for t in ("t1", "t2", "t3")}
        self.left = {t: threading.Event() for t in ("t1", "t2", "t3")}

    def _hold(self, task_id: str, visit: int) -> None:
        self.entered[task_id].set()
        assert self.release[task_id].wait(WAIT)
        self.left[task_id].set()


def test_yui_pass_starts_its_tasks_in_scope_order_and_the_next_waits_for_a_free_slot(
    scheduler: Scheduler,
) -> None:
    # yui (``#runDirtySchedulerPass``): ``min(taskConcurrency, tasks)`` consumers take
    # the task scopes from the keyed work queue in the order they were signalled (scope
    # order); a task past the bound starts once a consumer is free, beside the others.
    with_turns(scheduler, "t1", "t2", "t3")
    runtime = Holding()
    reports: list[Any] = []
    keys = [task_key("t2"), task_key("t3"), task_key("t1")]
    thread = threading.Thread(
        target=lambda: reports.append(
            scheduler.controller_pass(keys, runtime=runtime, concurrency=2)
        )
    )
    thread.start()
    try:
        assert runtime.entered["t2"].wait(WAIT) and runtime.entered["t3"].wait(WAIT)
        assert not runtime.entered["t1"].wait(0.2)  # the bound: no third one at once
        runtime.release["t2"].set()
        assert runtime.entered["t1"].wait(WAIT)  # a slot came free: it starts beside t3
        assert not runtime.left["t3"].is_set()
    finally:
        for event in runtime.release.values():
            event.set()
        thread.join(WAIT)
    assert not thread.is_alive()
    assert runtime.drained == ["t2", "t3", "t1"] and reports[0].done == ["t2", "t3", "t1"]


class Meeting(Scripted):
    """Counts the per-task passes inside their drain at once; each waits at a barrier of
    ``parties``, so a pass gets through only with that many inside together."""

    def __init__(self, parties: int) -> None:
        super().__init__(on_drain=self._meet)
        self.barrier = threading.Barrier(parties, timeout=WAIT)
        self.inside = 0
        self.most_inside = 0

    def _meet(self, task_id: str, visit: int) -> None:
        with self._lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        try:
            self.barrier.wait()
        finally:
            with self._lock:
                self.inside -= 1


def test_yui_task_concurrency_setting_bounds_each_pass_and_is_refused_above_thirty_two(
    scheduler: Scheduler,
) -> None:
    # yui: ``taskConcurrency`` is a controller option, a positive integer (default 4)
    # of at most 32 (``boundedPositiveInteger``: a larger one is refused, not clamped);
    # every dirty pass runs that many task scopes at once.
    with_turns(scheduler, "t1", "t2", "t3", "t4")
    head = scheduler.store.head()
    for bad in (33, 0, 1.5):
        with pytest.raises(InvalidArgument, match="task_concurrency"):
            scheduler.configure_turns(task_concurrency=bad)
    assert scheduler.store.head() == head and scheduler.turn_settings.task_concurrency == 4
    scheduler.configure_turns(task_concurrency=2)
    meeting = Meeting(parties=2)
    report = scheduler.controller_pass(runtime=meeting)
    assert report.done == ["t1", "t2", "t3", "t4"] and meeting.most_inside == 2
    assert of_type(scheduler, PassStarted)[-1].concurrency == 2
    scheduler.configure_turns(task_concurrency=32)
    wide = Meeting(parties=4)
    assert scheduler.controller_pass(runtime=wide).done == ["t1", "t2", "t3", "t4"]
    assert wide.most_inside == 4 and of_type(scheduler, PassStarted)[-1].concurrency == 32


def test_yui_role_keys_of_one_task_are_one_per_task_pass_retried_together(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui (``partitionDirtyScope``): the role keys of a task make one task scope (one
    # serialized per-task pass, in the place of the task's first key), and a failure of
    # it arms one retry whose identity is every one of its keys, sorted.
    with_turns(scheduler, "t1", "t2", roles=("worker", "helper"))
    runtime = Scripted()
    runtime.refusing.add(("t1", "helper"))
    keys = [role_key("t1", "worker"), role_key("t2", "worker"), role_key("t1", "helper")]
    report = scheduler.controller_pass(keys, runtime=runtime)
    assert runtime.drained == ["t1", "t2"] and report.tasks == ["t1", "t2"]
    assert (report.failed, report.done) == (["t1"], ["t2"])
    retry = scheduler.task_pass_retry("t1")
    assert retry is not None and retry.keys == (role_key("t1", "helper"), role_key("t1", "worker"))
    assert (retry.attempt, retry.retry_at) == (0, clock.now + 250)


# ─── task-pass retries: the exact backoff, and when its count starts again ────────


def test_yui_task_pass_retry_delays_double_from_the_base_and_stop_at_two_seconds(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui (``#scheduleTaskPassRetry``): the n-th retry of a failure waits
    # ``min(2000, base * 2 ** min(n, 3))`` ms, no jitter, up to the retry limit; the
    # failure after the last retry arms none.
    scheduler.configure_turns(task_pass_retry_base_ms=300, task_pass_retry_limit=6)
    with_turns(scheduler, "t1")
    runtime = Scripted()
    runtime.refusing.add(("t1", "worker"))
    scheduler.controller_pass([task_key("t1")], runtime=runtime)
    for _ in range(6):
        fire(scheduler, clock, "t1", runtime)
    scheduled = of_type(scheduler, TaskPassRetryScheduled)
    assert [(r.attempt, r.retry_at - r.at) for r in scheduled] == [
        (0, 300),
        (1, 600),
        (2, 1200),
        (3, 2000),  # 300 * 2**3 = 2400: capped
        (4, 2000),
        (5, 2000),
    ]
    (abandoned,) = of_type(scheduler, TaskPassRetryAbandoned)
    assert abandoned.attempts == 6 and scheduler.task_pass_retry("t1") is None
    assert len(of_type(scheduler, PassTaskFailed)) == 7


def test_yui_failure_of_other_keys_replaces_the_armed_retry_at_attempt_zero(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui: a retry's identity is its sorted keys; a failure of another identity clears
    # the task's retry (its armed timer and its count) and arms a new one from attempt
    # 0, even while the old one has not fired.
    with_turns(scheduler, "t1")
    runtime = Scripted()
    runtime.refusing.add(("t1", "worker"))
    scheduler.controller_pass([role_key("t1", "worker")], runtime=runtime)
    fire(scheduler, clock, "t1", runtime)
    armed = scheduler.task_pass_retry("t1")
    assert armed is not None and (armed.attempt, armed.retry_at) == (1, clock.now + 500)
    clock.advance(100)
    report = scheduler.controller_pass([task_key("t1")], runtime=runtime)
    assert report.retries == {"t1": clock.now + 250}
    replaced = scheduler.task_pass_retry("t1")
    assert replaced is not None
    assert (replaced.keys, replaced.attempt) == ((task_key("t1"),), 0)


def test_yui_success_of_any_keys_clears_the_retry_and_its_count(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui (``#runDirtySchedulerPass``): a per-task pass of the task that succeeds clears
    # its retry and attempts (``#clearTaskPassRetry(taskId)``), whatever keys it ran
    # for; the next failure starts from attempt 0.
    with_turns(scheduler, "t1", roles=("worker", "helper"))
    runtime = Scripted()
    runtime.refusing.add(("t1", "worker"))
    scheduler.controller_pass([role_key("t1", "worker")], runtime=runtime)
    fire(scheduler, clock, "t1", runtime)
    assert scheduler.task_pass_retry("t1") is not None
    helper = scheduler.controller_pass([role_key("t1", "helper")], runtime=runtime)
    assert helper.done == ["t1"] and scheduler.task_pass_retry("t1") is None
    assert of_type(scheduler, TaskPassRetryCleared)[-1].why == "succeeded"
    again = scheduler.controller_pass([role_key("t1", "worker")], runtime=runtime)
    assert again.retries == {"t1": clock.now + 250}
    assert [r.attempt for r in of_type(scheduler, TaskPassRetryScheduled)] == [0, 1, 0]


def test_yui_failure_in_a_full_pass_while_another_full_pass_is_requested_arms_no_retry(
    scheduler: Scheduler,
) -> None:
    # yui (``#scheduleTaskPassRetry`` returns while ``#pendingFull``, whatever pass
    # failed): a task blocked in a full pass during which another full pass was
    # requested gets no retry; that full pass does its work, and arms its retry from
    # attempt 0 if it is blocked again.
    with_turns(scheduler, "t1", "t2")

    def ask_again(task_id: str, visit: int) -> None:
        if (task_id, visit) == ("t1", 1):
            scheduler.request_pass("full")

    runtime = Scripted(on_drain=ask_again)
    runtime.unreadable.add("t1")
    scheduler.request_pass("full")
    first, second = scheduler.pump(runtime=runtime)
    assert (first.blocked, first.done, first.retries) == (["t1"], ["t2"], {"t1": None})
    assert (second.blocked, second.retried) == (["t1"], [])
    assert [r.attempt for r in of_type(scheduler, TaskPassRetryScheduled)] == [0]
    assert len(of_type(scheduler, PassTaskBlocked)) == 2


# ─── blocked tasks ─────────────────────────────────────────────────────────────────


def test_yui_blocked_task_is_blocked_for_that_pass_only(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui (``#runCoalesced``): ``runtimeFailedTaskIds`` is gathered afresh for each
    # pass; a task blocked in one pass is worked by the next pass that covers it once
    # its events apply, before its retry fired, and that success clears the retry. A
    # pass that does not cover it leaves its retry alone.
    with_turns(scheduler, "t1", "t2")
    runtime = Scripted()
    runtime.unreadable.add("t1")
    blocked = scheduler.controller_pass([task_key("t1"), task_key("t2")], runtime=runtime)
    assert (blocked.blocked, blocked.done) == (["t1"], ["t2"])
    armed = scheduler.task_pass_retry("t1")
    assert armed is not None
    runtime.unreadable.clear()
    clock.advance(100)
    scheduler.controller_pass([task_key("t2")], runtime=runtime)
    assert scheduler.task_pass_retry("t1") == armed
    worked = scheduler.controller_pass([task_key("t1")], runtime=runtime)
    assert worked.done == ["t1"] and ("t1", "worker") in runtime.delivered
    assert scheduler.task_pass_retry("t1") is None
    assert clock.now < armed.retry_at


def test_yui_task_blocked_in_every_pass_is_retried_with_the_backoff_then_given_up(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui: each pass a task's events fail in blocks it again and reports it; its retry
    # (task key) is one identity, so a block while it is armed uses no attempt, each
    # retry that fired and was blocked again is the next attempt (250, 500 ms), and the
    # limit ends it. The other task is worked in every pass.
    with_turns(scheduler, "t1", "t2")
    runtime = Scripted()
    runtime.unreadable.add("t1")
    both = [task_key("t1"), task_key("t2"), "operator"]
    first = scheduler.controller_pass(both, runtime=runtime)
    assert first.retries == {"t1": clock.now + 250}
    clock.advance(100)
    armed = scheduler.controller_pass(both, runtime=runtime)
    assert (armed.blocked, armed.done, armed.retries) == (["t1"], ["t2"], {"t1": clock.now + 150})
    clock.advance(150)
    assert scheduler.controller_pass(both, runtime=runtime).retries == {"t1": clock.now + 500}
    clock.advance(500)
    last = scheduler.controller_pass(both, runtime=runtime)
    assert (last.blocked, last.done, last.retries) == (["t1"], ["t2"], {"t1": None})
    assert [r.attempt for r in of_type(scheduler, TaskPassRetryScheduled)] == [0, 1]
    assert [f.blocked for f in of_type(scheduler, PassFinished)] == [("t1",)] * 4


def test_yui_blocked_task_retry_fired_and_failing_is_the_same_retry(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui: the blocked task's retry has its task key as identity, so when the retry
    # fires, its events apply and the task's per-task pass then fails, that failure is
    # the retry's next attempt (500 ms), not a new failure.
    with_turns(scheduler, "t1")
    runtime = Scripted()
    runtime.unreadable.add("t1")
    scheduler.controller_pass([role_key("t1", "worker")], runtime=runtime)
    runtime.unreadable.clear()
    runtime.refusing.add(("t1", "worker"))
    fired = fire(scheduler, clock, "t1", runtime)
    assert fired.failed == ["t1"] and fired.retries == {"t1": clock.now + 500}
    retry = scheduler.task_pass_retry("t1")
    assert retry is not None and (retry.keys, retry.attempt) == ((task_key("t1"),), 1)


# ─── maintenance fences ────────────────────────────────────────────────────────────


def test_yui_maintenance_fence_that_raises_fails_only_its_task(
    scheduler: Scheduler, clock: ManualClock, caplog: Any
) -> None:
    # yui (``prepareActiveWorkspaces`` inside the per-task pass of
    # ``#runDirtySchedulerPass``): the fence is asked within a task's own pass, so a
    # ``maintenanceFence`` that throws for a task's project fails that task's pass
    # (``onError``, a task-pass retry of its keys) while the other tasks go on.
    for task_id, project in (("t1", "billing"), ("t2", "search"), ("t3", "ops")):
        scheduler.submit("crew", id=task_id, phase="lead", project_ids=(project,))
        scheduler.start_turn(task_id, "worker")

    def fence(project: str) -> bool:
        if project == "search":
            raise OSError("maintenance lock of search unreadable")
        return False

    runtime = Scripted()
    keys = [task_key("t1"), task_key("t2"), task_key("t3")]
    report = scheduler.controller_pass(keys, runtime=runtime, maintenance=fence)
    assert (report.done, report.failed) == (["t1", "t3"], ["t2"])
    assert "maintenance lock of search unreadable" in report.errors["t2"]
    assert runtime.delivered == [("t1", "worker"), ("t3", "worker")]
    assert report.retries == {"t2": clock.now + 250}
    (finished,) = of_type(scheduler, PassFinished)
    assert (finished.done, finished.failed) == (("t1", "t3"), ("t2",))
    # A Worker hears of it like any failed task, and its tick goes on.
    heard: list[tuple[str, str]] = []
    worker = Worker(
        scheduler,
        runtime=runtime,
        maintenance=fence,
        on_pass_error=lambda t, e: heard.append((t, e)),
    )
    clock.advance(250)
    with caplog.at_level(logging.WARNING, logger="tasktrail.worker"):
        worker.tick()
    assert heard == [("t2", "OSError: maintenance lock of search unreadable")]
    assert [r.getMessage() for r in caplog.records] == [
        "controller pass failed t2: OSError: maintenance lock of search unreadable"
    ]


def test_yui_fence_is_asked_about_every_project_at_every_pass_and_each_deferral_reported(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui (``prepareActiveWorkspaces``): at each pass the fence is asked about each of a
    # task's projects (every one: the deferral names all that are fenced), a task with
    # no project is never deferred, and ``onMaintenanceFenceDefer`` hears of every
    # deferral, pass after pass, until the fence is down; deferred is never failed.
    scheduler.submit("crew", id="t1", phase="lead", project_ids=("billing", "search"))
    scheduler.submit("crew", id="t2", phase="lead")
    for task_id in ("t1", "t2"):
        scheduler.start_turn(task_id, "worker")
    asked: list[str] = []
    fenced = {"billing", "search"}

    def fence(project: str) -> bool:
        asked.append(project)
        return project in fenced

    heard: list[tuple[str, tuple[str, ...]]] = []
    runtime = Scripted()
    worker = Worker(
        scheduler,
        runtime=runtime,
        maintenance=fence,
        on_deferred=lambda task_id, projects: heard.append((task_id, projects)),
    )
    worker.tick()
    assert asked == ["billing", "search"] and heard == [("t1", ("billing", "search"))]
    assert runtime.delivered == [("t2", "worker")]
    due = worker.next_deadline()
    assert due is not None
    clock.set(due)
    worker.tick()
    assert heard == [("t1", ("billing", "search"))] * 2
    assert scheduler.task_pass_retry("t1") is None and of_type(scheduler, PassTaskFailed) == []
    fenced.clear()
    due = worker.next_deadline()
    assert due is not None
    clock.set(due)
    worker.tick()
    assert len(heard) == 2 and runtime.delivered == [("t2", "worker"), ("t1", "worker")]
