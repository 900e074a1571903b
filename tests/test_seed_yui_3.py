"""yui's task-pass retries and maintenance deferral, third round (seed 000,
``FileTaskController#scheduleTaskPassRetry`` and ``#runCoalesced``): each test names
the seed behaviour and fails when it breaks. docs/seed-fidelity.md, "Round three",
says what changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.probes import of_type

from tasktrail.domain import ManualClock, Scheduler, Worker
from tasktrail.domain.turns.events import WakeupFoundBusy
from tasktrail.domain.turns.keys import role_key, task_key
from tasktrail.domain.turns.pass_events import (
    PassTaskFailed,
    TaskPassRetryCleared,
    TaskPassRetryScheduled,
)
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.state import LEADER
from tasktrail.projections import Projector, ReadModel

AGGREGATION = 60_000  # yui's LEADER_WAKE_AGGREGATION_MS, tasktrail's default


class FailingDelivery(Runtime):
    """Delivering a Turn of a task in ``fails`` raises; ``on_deliver`` runs first."""

    def __init__(self, *fails: str, on_deliver: Any = None) -> None:
        self.fails = set(fails)
        self.on_deliver = on_deliver

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if self.on_deliver is not None:
            self.on_deliver(task_id)
        if task_id in self.fails:
            raise RuntimeError("the runtime's socket went away")
        return "delivered"


class UnreadableEvents(Runtime):
    """The runtime events of the tasks in ``fails`` cannot be applied."""

    def __init__(self, *fails: str) -> None:
        self.fails = set(fails)

    def drain(self, scheduler: Any, task_id: str) -> None:
        if task_id in self.fails:
            raise ConnectionError(f"runtime events of {task_id} unreadable")


def _with_worker_turn(scheduler: Scheduler, task_id: str, *, project: str | None = None) -> str:
    scheduler.submit("job", id=task_id, project_ids=(project,) if project else ())
    scheduler.start_turn(task_id, "worker")
    return task_id


# ─── a failure while the task's retry is armed uses no attempt ─────────────────────


def test_yui_failure_while_the_task_pass_retry_is_armed_uses_no_attempt(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui arms one retry timer per task; a failure while it is armed returns early
    # (``#taskPassRetryTimers.has(taskId)``): only a failure after it fired counts.
    task = _with_worker_turn(scheduler, "t1")
    runtime = FailingDelivery(task)
    scheduler.controller_pass([task_key(task)], runtime=runtime)
    armed = scheduler.task_pass_retry(task)
    assert armed is not None and (armed.attempt, armed.retry_at) == (0, clock.now + 250)
    clock.advance(100)
    again = scheduler.controller_pass([task_key(task)], runtime=runtime)
    assert again.failed == [task]
    assert scheduler.task_pass_retry(task) == armed  # the same retry, at the same time
    assert again.retries == {task: armed.retry_at}
    clock.set(armed.retry_at)
    fired = scheduler.controller_pass(["operator"], runtime=runtime)
    assert fired.retried == [task] and fired.retries == {task: clock.now + 500}
    clock.advance(500)
    last = scheduler.controller_pass(["operator"], runtime=runtime)
    assert last.retries == {task: None}  # the limit (2) counts retries that fired
    assert [r.attempt for r in of_type(scheduler, TaskPassRetryScheduled)] == [0, 1]
    assert len(of_type(scheduler, PassTaskFailed)) == 4


def test_yui_failure_after_the_retry_limit_starts_a_new_retry_at_attempt_zero(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui clears the task's attempts when it gives up (``#clearTaskPassRetry``): the
    # limit ends that failure's retries, and a later failing pass is a new failure.
    task = _with_worker_turn(scheduler, "t1")
    runtime = FailingDelivery(task)
    scheduler.controller_pass([task_key(task)], runtime=runtime)
    for _ in range(2):
        retry = scheduler.task_pass_retry(task)
        assert retry is not None
        clock.set(retry.retry_at)
        scheduler.controller_pass(["operator"], runtime=runtime)
    assert scheduler.task_pass_retry(task) is None  # given up after two retries
    clock.advance(60_000)
    later = scheduler.controller_pass([task_key(task)], runtime=runtime)
    assert later.retries == {task: clock.now + 250}
    assert [r.attempt for r in of_type(scheduler, TaskPassRetryScheduled)] == [0, 1, 0]


# ─── a blocked task's retry covers the whole task ──────────────────────────────────


def test_yui_blocked_task_retry_covers_the_whole_task(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui arms the retry of a task whose runtime events failed with its task key
    # (``{ taskId, keys: ["task:<id>"] }``), whatever keys the pass was asked for.
    task = _with_worker_turn(scheduler, "t1")
    scheduler.start_turn(task, LEADER)
    scheduler.observe_exit(task, LEADER)
    runtime = UnreadableEvents(task)
    blocked = scheduler.controller_pass([role_key(task, "worker")], runtime=runtime)
    assert blocked.blocked == [task]
    retry = scheduler.task_pass_retry(task)
    assert retry is not None and retry.keys == (task_key(task),)
    runtime.fails.clear()
    clock.set(retry.retry_at)
    fired = scheduler.controller_pass(["operator"], runtime=runtime)
    assert fired.retried == [task] and fired.done == [task]
    assert fired.turns == {task: {LEADER: "exited"}}  # every role, not only the worker


# ─── a dirty failure while a full pass is requested arms no retry ──────────────────


def test_yui_dirty_failure_while_a_full_pass_is_requested_arms_no_retry(
    scheduler: Scheduler,
) -> None:
    # yui: ``#scheduleTaskPassRetry`` returns at once while a full pass is pending;
    # the full pass does the task's work.
    task = _with_worker_turn(scheduler, "t1")
    runtime = FailingDelivery(task, on_deliver=lambda _: scheduler.request_pass("full"))
    dirty = scheduler.controller_pass([task_key(task)], runtime=runtime)
    assert dirty.failed == [task] and "socket went away" in dirty.errors[task]
    assert scheduler.task_pass_retry(task) is None
    assert of_type(scheduler, TaskPassRetryScheduled) == []
    (full,) = scheduler.pump(runtime=FailingDelivery())
    assert full.scope == "full" and full.done == [task] and full.retried == []


# ─── a task that holds its outcome gets no task-pass retry ────────────────────────


def _holding(scheduler: Scheduler, task_id: str) -> str:
    """A task with an active worker Turn that holds its outcome (``completing``)."""
    _with_worker_turn(scheduler, task_id)
    scheduler.reserve(task_id)
    scheduler.submit("leaf", id=f"{task_id}-child", owner=task_id)
    scheduler.finish(task_id, "completed")
    assert scheduler.task(task_id).status == "completing"
    return task_id


def test_yui_task_holding_its_outcome_gets_no_task_pass_retry(scheduler: Scheduler) -> None:
    # yui arms a task-pass retry only for an active Task (a completed one is cleared).
    task = _holding(scheduler, "t1")
    report = scheduler.controller_pass([task_key(task)], runtime=FailingDelivery(task))
    assert report.failed == [task]
    assert scheduler.task_pass_retry(task) is None
    assert of_type(scheduler, TaskPassRetryScheduled) == []


def test_yui_armed_retry_of_a_task_that_then_holds_its_outcome_is_cleared(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui: the retry timer of a Task no longer active clears the retry, runs nothing.
    task = _with_worker_turn(scheduler, "t1")
    runtime = FailingDelivery(task)
    scheduler.controller_pass([task_key(task)], runtime=runtime)
    retry = scheduler.task_pass_retry(task)
    assert retry is not None
    scheduler.reserve(task)
    scheduler.submit("leaf", id="child", owner=task)
    scheduler.finish(task, "completed")
    clock.set(retry.retry_at)
    fired = scheduler.controller_pass(["operator"], runtime=runtime)
    assert fired.retried == [] and fired.tasks == []
    assert scheduler.task_pass_retry(task) is None
    (cleared,) = of_type(scheduler, TaskPassRetryCleared)
    assert (cleared.task_id, cleared.why) == (task, "task_ended")


# ─── a deferral names the projects under maintenance, not all of the task's ────────


def test_yui_deferral_names_only_the_projects_under_maintenance(scheduler: Scheduler) -> None:
    # yui reports ``{ taskId, projectIds: fencedProjects }``: the fenced ones only.
    scheduler.submit("job", id="t1", project_ids=("billing", "search", "ledger"))
    scheduler.start_turn("t1", "worker")
    report = scheduler.controller_pass(maintenance={"ledger", "billing", "other"})
    assert report.deferred == {"t1": ("billing", "ledger")}  # in the task's order
    assert report.failed == [] and scheduler.task_pass_retry("t1") is None


# ─── a busy Leader's wakeup is signalled at its aggregation end (seed 001) ─────────


class Busy(Runtime):
    """A runtime whose Leader Turn ends only when a pass drains its events (after
    ``done_at`` on the scheduler clock): nothing else tells the scheduler it ended."""

    def __init__(self, clock: ManualClock, done_at: float) -> None:
        self.clock = clock
        self.done_at = done_at

    def drain(self, scheduler: Any, task_id: str) -> None:
        turn = scheduler.active_turn(task_id, LEADER)
        if turn is not None and turn.turn_id == "leader.1" and self.clock.now >= self.done_at:
            scheduler.complete_turn(task_id, LEADER, turn.turn_id)

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        return "delivered"


def _busy_leader_wakeup(scheduler: Scheduler) -> tuple[str, float]:
    task = scheduler.submit("crew", id="t1", phase="lead")  # no phases here to run
    busy = scheduler.start_turn(task, LEADER)
    scheduler.deliver_turn(task, LEADER, busy, "delivered")
    first_at = scheduler.now()
    scheduler.request_wakeup(task, "mail")
    return task, first_at


def test_yui_busy_leader_wakeup_is_due_at_its_aggregation_end_until_a_pass_found_it_busy(
    scheduler: Scheduler, clock: ManualClock, tmp_path: Path
) -> None:
    # yui's wake timer fires at the aggregation end; the pass it runs finds the Leader
    # busy and re-signals it with the delivery backoff. Until a pass has, the wakeup
    # stays due at its aggregation end, however late the scheduler asks.
    task, first_at = _busy_leader_wakeup(scheduler)
    with Projector(scheduler.store, tmp_path / "views.db") as projector:
        model = ReadModel(projector)
        for late in (0, 1, 30_000):
            clock.set(first_at + AGGREGATION + late)
            assert scheduler.next_turn_deadline() == first_at + AGGREGATION
            projector.catch_up()
            assert model.next_wakeup_deadline(now=clock.now) == {
                "task_id": task,
                "deadline": first_at + AGGREGATION,
                "window": "aggregation",
            }
        assert scheduler.controller_pass().wakeups == {task: "busy"}
        assert scheduler.next_turn_deadline() == clock.now + 250  # the first re-signal
        projector.catch_up()
        assert model.next_wakeup_deadline(now=clock.now) == {
            "task_id": task,
            "deadline": clock.now + 250,
            "window": "resignal",
        }


def test_yui_worker_signals_a_busy_leader_at_the_aggregation_end(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task, first_at = _busy_leader_wakeup(scheduler)
    runtime = Busy(clock, done_at=first_at + AGGREGATION + 500)
    worker = Worker(scheduler, runtime=runtime)
    clock.set(first_at + AGGREGATION)
    worker.tick()  # the wake at the aggregation end: the Leader is busy
    assert [f.attempt for f in of_type(scheduler, WakeupFoundBusy)] == [0]
    for _ in range(2):  # re-signalled after 250, then 500 ms: the Leader ended meanwhile
        due = worker.next_deadline()
        assert due is not None
        clock.set(due)
        worker.tick()
    leader = scheduler.active_turn(task, LEADER)
    assert leader is not None and leader.turn_id == "leader.2"  # the wakeup's Turn
    assert clock.now == first_at + AGGREGATION + 750  # not the force end (10 min)
