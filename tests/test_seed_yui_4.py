"""yui's controller passes, fourth round (seed 000, ``FileTaskController#requestPass``,
``#runCoalesced``, ``#runDirtySchedulerPass``, ``partitionDirtyScope``,
``mergeControllerSchedulerResults``, ``selectedPendingWakeups``): full and dirty
passes, blocked tasks, per-task work under a bound, and what a pass requested while
another runs does. Each test names the seed behaviour and fails when it breaks;
docs/seed-fidelity.md, "Round four (passes)", says what changed."""

from __future__ import annotations

import logging
import threading
from typing import Any

from helpers.probes import of_type

from tasktrail.domain import ManualClock, Scheduler, Worker
from tasktrail.domain.turns.keys import role_key, task_key
from tasktrail.domain.turns.pass_events import PassStarted, TaskPassRetryScheduled
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import TurnSettings

AGGREGATION = TurnSettings().aggregation_window_ms
WAIT = 10  # seconds a test thread waits for another (never reached when green)


def with_worker_turns(scheduler: Scheduler, *ids: str, project: str | None = None) -> None:
    for task_id in ids:
        scheduler.submit("job", id=task_id, project_ids=(project,) if project else ())
        scheduler.start_turn(task_id, "worker")


class Drains(Runtime):
    """Records the order tasks are drained in; ``on_drain(task_id, visit)`` runs first,
    and the runtime events of the tasks in ``fails`` cannot be applied."""

    def __init__(self, on_drain: Any = None, fails: set[str] | None = None) -> None:
        self.on_drain = on_drain
        self.fails = fails if fails is not None else set()
        self.order: list[str] = []
        self.delivered: list[str] = []
        self._lock = threading.Lock()

    def drain(self, scheduler: Any, task_id: str) -> None:
        with self._lock:
            self.order.append(task_id)
            visit = self.order.count(task_id)
        if self.on_drain is not None:
            self.on_drain(task_id, visit)
        if task_id in self.fails:
            raise ConnectionError(f"runtime events of {task_id} unreadable")

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        with self._lock:
            self.delivered.append(task_id)
        return "delivered"


# ─── what a dirty pass visits, and in which order ─────────────────────────────────


def test_yui_dirty_pass_visits_tasks_in_the_order_their_keys_were_requested(
    scheduler: Scheduler,
) -> None:
    # yui (``partitionDirtyScope``): a dirty pass's task scopes are kept in the order
    # each task's first key arrived (a Map; a later task key of the same task replaces
    # its role keys in place), signalled to the queue in that order, and their results
    # merged in that order. A full pass lists every task in id order.
    with_worker_turns(scheduler, "t1", "t2", "t10")
    runtime = Drains()
    keys = [task_key("t10"), role_key("t2", "worker"), task_key("t1"), task_key("t2")]
    report = scheduler.controller_pass(keys, runtime=runtime, concurrency=1)
    assert report.tasks == ["t10", "t2", "t1"] and report.done == ["t10", "t2", "t1"]
    assert runtime.order == ["t10", "t2", "t1"]  # a bound of 1: one at a time, in order
    assert of_type(scheduler, PassStarted)[-1].task_ids == ("t10", "t2", "t1")
    # Keys requested across calls keep their first request's place (yui's pending Set).
    scheduler.request_pass([task_key("t2")])
    scheduler.request_pass([role_key("t1", "worker"), task_key("t2")])
    (dirty,) = scheduler.pump()
    assert dirty.tasks == ["t2", "t1"]
    assert scheduler.controller_pass("full").tasks == ["t1", "t2", "t10"]


class Finishing(Drains):
    """``t1``'s per-task pass waits in its drain until ``t3``'s has reached its wakeup
    step, the end of its work: the two finish in the other order."""

    def __init__(self) -> None:
        super().__init__(on_drain=self._hold)
        self.local = threading.local()
        self.t3_done = threading.Event()

    def _hold(self, task_id: str, visit: int) -> None:
        self.local.task = task_id
        if task_id == "t1":
            assert self.t3_done.wait(WAIT)

    def leader_wake_fenced(self) -> bool:
        if getattr(self.local, "task", None) == "t3":
            self.t3_done.set()
        return False


def test_yui_pass_reports_its_tasks_in_scope_order_whatever_order_they_finished(
    scheduler: Scheduler,
) -> None:
    # yui (``#runDirtySchedulerPass``): each task's result goes to its scope index and
    # ``mergeControllerSchedulerResults`` joins them in scope order, not in the order
    # the concurrent per-task passes finished.
    with_worker_turns(scheduler, "t1", "t3")
    with_worker_turns(scheduler, "t2", project="billing")
    for task_id in ("t1", "t2", "t3"):
        scheduler.observe_exit(task_id, "worker")
    runtime = Finishing()
    report = scheduler.controller_pass(runtime=runtime, concurrency=2, maintenance={"billing"})
    assert runtime.t3_done.is_set()  # t3 did finish first
    assert list(report.outcomes) == ["t1", "t2", "t3"]
    assert report.outcomes == {"t1": "done", "t2": "deferred", "t3": "done"}
    assert list(report.turns) == ["t1", "t3"]


# ─── blocked tasks ────────────────────────────────────────────────────────────────


def test_yui_blocked_task_gets_nothing_else_in_its_pass_and_its_wakeup_waits(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui: the tasks whose runtime events failed are left out of every phase of the
    # pass, full or dirty (``blockedTaskIds``: cleanups, deliveries, liveness, and
    # ``selectedPendingWakeups``), while the others go on; the task's retry, with its
    # task key, does its work later.
    for task_id in ("t1", "t2"):
        scheduler.submit("job", id=task_id)
        scheduler.start_turn(task_id, "worker")  # undelivered: due for delivery
        scheduler.start_turn(task_id, "helper")
        scheduler.observe_exit(task_id, "helper")
        scheduler.request_wakeup(task_id, "review")
    clock.advance(AGGREGATION)
    runtime = Drains(fails={"t1"})
    full = scheduler.controller_pass(runtime=runtime)
    assert (full.blocked, full.done) == (["t1"], ["t2"])
    assert runtime.delivered.count("t1") == 0 and "t2" in runtime.delivered
    assert full.wakeups == {"t2": "dispatched"} and full.turns == {"t2": {"helper": "exited"}}
    assert scheduler.pending_wakeup("t1") is not None  # it waits, pending
    assert scheduler.active_turn("t1", "helper") is not None  # no liveness judged
    dirty = scheduler.controller_pass([task_key("t1"), task_key("t2")], runtime=runtime)
    assert dirty.blocked == ["t1"] and "t1" not in dirty.wakeups
    retry = scheduler.task_pass_retry("t1")
    assert retry is not None and retry.keys == (task_key("t1"),)
    runtime.fails.clear()
    clock.set(retry.retry_at)
    retried = scheduler.controller_pass(["operator"], runtime=runtime)
    assert retried.retried == ["t1"] and retried.done == ["t1"]
    assert retried.wakeups == {"t1": "dispatched"}
    assert retried.turns == {"t1": {"helper": "exited"}}
    assert scheduler.task_pass_retry("t1") is None


# ─── passes requested while a pass runs ───────────────────────────────────────────


def test_yui_dirty_keys_requested_during_a_pass_run_next_as_one_dirty_pass(
    scheduler: Scheduler,
) -> None:
    # yui (``#requestPass`` during ``#runCoalesced``): keys requested while a pass runs
    # gather in the pending set; the running loop then runs them as one dirty pass.
    with_worker_turns(scheduler, "t1", "t2", "t3")
    nested: list[Any] = []

    def mark_dirty(task_id: str, visit: int) -> None:
        if (task_id, visit) == ("t1", 1):
            scheduler.request_pass([task_key("t3")])
            scheduler.request_pass([role_key("t2", "worker"), task_key("t3")])
            nested.append(scheduler.pump())  # inside a pass: left to the running pump

    scheduler.request_pass([task_key("t1")])
    reports = scheduler.pump(runtime=Drains(on_drain=mark_dirty))
    assert [(r.scope, r.keys, r.tasks) for r in reports] == [
        ("dirty", (task_key("t1"),), ["t1"]),
        ("dirty", (task_key("t3"), role_key("t2", "worker")), ["t3", "t2"]),
    ]
    assert nested == [[]] and not scheduler.pass_queue


def test_yui_full_pass_requested_during_a_full_pass_runs_after_it_uncut(
    scheduler: Scheduler,
) -> None:
    # yui: a full request during a full pass only sets ``#pendingFull`` (the abort of
    # pending work is the dirty queue's): the running full pass finishes every task,
    # then the loop runs the full pass again; dirty keys asked for meanwhile are part
    # of it.
    with_worker_turns(scheduler, "t1", "t2")

    def ask_again(task_id: str, visit: int) -> None:
        if (task_id, visit) == ("t1", 1):
            scheduler.request_pass("full")
            scheduler.request_pass([task_key("t2")])

    scheduler.request_pass("full")
    reports = scheduler.pump(runtime=Drains(on_drain=ask_again), concurrency=1)
    assert [(r.scope, r.done, r.having("skipped")) for r in reports] == [
        ("full", ["t1", "t2"], []),
        ("full", ["t1", "t2"], []),
    ]


def test_yui_pass_requested_while_another_thread_pumps_runs_after_its_pass(
    scheduler: Scheduler,
) -> None:
    # yui runs one coalescing loop (``#runCoalesced``): a pump asked for while passes
    # run starts no pass beside them ("full pump requests remain exclusive"); the
    # running loop runs what was requested once its pass is done.
    with_worker_turns(scheduler, "t1", "t2")
    entered, release = threading.Event(), threading.Event()

    def hold(task_id: str, visit: int) -> None:
        if (task_id, visit) == ("t1", 1):
            entered.set()
            assert release.wait(WAIT)

    pumped: list[Any] = []
    scheduler.request_pass("full")
    first = threading.Thread(
        target=lambda: pumped.extend(scheduler.pump(runtime=Drains(on_drain=hold), concurrency=1))
    )
    first.start()
    try:
        assert entered.wait(WAIT)
        scheduler.request_pass([task_key("t2")])
        assert scheduler.pump() == []  # no second pass beside the running one
        assert len(of_type(scheduler, PassStarted)) == 1
    finally:
        release.set()
        first.join(WAIT)
    assert not first.is_alive()
    assert [(r.scope, r.tasks) for r in pumped] == [("full", ["t1", "t2"]), ("dirty", ["t2"])]
    assert not scheduler.pass_queue


def test_yui_task_failing_in_a_dirty_pass_is_retried_without_the_other_tasks(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui (``#runDirtySchedulerPass``): a per-task pass that throws fails only its own
    # task scope; the others' results stand, and only the failed scope (its own keys)
    # gets a task-pass retry.
    with_worker_turns(scheduler, "t1", "t2", "t3")
    runtime = Drains()

    def deliver(task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if task_id == "t2":
            raise RuntimeError("socket closed")
        return "delivered"

    runtime.deliver = deliver  # type: ignore[method-assign]
    keys = [task_key("t1"), role_key("t2", "worker"), task_key("t3")]
    report = scheduler.controller_pass(keys, runtime=runtime)
    assert (report.done, report.failed) == (["t1", "t3"], ["t2"])
    assert [(r.task_id, r.keys) for r in of_type(scheduler, TaskPassRetryScheduled)] == [
        ("t2", (role_key("t2", "worker"),))
    ]
    assert report.retries == {"t2": clock.now + 250}


def test_yui_worker_reports_each_blocked_or_failed_task_of_its_pass(
    scheduler: Scheduler, caplog: Any
) -> None:
    # yui: a task whose runtime events failed, and a per-task pass that threw, are each
    # reported to the controller's ``onError`` while the pass goes on for the others.
    for task_id in ("t1", "t2", "t3"):
        scheduler.submit("crew", id=task_id, phase="lead")  # no phases here to run
        scheduler.start_turn(task_id, "worker")  # undelivered: due now
    runtime = Drains(fails={"t1"})

    def deliver(task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if task_id == "t2":
            raise RuntimeError("socket closed")
        return "delivered"

    runtime.deliver = deliver  # type: ignore[method-assign]
    heard: list[tuple[str, str]] = []
    worker = Worker(scheduler, runtime=runtime, on_pass_error=lambda t, e: heard.append((t, e)))
    with caplog.at_level(logging.WARNING, logger="tasktrail.worker"):
        worker.tick()
    assert heard == [
        ("t1", "ConnectionError: runtime events of t1 unreadable"),
        ("t2", "RuntimeError: socket closed"),
    ]
    assert [r.getMessage() for r in caplog.records] == [
        "controller pass blocked t1: ConnectionError: runtime events of t1 unreadable",
        "controller pass failed t2: RuntimeError: socket closed",
    ]


# ─── maintenance fences ───────────────────────────────────────────────────────────


def test_yui_worker_defers_fenced_projects_reports_each_and_resumes_once_lifted(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui: the controller takes a ``maintenanceFence`` (asked per project at each pass)
    # and an ``onMaintenanceFenceDefer({taskId, projectIds})`` it calls for each task
    # it defers; the deferral is for that pass only, never a failure, and a later pass
    # does the work once the project is out of maintenance.
    for task_id, project in (("t1", "billing"), ("t2", "search")):
        scheduler.submit("crew", id=task_id, phase="lead", project_ids=(project,))
        scheduler.start_turn(task_id, "worker")  # undelivered: due now
    fenced = {"billing"}
    runtime = Drains()
    heard: list[tuple[str, tuple[str, ...]]] = []
    worker = Worker(
        scheduler,
        runtime=runtime,
        maintenance=lambda project: project in fenced,
        on_deferred=lambda task_id, projects: heard.append((task_id, projects)),
        on_pass_error=lambda task_id, error: heard.append((task_id, (error,))),
    )
    worker.tick()
    assert heard == [("t1", ("billing",))] and runtime.delivered == ["t2"]
    assert scheduler.task_pass_retry("t1") is None  # deferred, never failed
    due = worker.next_deadline()
    assert due is not None and clock.now < due <= clock.now + 2_000  # no pass at every poll
    fenced.clear()
    clock.set(due)
    worker.tick()
    assert runtime.delivered == ["t2", "t1"] and heard == [("t1", ("billing",))]
