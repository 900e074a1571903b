"""Pending Leader wakeups (SPEC.md section 2): request and aggregate, dispatch after the
aggregation window, the force window for a busy Leader, dropped for finished tasks."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import event_count

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskEvent
from tasktrail.domain.turns.events import (
    TurnStarted,
    WakeupAggregated,
    WakeupDispatched,
    WakeupDropped,
    WakeupRequested,
)
from tasktrail.domain.turns.keys import role_key, task_key
from tasktrail.domain.turns.refusals import TurnRuleViolation
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import TurnSettings
from tasktrail.domain.turns.state import LEADER

AGGREGATION = TurnSettings().aggregation_window_ms
FORCE = TurnSettings().force_window_ms


def events_of(scheduler: Scheduler) -> list[TaskEvent]:
    return [recorded.event for recorded in scheduler.store.read()]


def of_type(scheduler: Scheduler, cls: type[TaskEvent]) -> list[Any]:
    return [e for e in events_of(scheduler) if isinstance(e, cls)]


def test_wakeup_defaults_are_one_minute_and_ten_minutes() -> None:
    assert AGGREGATION == 60_000 and FORCE == 600_000


def test_wakeup_requested_several_times_in_window_is_dispatched_once_with_every_reason(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("job", id="t1")
    first_at = clock.now
    statuses = [scheduler.request_wakeup(task, "message")]
    for reason in ("input-answered", "message", "worker-done"):
        clock.advance(15_000)
        statuses.append(scheduler.request_wakeup(task, reason))
    assert statuses == ["requested", "aggregated", "aggregated", "aggregated"]
    wakeup = scheduler.pending_wakeup(task)
    assert wakeup is not None and wakeup.first_requested_at == first_at
    assert wakeup.request_count == 4
    assert scheduler.next_turn_deadline() == first_at + AGGREGATION

    clock.set(first_at + AGGREGATION - 1)
    assert scheduler.controller_pass().wakeups == {task: "aggregating"}
    assert scheduler.active_turn(task, LEADER) is None

    clock.set(first_at + AGGREGATION)  # the window after the first request has passed
    report = scheduler.controller_pass()
    assert report.wakeups == {task: "dispatched"}
    for _ in range(3):
        clock.advance(AGGREGATION)
        scheduler.controller_pass()

    dispatched = of_type(scheduler, WakeupDispatched)
    assert len(dispatched) == 1
    assert dispatched[0].at == first_at + AGGREGATION
    assert dispatched[0].reasons == ("message", "input-answered", "worker-done")
    assert dispatched[0].request_count == 4 and dispatched[0].mode == "started"
    assert dispatched[0].pass_id == report.pass_id
    started = of_type(scheduler, TurnStarted)
    assert [(s.turn_id, s.reasons, s.cause) for s in started] == [
        ("leader.1", ("message", "input-answered", "worker-done"), "wakeups.dispatch")
    ]
    assert scheduler.pending_wakeup(task) is None


def test_wakeup_aggregate_keeps_first_time_and_appends_new_reasons_once(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("job", id="t1")
    scheduler.request_wakeup(task, "a")
    clock.advance(10)
    scheduler.request_wakeup(task, "b")
    clock.advance(10)
    scheduler.request_wakeup(task, "a")
    wakeup = scheduler.pending_wakeup(task)
    assert wakeup is not None
    assert wakeup.reasons == ("a", "b")
    assert (wakeup.first_requested_at, wakeup.last_requested_at) == (clock.now - 20, clock.now)
    kinds = [type(e) for e in events_of(scheduler) if e.stream_id() == f"wakeup:{task}"]
    assert kinds == [WakeupRequested, WakeupAggregated, WakeupAggregated]


class Steering(Runtime):
    def __init__(self) -> None:
        self.steered: list[tuple[str, str, tuple[str, ...]]] = []

    def steer(self, task_id: str, turn_id: str, reasons: tuple[str, ...]) -> None:
        self.steered.append((task_id, turn_id, reasons))


def test_wakeup_waits_for_a_busy_leader_up_to_the_force_window(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    scheduler.configure_turns(stall_window_ms=FORCE * 2)
    task = scheduler.submit("job", id="t1")
    busy = scheduler.start_turn(task, LEADER)
    scheduler.deliver_turn(task, LEADER, busy, "delivered")  # else it is due now
    first_at = clock.now
    scheduler.request_wakeup(task, "review-done")
    clock.set(first_at + AGGREGATION)
    assert scheduler.controller_pass().wakeups == {task: "busy"}
    # Found busy: signalled again after the delivery backoff (yui), up to the force window.
    assert scheduler.next_turn_deadline() == first_at + AGGREGATION + 250
    clock.set(first_at + FORCE - 1)
    assert scheduler.controller_pass().wakeups == {task: "busy"}
    clock.set(first_at + FORCE)
    runtime = Steering()
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "steered"}
    # Dispatched anyway, into the busy Turn: one active Leader Turn, still.
    assert runtime.steered == [(task, busy, ("review-done",))]
    (dispatched,) = of_type(scheduler, WakeupDispatched)
    assert (dispatched.mode, dispatched.turn_id, dispatched.cause) == (
        "steered",
        busy,
        "wakeups.force",
    )
    assert scheduler.active_turn(task, LEADER).turn_id == busy  # type: ignore[union-attr]
    assert scheduler.pending_wakeup(task) is None


def test_wakeup_dispatched_once_the_busy_leader_is_idle(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("job", id="t1")
    busy = scheduler.start_turn(task, LEADER)
    scheduler.request_wakeup(task, "ping")
    clock.advance(AGGREGATION)
    assert scheduler.controller_pass([role_key(task, LEADER)]).wakeups == {task: "busy"}
    scheduler.complete_turn(task, LEADER, busy, due_at=clock.now + 500)
    clock.advance(500)
    # The Leader's due completion is folded first, so the wakeup finds it idle.
    report = scheduler.controller_pass([role_key(task, LEADER)])
    assert report.turns == {task: {LEADER: "completed"}}
    assert report.wakeups == {task: "dispatched"}
    assert scheduler.active_turn(task, LEADER).turn_id == "leader.2"  # type: ignore[union-attr]


def test_wakeup_of_a_completed_or_terminal_task_is_dropped(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    holder = scheduler.submit("job", id="holder")
    ended = scheduler.submit("job", id="ended")
    for task in (holder, ended):
        scheduler.request_wakeup(task, "pending")
    scheduler.reserve(holder)
    scheduler.submit("leaf", id="child", owner=holder)
    scheduler.finish(holder, "completed")  # completing
    scheduler.reserve(ended)
    scheduler.finish(ended, "completed")  # terminal
    report = scheduler.controller_pass()
    assert report.wakeups == {"ended": "dropped", "holder": "dropped"}
    assert scheduler.pending_wakeups() == {}
    dropped = of_type(scheduler, WakeupDropped)
    assert sorted((d.task_id, d.reasons, d.cause) for d in dropped) == [
        ("ended", ("pending",), "wakeups.task_done"),
        ("holder", ("pending",), "wakeups.task_done"),
    ]
    # A request to a task holding its outcome is dropped on arrival; to a terminal
    # task it is a no-op that records nothing (rule 4).
    assert scheduler.request_wakeup(holder, "late") == "dropped"
    head = scheduler.store.head()
    assert scheduler.request_wakeup(ended, "late") == "dropped"
    assert scheduler.store.head() == head
    assert of_type(scheduler, TurnStarted) == []


def test_wakeup_blank_reason_is_refused_and_appends_nothing(scheduler: Scheduler) -> None:
    task = scheduler.submit("job", id="t1")
    head = scheduler.store.head()
    for reason in ("", "   ", None):
        with pytest.raises(TurnRuleViolation) as refused:
            scheduler.request_wakeup(task, reason)  # type: ignore[arg-type]
        assert refused.value.rule == "wakeups.reason"
    assert scheduler.store.head() == head


def test_wakeup_dispatch_step_alone(scheduler: Scheduler, clock: ManualClock) -> None:
    task = scheduler.submit("job", id="t1")
    assert scheduler.dispatch_wakeup(task).status == "none"
    scheduler.request_wakeup(task, "x")
    assert scheduler.dispatch_wakeup(task).status == "aggregating"
    clock.advance(AGGREGATION)
    dispatch = scheduler.dispatch_wakeup(task)
    assert (dispatch.status, dispatch.turn_id, dispatch.reasons) == (
        "dispatched",
        "leader.1",
        ("x",),
    )


def test_wakeups_on_every_store(store_url: str, clock: ManualClock, registry: Registry) -> None:
    scheduler = Scheduler.open(store_url, clock=clock, registry=registry)
    scheduler.configure_turns(aggregation_window_ms=1_000, force_window_ms=5_000)
    task = scheduler.submit("job", id="t1")
    scheduler.request_wakeup(task, "a")
    clock.advance(500)
    scheduler.request_wakeup(task, "b")
    clock.advance(500)
    assert scheduler.controller_pass([task_key(task)]).wakeups == {task: "dispatched"}
    scheduler.request_wakeup(task, "c")
    written = scheduler.events_written
    scheduler.close()
    assert event_count(store_url) == written
    reopened = Scheduler.open(store_url, clock=clock, registry=registry)
    pending = reopened.pending_wakeups()
    assert list(pending) == [task] and pending[task].reasons == ("c",)
    assert reopened.active_turn(task, LEADER).reasons == ("a", "b")  # type: ignore[union-attr]
    reopened.close()
