"""yui's Turn delivery where tasktrail once differed (issue 16; seed 001): a dispatched
wakeup is a delivered Leader input and an undelivered Turn is due now (defect 1), Turns
held by writer-attached / delivery-uncertain are offered again by a later pass, and a
stall diagnostic comes before a Turn is declared stalled. Each test names the behaviour
and fails when it breaks. The rules they hold are written down in
docs/seed-fidelity.md."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.probes import of_type
from helpers.seed_yui import AGGREGATION, DIAGNOSTIC, Delivering

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.turns.events import (
    TurnDelivered,
    TurnEvent,
    TurnStallDiagnosed,
    WakeupDispatched,
)
from tasktrail.domain.turns.keys import role_key
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.state import LEADER

# ─── defect 1: a dispatched wakeup is a delivered Leader input (seed 001) ──────────


def test_yui_dispatched_wakeup_turn_is_delivered_in_the_same_pass(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("job", id="t1")
    scheduler.request_wakeup(task, "mail")
    clock.advance(AGGREGATION)
    runtime = Delivering()
    report = scheduler.controller_pass(runtime=runtime)
    assert report.wakeups == {task: "dispatched"}
    assert runtime.delivered == [(task, LEADER, "leader.1")]
    turn = scheduler.active_turn(task, LEADER)
    assert turn is not None and turn.status == "delivered"
    (delivered,) = of_type(scheduler, TurnDelivered)
    assert (delivered.turn_id, delivered.pass_id) == ("leader.1", report.pass_id)
    # Nothing is left for a later pass but the stall diagnostic (then the stall window).
    assert scheduler.next_turn_deadline() == clock.now + DIAGNOSTIC


def test_yui_undelivered_turn_is_due_now(scheduler: Scheduler, clock: ManualClock) -> None:
    task = scheduler.submit("job", id="t1")
    started_at = clock.now
    turn = scheduler.start_turn(task, "worker")
    clock.advance(5_000)
    # A host sleeping until the deadline delivers it now, not at the stall window's end.
    assert scheduler.next_turn_deadline() == started_at
    scheduler.controller_pass(runtime=Delivering())
    assert scheduler.active_turn(task, "worker").status == "delivered"  # type: ignore[union-attr]
    assert scheduler.next_turn_deadline() == clock.now + DIAGNOSTIC
    scheduler.complete_turn(task, "worker", turn)
    assert scheduler.next_turn_deadline() is None


def test_yui_wakeup_turn_a_pass_could_not_deliver_stays_due_now(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = scheduler.submit("job", id="t1")
    scheduler.request_wakeup(task, "mail")
    clock.advance(AGGREGATION)
    scheduler.controller_pass()  # no runtime: the Leader Turn starts, undelivered
    assert scheduler.active_turn(task, LEADER) is not None
    assert of_type(scheduler, WakeupDispatched)
    assert scheduler.next_turn_deadline() == clock.now


# ─── Turns held by writer-attached / delivery-uncertain are offered again (001) ────


class Scripted(Runtime):
    """Answers each delivery with the next outcome of ``outcomes``."""

    def __init__(self, *outcomes: str) -> None:
        self.outcomes = list(outcomes)
        self.offered: list[tuple[str, int]] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        self.offered.append((turn_id, attempt))
        return self.outcomes.pop(0)


@pytest.mark.parametrize("held", ["writer-attached", "delivery-uncertain"])
def test_yui_held_turn_is_offered_for_delivery_again_by_a_later_pass(
    scheduler: Scheduler, held: str
) -> None:
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    runtime = Scripted(held, held, "delivered")
    first = scheduler.controller_pass(runtime=runtime)
    assert runtime.offered == [(turn, 0)]  # offered once in the pass that held it
    state = scheduler.active_turn(task, "worker")
    assert state is not None and state.delivery_held and state.held_by_pass == first.pass_id
    scheduler.controller_pass([role_key(task, "worker")], runtime=runtime)
    scheduler.controller_pass([role_key(task, "worker")], runtime=runtime)
    assert runtime.offered == [(turn, 0)] * 3
    assert scheduler.active_turn(task, "worker").status == "delivered"  # type: ignore[union-attr]


def test_yui_turn_held_by_a_command_is_offered_by_the_next_pass(scheduler: Scheduler) -> None:
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    scheduler.deliver_turn(task, "worker", turn, "writer-attached")
    assert scheduler.next_turn_deadline() is not None  # the stall window only, not now
    runtime = Scripted("delivered")
    scheduler.controller_pass(runtime=runtime)
    assert runtime.offered == [(turn, 0)]


# ─── a stall diagnostic before a Turn is declared stalled (seed 001) ───────────────


class Diagnosing(Delivering):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def diagnose_stall(self, task_id: str, role: str, turn_id: str) -> str | None:
        self.asked.append(turn_id)
        return f"{turn_id}: no output, process alive"


def test_yui_stall_diagnostic_comes_before_the_stall(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    scheduler.configure_turns(stall_window_ms=60_000, stall_diagnostic_ms=20_000)
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    runtime = Diagnosing()
    scheduler.controller_pass(runtime=runtime)  # delivered: progress now
    progress_at = clock.now
    assert scheduler.next_turn_deadline() == progress_at + 20_000
    clock.advance(20_000)
    report = scheduler.controller_pass(runtime=runtime)
    assert report.diagnosed == {task: {"worker": f"{turn}: no output, process alive"}}
    assert report.turns == {} and scheduler.active_turn(task, "worker") is not None
    assert scheduler.next_turn_deadline() == progress_at + 60_000
    scheduler.controller_pass(runtime=runtime)  # diagnosed once per stretch without progress
    assert runtime.asked == [turn]
    clock.set(progress_at + 60_000)
    assert scheduler.controller_pass(runtime=runtime).turns == {task: {"worker": "stalled"}}
    kinds = [type(e).__name__ for e in of_type(scheduler, TurnEvent) if e.turn_id == turn]
    assert kinds.index("TurnStallDiagnosed") < kinds.index("TurnStalled")
    (diagnosed,) = of_type(scheduler, TurnStallDiagnosed)
    assert (diagnosed.progress_at, diagnosed.cause) == (progress_at, "turns.stall_diagnostic")


def test_yui_late_pass_diagnoses_then_stalls_and_progress_restarts_the_diagnostic(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    scheduler.configure_turns(stall_window_ms=60_000)  # diagnostic: half of it
    task = scheduler.submit("job", id="t1")
    first = scheduler.start_turn(task, "worker")
    scheduler.deliver_turn(task, "worker", first, "delivered")
    clock.advance(30_000)
    scheduler.controller_pass()
    clock.advance(10_000)
    scheduler.progress_turn(task, "worker", first)  # progress answers the diagnostic
    turn = scheduler.active_turn(task, "worker")
    assert turn is not None and not turn.stall_diagnosed
    assert scheduler.next_turn_deadline() == clock.now + 30_000
    clock.advance(90_000)  # the next pass only comes after the whole stall window
    report = scheduler.controller_pass()
    assert report.diagnosed == {task: {"worker": None}}
    assert report.turns == {task: {"worker": "stalled"}}
    assert len(of_type(scheduler, TurnStallDiagnosed)) == 2
