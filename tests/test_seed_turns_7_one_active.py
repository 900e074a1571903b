"""yui's Turns, seventh round (seed 001, yui 0.13.9 -> 0.14.0): one active Turn per role
(an undelivered Turn keeps its role busy; a completion naming any Turn but the active
one is stale). Each test names the seed function it follows and fails when the behaviour
breaks. docs/seed-fidelity.md, "Round seven (Turns: delivery outcomes, retries, force
windows)", says what changed."""

from __future__ import annotations

import pytest
from helpers.probes import Answers, of_type
from helpers.seed_turns_7 import AGGREGATION

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.turns.events import TurnCompleted, TurnCompletionRefused, WakeupFoundBusy
from tasktrail.domain.turns.refusals import StaleCompletion, TurnRuleViolation
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.state import LEADER

# ─── one active Turn per role ───────────────────────────────────────────────────


@pytest.mark.parametrize("outcome", ["not-ready", "writer-attached", "delivery-uncertain"])
def test_yui_undelivered_turn_keeps_its_role_busy(
    scheduler: Scheduler, clock: ManualClock, outcome: str
) -> None:
    """001 ``getActiveTurn(taskId, role) !== null`` is what makes a role busy (a second
    start refused, ``stopTaskRoleSessions`` refused with "Role has an active Turn", a
    wake found ``busy``), delivered or not: a Turn waiting for a retry or held counts."""
    task = scheduler.submit("job", id="t1")
    turn = scheduler.start_turn(task, LEADER)
    scheduler.controller_pass(runtime=Answers(outcome))
    head = scheduler.store.head()
    with pytest.raises(TurnRuleViolation) as second:
        scheduler.start_turn(task, LEADER)
    assert second.value.rule == "turns.one_active" and turn in str(second.value)
    with pytest.raises(TurnRuleViolation) as stop:
        scheduler.stop_roles(task, [LEADER])
    assert stop.value.rule == "cleanup.role_active"
    assert scheduler.store.head() == head
    scheduler.request_wakeup(task, "a")
    clock.advance(AGGREGATION)
    assert scheduler.controller_pass(runtime=Runtime()).wakeups == {task: "busy"}
    (found,) = of_type(scheduler, WakeupFoundBusy)
    assert found.turn_id == turn


def test_yui_completion_naming_any_turn_but_the_active_one_is_stale(
    scheduler: Scheduler,
) -> None:
    """SPEC section 2 / 001 (completions name their Turn): a completion of a Turn that
    is not the role's active one, whether a later number, another role's Turn or a
    role with no Turn, is recorded as refused with the active Turn it met, and the
    active Turn is left as it was."""
    task = scheduler.submit("job", id="t1")
    active = scheduler.start_turn(task, "worker")
    for role, named in (("worker", "worker.2"), ("worker", "leader.1"), (LEADER, active)):
        with pytest.raises(StaleCompletion):
            scheduler.complete_turn(task, role, named)
    refused = of_type(scheduler, TurnCompletionRefused)
    assert [(r.role, r.turn_id, r.active_turn_id, r.cause) for r in refused] == [
        ("worker", "worker.2", active, "turns.stale_completion"),
        ("worker", "leader.1", active, "turns.stale_completion"),
        (LEADER, active, None, "turns.stale_completion"),
    ]
    turn = scheduler.active_turn(task, "worker")
    assert turn is not None and (turn.turn_id, turn.status) == (active, "started")
    assert of_type(scheduler, TurnCompleted) == []


def test_yui_stale_completion_folds_the_active_turns_due_completion_first(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001: due native Turn completions are folded before anything else looks at the
    Turn. A stale completion that meets an active Turn whose completion is due folds
    it first, then is refused naming no active Turn."""
    task = scheduler.submit("job", id="t1")
    active = scheduler.start_turn(task, "worker")
    scheduler.complete_turn(task, "worker", active, due_at=clock.now + 10)
    clock.advance(10)
    with pytest.raises(StaleCompletion) as stale:
        scheduler.complete_turn(task, "worker", "worker.7")
    assert stale.value.active_turn_id is None
    (completed,) = of_type(scheduler, TurnCompleted)
    (refused,) = of_type(scheduler, TurnCompletionRefused)
    assert (completed.turn_id, completed.cause) == (active, "turns.completion_due")
    assert (refused.turn_id, refused.active_turn_id) == ("worker.7", None)
