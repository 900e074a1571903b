"""Round six of the yui Leader wakeup audit (seeds 000 and 001, SPEC.md section 2): what a
late request joins, what a new request after a dispatch or a steer starts, how each end
of the Leader Turn a wakeup started lets the next one in, and the fence at the force end.
The rules are written down in docs/seed-fidelity.md ("Round six (wakeups)")."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.probes import busy_leader, of_type

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.turns.events import (
    TurnStarted,
    WakeupDispatched,
    WakeupDropped,
    WakeupFoundBusy,
)
from tasktrail.domain.turns.keys import role_key
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import TurnSettings
from tasktrail.domain.turns.state import LEADER
from tasktrail.projections import Projector, ReadModel

AGGREGATION = TurnSettings().aggregation_window_ms
FORCE = TurnSettings().force_window_ms
STALL = TurnSettings().stall_window_ms


class Steering(Runtime):
    """Remembers what was steered; its Leader wake fence is up while ``fence``."""

    def __init__(self) -> None:
        self.fence = False
        self.steered: list[tuple[str, str, tuple[str, ...]]] = []

    def steer(self, task_id: str, turn_id: str, reasons: tuple[str, ...]) -> None:
        self.steered.append((task_id, turn_id, reasons))

    def leader_wake_fenced(self) -> bool:
        return self.fence


def test_yui_request_after_the_aggregation_end_joins_and_keeps_the_window(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # yui arms its wake timer from firstRequestedAt only: a request that joins a wakeup
    # already past its aggregation end does not open a new window.
    scheduler.configure_turns(stall_window_ms=FORCE * 2)
    task = scheduler.submit("job", id="t1")
    busy = busy_leader(scheduler, task)
    first_at = clock.now
    scheduler.request_wakeup(task, "a")
    clock.set(first_at + AGGREGATION)
    assert scheduler.controller_pass([role_key(task, LEADER)]).wakeups == {task: "busy"}
    clock.advance(1_000)
    assert scheduler.request_wakeup(task, "b") == "aggregated"
    wakeup = scheduler.pending_wakeup(task)
    assert wakeup is not None and wakeup.first_requested_at == first_at
    scheduler.complete_turn(task, LEADER, busy)
    # The Leader is idle: the wakeup is due now, not AGGREGATION after the late request.
    deadline = scheduler.next_turn_deadline()
    assert deadline is not None and deadline <= clock.now
    assert scheduler.controller_pass([role_key(task, LEADER)]).wakeups == {task: "dispatched"}
    (dispatched,) = of_type(scheduler, WakeupDispatched)
    assert (dispatched.reasons, dispatched.request_count) == (("a", "b"), 2)
    assert dispatched.first_requested_at == first_at


def test_yui_request_after_the_force_end_is_steered_at_once_with_every_reason(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    scheduler.configure_turns(stall_window_ms=FORCE * 2)
    task = scheduler.submit("job", id="t1")
    busy = busy_leader(scheduler, task)
    first_at = clock.now
    scheduler.request_wakeup(task, "a")
    clock.set(first_at + FORCE + 5)
    assert scheduler.request_wakeup(task, "b") == "aggregated"
    runtime = Steering()
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "steered"}
    assert runtime.steered == [(task, busy, ("a", "b"))]
    assert scheduler.pending_wakeup(task) is None


def test_yui_request_after_a_dispatch_opens_a_new_wakeup_timed_from_itself(
    scheduler: Scheduler, clock: ManualClock, tmp_path: Path
) -> None:
    task = scheduler.submit("job", id="t1")
    first_at = clock.now
    scheduler.request_wakeup(task, "a")
    clock.set(first_at + AGGREGATION)
    assert scheduler.controller_pass().wakeups == {task: "dispatched"}
    projector = Projector(scheduler.store, tmp_path / "views.db")
    model = ReadModel(projector)
    projector.catch_up()
    assert model.pending_wakeups() == [] and model.next_wakeup_deadline(clock.now) is None
    started = scheduler.active_turn(task, LEADER)
    assert started is not None and started.turn_id == "leader.1"
    scheduler.deliver_turn(task, LEADER, "leader.1", "delivered")
    clock.advance(10)
    second_at = clock.now
    assert scheduler.request_wakeup(task, "b") == "requested"
    wakeup = scheduler.pending_wakeup(task)
    assert wakeup is not None
    assert (wakeup.first_requested_at, wakeup.reasons, wakeup.request_count) == (
        second_at,
        ("b",),
        1,
    )
    assert scheduler.next_turn_deadline() == second_at + AGGREGATION
    projector.catch_up()
    (row,) = model.pending_wakeups()
    assert (row["first_requested_at"], row["busy_attempts"]) == (second_at, 0)
    assert model.next_wakeup_deadline(clock.now) == {
        "task_id": task,
        "deadline": second_at + AGGREGATION,
        "window": "aggregation",
    }
    projector.close()
    clock.set(second_at + AGGREGATION - 1)
    assert scheduler.controller_pass().wakeups == {task: "aggregating"}
    # The Turn the first wakeup started keeps the Leader busy: the new one waits.
    clock.set(second_at + AGGREGATION)
    assert scheduler.controller_pass().wakeups == {task: "busy"}
    (found,) = of_type(scheduler, WakeupFoundBusy)
    assert (found.turn_id, found.attempt) == ("leader.1", 0)


def test_yui_request_after_a_steer_opens_a_new_wakeup_with_its_own_force_window(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    scheduler.configure_turns(stall_window_ms=FORCE * 4)
    task = scheduler.submit("job", id="t1")
    busy = busy_leader(scheduler, task)
    first_at = clock.now
    scheduler.request_wakeup(task, "a")
    clock.set(first_at + FORCE)
    runtime = Steering()
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "steered"}
    clock.advance(1)
    second_at = clock.now
    assert scheduler.request_wakeup(task, "b") == "requested"
    clock.set(second_at + AGGREGATION)
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "busy"}
    # Its re-signals start again at attempt 0: the steered wakeup's are not carried over.
    assert [e.attempt for e in of_type(scheduler, WakeupFoundBusy)][-1] == 0
    clock.set(second_at + FORCE - 1)
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "busy"}
    clock.set(second_at + FORCE)
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "steered"}
    assert runtime.steered == [(task, busy, ("a",)), (task, busy, ("b",))]


@pytest.mark.parametrize("end", ["completed", "exited", "stalled"])
def test_yui_each_end_of_a_wakeups_leader_turn_lets_the_next_wakeup_start_one(
    scheduler: Scheduler, clock: ManualClock, end: str
) -> None:
    scheduler.configure_turns(stall_window_ms=FORCE * 4)
    task = scheduler.submit("job", id="t1")
    scheduler.request_wakeup(task, "a")
    clock.advance(AGGREGATION)
    assert scheduler.controller_pass().wakeups == {task: "dispatched"}
    scheduler.deliver_turn(task, LEADER, "leader.1", "delivered")
    scheduler.request_wakeup(task, "b")
    clock.advance(AGGREGATION)
    if end == "completed":
        scheduler.complete_turn(task, LEADER, "leader.1")
    elif end == "exited":
        scheduler.observe_exit(task, LEADER, "leader.1")
    else:
        scheduler.observe_stall(task, LEADER, "leader.1")
    report = scheduler.controller_pass()
    assert report.wakeups == {task: "dispatched"}
    turn = scheduler.active_turn(task, LEADER)
    assert turn is not None and turn.turn_id == "leader.2"
    started = of_type(scheduler, TurnStarted)
    assert [(s.turn_id, s.reasons) for s in started] == [("leader.1", ("a",)), ("leader.2", ("b",))]


def test_yui_fence_up_at_the_force_end_steers_nothing_until_it_is_down(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    scheduler.configure_turns(stall_window_ms=FORCE * 4)
    task = scheduler.submit("job", id="t1")
    busy = busy_leader(scheduler, task)
    first_at = clock.now
    scheduler.request_wakeup(task, "a")
    clock.set(first_at + FORCE)
    runtime = Steering()
    runtime.fence = True
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "fenced"}
    assert runtime.steered == [] and of_type(scheduler, WakeupDispatched) == []
    clock.advance(100)
    assert scheduler.request_wakeup(task, "b") == "aggregated"  # requests still join
    runtime.fence = False
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "steered"}
    assert runtime.steered == [(task, busy, ("a", "b"))]


def test_yui_wakeup_of_a_task_holding_its_outcome_is_dropped_not_steered_at_the_force_end(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # A wakeup of a completed task is dropped (SPEC section 2), also once its force
    # window has passed over a busy Leader: nothing is steered into that Turn.
    scheduler.configure_turns(stall_window_ms=FORCE * 4)
    task = scheduler.submit("job", id="t1")
    busy_leader(scheduler, task)
    first_at = clock.now
    scheduler.request_wakeup(task, "a")
    clock.set(first_at + AGGREGATION)
    runtime = Steering()
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "busy"}
    scheduler.reserve(task)
    scheduler.submit("leaf", id="child", owner=task)
    scheduler.finish(task, "completed")  # completing: it holds its outcome for child
    clock.set(first_at + FORCE)
    assert scheduler.controller_pass(runtime=runtime).wakeups == {task: "dropped"}
    assert runtime.steered == [] and scheduler.pending_wakeup(task) is None
    (dropped,) = of_type(scheduler, WakeupDropped)
    assert (dropped.reasons, dropped.cause) == (("a",), "wakeups.task_done")
