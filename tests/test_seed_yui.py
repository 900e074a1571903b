"""yui's behaviour where tasktrail once differed (issue 16; seeds 000 and 001): each test
names the behaviour and fails when it breaks. The rules they hold are written down in
docs/seed-fidelity.md."""

from __future__ import annotations

from typing import Any

from tasktrail.domain import ManualClock, Scheduler, TaskEvent
from tasktrail.domain.turns.events import TurnDelivered, WakeupDispatched
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import TurnSettings
from tasktrail.domain.turns.state import LEADER

AGGREGATION = TurnSettings().aggregation_window_ms
FORCE = TurnSettings().force_window_ms
STALL = TurnSettings().stall_window_ms


def of_type(scheduler: Scheduler, cls: type[TaskEvent]) -> list[Any]:
    return [r.event for r in scheduler.store.read() if isinstance(r.event, cls)]


class Delivering(Runtime):
    """Delivers every Turn (``outcome``), remembering what it was handed."""

    def __init__(self, outcome: str = "delivered") -> None:
        self.outcome = outcome
        self.delivered: list[tuple[str, str, str]] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        self.delivered.append((task_id, role, turn_id))
        return self.outcome


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
    # Nothing is left for a later pass but the stall window.
    assert scheduler.next_turn_deadline() == clock.now + STALL


def test_yui_undelivered_turn_is_due_now(scheduler: Scheduler, clock: ManualClock) -> None:
    task = scheduler.submit("job", id="t1")
    started_at = clock.now
    turn = scheduler.start_turn(task, "worker")
    clock.advance(5_000)
    # A host sleeping until the deadline delivers it now, not at the stall window's end.
    assert scheduler.next_turn_deadline() == started_at
    scheduler.controller_pass(runtime=Delivering())
    assert scheduler.active_turn(task, "worker").status == "delivered"  # type: ignore[union-attr]
    assert scheduler.next_turn_deadline() == clock.now + STALL
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
