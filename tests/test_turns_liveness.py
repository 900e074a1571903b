"""Turns (SPEC.md section 2): completion before liveness (turns.completion_due: a due
completion wins over an exit or a stall) and stalls (turns.stall_window)."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.turns import events_of, running_task, turn_events

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.turns.events import TurnExited, TurnObservationDropped, TurnStalled
from tasktrail.domain.turns.keys import role_key
from tasktrail.domain.turns.refusals import TurnRuleViolation
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import TurnSettings

# ─── turns.completion_due: completion before liveness ───────────────────────


def test_turn_due_completion_wins_over_exit_in_one_pass(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    assert scheduler.complete_turn(task, "worker", turn, due_at=clock.now + 2_000) == "pending"
    assert scheduler.observe_exit(task, "worker") == "observed"
    clock.advance(2_000)
    report = scheduler.controller_pass()
    assert report.turns == {task: {"worker": "completed"}}
    role = scheduler.roles(task)["worker"]
    assert role.active is None and role.last is not None and role.last.status == "completed"
    kinds = [type(e) for e in turn_events(scheduler, turn)]
    assert TurnExited not in kinds
    dropped = [e for e in turn_events(scheduler, turn) if isinstance(e, TurnObservationDropped)]
    assert [(d.kind, d.cause, d.pass_id) for d in dropped] == [
        ("exit", "turns.completion_wins", report.pass_id)
    ]


def test_turn_due_completion_wins_over_stall(scheduler: Scheduler, clock: ManualClock) -> None:
    scheduler.configure_turns(stall_window_ms=10_000)
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    scheduler.complete_turn(task, "worker", turn, due_at=clock.now + 10_000)
    scheduler.observe_stall(task, "worker")
    clock.advance(10_000)  # the stall window has passed too
    scheduler.controller_pass([role_key(task, "worker")])
    assert scheduler.roles(task)["worker"].last.status == "completed"  # type: ignore[union-attr]
    assert not any(isinstance(e, TurnStalled) for e in events_of(scheduler))


def test_turn_exit_without_due_completion_ends_exited(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    scheduler.complete_turn(task, "worker", turn, due_at=clock.now + 5_000)
    scheduler.observe_exit(task, "worker", turn)
    clock.advance(1_000)  # the completion is not due yet: liveness judges the exit
    report = scheduler.controller_pass()
    assert report.turns == {task: {"worker": "exited"}}
    # A later observation naming the ended Turn is dropped, and the drop recorded.
    assert scheduler.observe_exit(task, "worker", turn) == "dropped"
    last = scheduler.history(task)[-1]
    assert isinstance(last, TurnObservationDropped) and last.cause == "turns.not_active"


def test_turn_fail_refused_while_completion_due(scheduler: Scheduler, clock: ManualClock) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    scheduler.complete_turn(task, "worker", turn, due_at=clock.now + 100)
    clock.advance(100)
    head = scheduler.store.head()
    with pytest.raises(TurnRuleViolation) as refused:
        scheduler.fail_turn(task, "worker", turn)
    assert refused.value.rule == "turns.completion_wins"
    assert scheduler.store.head() == head
    # Starting the next Turn folds the due completion first.
    assert scheduler.start_turn(task, "worker") == "worker.2"
    assert scheduler.roles(task)["worker"].last.status == "completed"  # type: ignore[union-attr]


class Uncertain(Runtime):
    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        return "delivery-uncertain"


def test_turn_delivery_uncertain_is_exempt_from_exit_in_that_pass(
    scheduler: Scheduler,
) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    scheduler.observe_exit(task, "worker", turn)
    first = scheduler.controller_pass(runtime=Uncertain())
    assert first.turns == {}
    assert scheduler.active_turn(task, "worker") is not None
    # A later pass offers the held Turn again (yui); answered otherwise, the exit stands.
    second = scheduler.controller_pass(runtime=Runtime())
    assert second.turns == {task: {"worker": "exited"}}


# ─── turns.stall_window ─────────────────────────────────────────────────────


def test_turn_without_progress_for_stall_window_ends_stalled(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    scheduler.configure_turns(stall_window_ms=60_000)
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    clock.advance(50_000)
    scheduler.progress_turn(task, "worker", turn)
    clock.advance(59_999)
    assert scheduler.controller_pass().turns == {}  # progress restarted the window
    clock.advance(1)
    report = scheduler.controller_pass()
    assert report.turns == {task: {"worker": "stalled"}}
    stalled = scheduler.history(task)[-1]
    assert isinstance(stalled, TurnStalled) and stalled.cause == "turns.stall_window"
    assert stalled.progress_at == clock.now - 60_000


def test_turn_stall_window_default_is_thirty_minutes() -> None:
    assert TurnSettings().stall_window_ms == 30 * 60_000
