"""A due Turn completion is folded before anything else looks at the Turn (seed 001,
yui 0.14.0: due native Turn completions are folded first; tasktrail's
``turns.completion_due``), also where a pass would deliver the Turn and where a role is
stopped. docs/seed-fidelity.md, "Round five (Turns)", says what changed."""

from __future__ import annotations

import pytest
from helpers.probes import Answers, of_type

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.turns.events import (
    RuntimeCleanupRequired,
    TurnCompleted,
    TurnDelivered,
)
from tasktrail.domain.turns.refusals import TurnRuleViolation


@pytest.mark.parametrize("offered", ["never tried", "retry due", "held by another pass"])
def test_yui_turn_whose_completion_is_due_is_folded_not_delivered_again(
    scheduler: Scheduler, clock: ManualClock, offered: str
) -> None:
    # Seed 001: due Turn completions are folded before anything else looks at the Turn.
    # A Turn a pass would offer for delivery (never tried, its retry due, or held by an
    # earlier pass) whose completion is also due has finished: the pass folds the
    # completion and does not push its input to the runtime again.
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    if offered != "never tried":
        first = "not-ready" if offered == "retry due" else "writer-attached"
        scheduler.controller_pass(runtime=Answers(first))  # not-ready: retry at +250
    scheduler.complete_turn(task, "worker", turn, due_at=clock.now + 100)
    clock.advance(250)
    runtime = Answers("delivered")
    report = scheduler.controller_pass(runtime=runtime)
    assert runtime.tried == []
    assert of_type(scheduler, TurnDelivered) == []
    assert report.turns == {task: {"worker": "completed"}}
    (completed,) = of_type(scheduler, TurnCompleted)
    assert (completed.turn_id, completed.cause) == (turn, "turns.completion_due")


def test_yui_stopping_a_role_folds_its_turns_due_completion_first(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    # Seed 001: a due completion ends its Turn before anything else looks at it, as a
    # second start of the role finds (it folds the completion, then starts). Stopping
    # the role does the same: the Turn is completed, so the role is idle and stops.
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, "worker")
    scheduler.start_turn(task, "reviewer")  # stays active
    scheduler.complete_turn(task, "worker", turn, due_at=clock.now + 100)
    with pytest.raises(TurnRuleViolation) as early:  # not due yet: still active
        scheduler.stop_roles(task, ["worker"])
    assert early.value.rule == "cleanup.role_active"
    clock.advance(100)
    # A stop refused for another role's active Turn appends nothing, not even the fold.
    head = scheduler.store.head()
    with pytest.raises(TurnRuleViolation) as refused:
        scheduler.stop_roles(task, ["worker", "reviewer"])
    assert refused.value.rule == "cleanup.role_active"
    assert scheduler.store.head() == head
    assert scheduler.stop_roles(task, ["worker"]) == ["worker"]
    (completed,) = of_type(scheduler, TurnCompleted)
    assert (completed.turn_id, completed.cause) == (turn, "turns.completion_due")
    (required,) = of_type(scheduler, RuntimeCleanupRequired)
    assert (required.role, required.cause) == ("worker", "cleanup.role_stopped")
    assert scheduler.active_turn(task, "worker") is None
