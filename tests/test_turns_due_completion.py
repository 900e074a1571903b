"""A due Turn completion is folded before anything else looks at the Turn (seed 001,
yui 0.14.0: due native Turn completions are folded first; tasktrail's
``turns.completion_due``), also where a pass would deliver the Turn.
docs/seed-fidelity.md, "Round five (Turns)", says what changed."""

from __future__ import annotations

from typing import Any

import pytest

from tasktrail.domain import ManualClock, Scheduler, TaskEvent
from tasktrail.domain.turns.events import (
    TurnCompleted,
    TurnDelivered,
)
from tasktrail.domain.turns.runtime import Runtime


def of_type(scheduler: Scheduler, cls: type[TaskEvent]) -> list[Any]:
    return [r.event for r in scheduler.store.read() if isinstance(r.event, cls)]


class Answers(Runtime):
    """Answers every delivery with ``outcome``, noting (turn, attempt) of each."""

    def __init__(self, outcome: str) -> None:
        self.outcome = outcome
        self.tried: list[tuple[str, int]] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        self.tried.append((turn_id, attempt))
        return self.outcome


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
