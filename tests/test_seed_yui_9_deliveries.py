"""yui, ninth round (seeds 000 and 001: yui 0.6.4 -> 0.6.6 and yui 0.13.9 -> 0.14.0,
Turns): Turn deliveries. The exact mapping of delivery outcomes, a delivery retry limit
of one (exhaustion counts), and a delivery retry offered exactly at its time. Each test
names the seed behaviour it pins and fails when it breaks; docs/seed-fidelity.md, "Round
nine (yui)", says what changed."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.probes import Answers, of_type

from tasktrail.domain import InvalidArgument, ManualClock, Scheduler
from tasktrail.domain.turns.events import (
    TurnDelivered,
    TurnDeliveryFailed,
    TurnDeliveryHeld,
    TurnDeliveryRetryScheduled,
    TurnFailed,
)
from tasktrail.domain.turns.keys import task_key
from tasktrail.domain.turns.runtime import Runtime

# ─── exhaustion counts at a limit of one ────────────────────────────────────────────


def test_yui_delivery_limit_of_one_retries_once_then_fails_the_turn(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """000/001: a delivery retry limit of 1 is one retry: the first ``not-ready`` is
    retried after 250 ms, the second delivery's ``not-ready`` records the delivery
    failure (two deliveries) and ends the Turn ``failed``."""
    scheduler.configure_turns(delivery_retry_limit=1)
    scheduler.submit("job", id="t1")
    turn = scheduler.start_turn("t1", "worker")
    runtime = Answers("not-ready")
    scheduler.controller_pass([task_key("t1")], runtime=runtime)
    (retry,) = of_type(scheduler, TurnDeliveryRetryScheduled)
    assert (retry.attempt, retry.retry_at - retry.at) == (0, 250)
    clock.set(retry.retry_at)
    report = scheduler.controller_pass([task_key("t1")], runtime=runtime)
    assert report.turns == {"t1": {"worker": "failed"}}
    assert runtime.tried == [(turn, 0), (turn, 1)]
    (failure,) = of_type(scheduler, TurnDeliveryFailed)
    assert failure.attempts == 2
    (failed,) = of_type(scheduler, TurnFailed)
    assert (failed.turn_id, failed.reason) == (turn, "delivery_exhausted")


# ─── deadlines exactly at their time ────────────────────────────────────────────────


def test_yui_delivery_retry_is_offered_exactly_at_its_retry_time(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001: a Turn that was not ready is delivered again when its retry timer fires, at
    ``retry_at`` exactly; a pass a millisecond before does not offer it."""
    scheduler.submit("job", id="t1")
    turn = scheduler.start_turn("t1", "worker")
    runtime = Answers("not-ready")
    scheduler.controller_pass([task_key("t1")], runtime=runtime)
    (retry,) = of_type(scheduler, TurnDeliveryRetryScheduled)
    assert scheduler.next_turn_deadline() == retry.retry_at
    clock.set(retry.retry_at - 1)
    scheduler.controller_pass([task_key("t1")], runtime=runtime)
    assert runtime.tried == [(turn, 0)]
    clock.set(retry.retry_at)
    scheduler.controller_pass([task_key("t1")], runtime=runtime)
    assert runtime.tried == [(turn, 0), (turn, 1)]


# ─── delivery outcomes, each mapped exactly ─────────────────────────────────────────


class ByRole(Runtime):
    """Answers each role's delivery with the outcome named after it."""

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        return None if role == "silent" else role


def test_yui_each_delivery_outcome_maps_to_what_it_does_to_the_turn(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001 ``#scheduleDeliveryRetries``: ``delivered`` and ``already-delivered`` settle
    the Turn; ``not-ready`` and ``runtime-unavailable`` are retried (attempt 0, after
    250 ms); ``writer-attached`` (writer-blocked) and ``delivery-uncertain`` are neither
    settled nor retried, and use no attempt. A runtime that does not deliver records
    nothing (the Turn stays due); an outcome outside the six is refused, appending
    nothing."""
    outcomes = (
        "delivered",
        "already-delivered",
        "not-ready",
        "runtime-unavailable",
        "writer-attached",
        "delivery-uncertain",
    )
    scheduler.submit("job", id="t1")
    turns = {role: scheduler.start_turn("t1", role) for role in (*outcomes, "silent")}
    scheduler.controller_pass([task_key("t1")], runtime=ByRole())
    settled = {e.role for e in of_type(scheduler, TurnDelivered)}
    retried = {
        e.role: (e.attempt, e.retry_at - e.at)
        for e in of_type(scheduler, TurnDeliveryRetryScheduled)
    }
    held = {e.role for e in of_type(scheduler, TurnDeliveryHeld)}
    assert settled == {"delivered", "already-delivered"}
    assert retried == {"not-ready": (0, 250), "runtime-unavailable": (0, 250)}
    assert held == {"writer-attached", "delivery-uncertain"}
    state = {role: scheduler.active_turn("t1", role) for role in turns}
    assert {r for r, t in state.items() if t is not None and t.status == "delivered"} == settled
    for role in ("writer-attached", "delivery-uncertain", "silent"):
        turn = state[role]
        assert turn is not None and turn.status == "started" and turn.delivery_attempts == 0
    silent = state["silent"]
    assert silent is not None and silent.delivery_outcome is None
    assert scheduler.next_turn_deadline() == silent.started_at  # still due now
    head = scheduler.store.head()
    with pytest.raises(InvalidArgument):
        scheduler.deliver_turn("t1", "silent", turns["silent"], "lost")
    assert scheduler.store.head() == head


def test_yui_settled_answer_for_a_delivered_turn_records_nothing(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """001: ``delivered`` and ``already-delivered`` both settle; a Turn already
    delivered that is answered either way again is unchanged, nothing recorded."""
    scheduler.submit("job", id="t1")
    turn = scheduler.start_turn("t1", "worker")
    assert scheduler.deliver_turn("t1", "worker", turn, "delivered").status == "delivered"
    head = scheduler.store.head()
    for outcome in ("already-delivered", "delivered"):
        assert scheduler.deliver_turn("t1", "worker", turn, outcome).status == "unchanged"
    assert scheduler.store.head() == head
