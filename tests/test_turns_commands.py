"""Turns (SPEC.md section 2): what Turn commands leave in the store. Refused ones append
nothing (a closed scheduler and invalid settings refused too), and Turns survive a
reopen on every store."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from conftest import event_count
from helpers.turns import running_task

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Refused,
    Registry,
    RuleViolation,
    Scheduler,
)
from tasktrail.domain.turns.refusals import StaleCompletion
from tasktrail.domain.turns.settings import TurnSettings

# ─── refusals append nothing ────────────────────────────────────────────────

REFUSED: dict[str, Callable[[Scheduler, str, str], object]] = {
    "second_active": lambda s, t, turn: s.start_turn(t, "worker"),
    "blank_role": lambda s, t, turn: s.start_turn(t, " worker"),
    "unknown_task": lambda s, t, turn: s.start_turn("nope", "worker"),
    "bad_outcome": lambda s, t, turn: s.deliver_turn(t, "worker", turn, "lost"),
    "deliver_not_active": lambda s, t, turn: s.deliver_turn(t, "worker", "worker.9", "delivered"),
    "fail_not_active": lambda s, t, turn: s.fail_turn(t, "worker", "worker.9"),
    "progress_not_active": lambda s, t, turn: s.progress_turn(t, "other", "other.1"),
    "observe_no_turn": lambda s, t, turn: s.observe_exit(t, "other"),
    "bad_due_at": lambda s, t, turn: s.complete_turn(t, "worker", turn, due_at=float("nan")),
    "settle_nothing": lambda s, t, turn: s.settle_cleanup(t, "worker"),
}


@pytest.mark.parametrize("command", sorted(REFUSED))
def test_turn_refused_commands_append_nothing(scheduler: Scheduler, command: str) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    head = scheduler.store.head()
    with pytest.raises(Refused):
        REFUSED[command](scheduler, task, turn)
    assert scheduler.store.head() == head


def test_turn_closed_scheduler_refuses_turn_commands(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task = running_task(scheduler)
    scheduler.close()
    with pytest.raises(RuleViolation) as refused:
        scheduler.start_turn(task, "worker")
    assert refused.value.rule == 2


def test_turn_settings_are_validated() -> None:
    with pytest.raises(InvalidArgument):
        TurnSettings(aggregation_window_ms=0)
    with pytest.raises(InvalidArgument):
        TurnSettings(aggregation_window_ms=10_000, force_window_ms=5_000)
    with pytest.raises(InvalidArgument):
        TurnSettings(delivery_retry_limit=0)


# ─── on every store ─────────────────────────────────────────────────────────


def test_turns_survive_reopen_on_every_store(
    store_url: str, clock: ManualClock, registry: Registry
) -> None:
    scheduler = Scheduler.open(store_url, clock=clock, registry=registry)
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "leader")
    scheduler.deliver_turn(task, "leader", turn, "not-ready")
    scheduler.complete_turn(task, "leader", turn, due_at=clock.now + 1_000)
    scheduler.observe_exit(task, "leader")
    clock.advance(1_000)
    scheduler.controller_pass()
    with pytest.raises(StaleCompletion):
        scheduler.complete_turn(task, "leader", turn)
    worker = scheduler.start_turn(task, "worker")
    state = scheduler.task(task)
    written = scheduler.events_written
    scheduler.close()
    assert event_count(store_url) == written
    reopened = Scheduler.open(store_url, clock=clock, registry=registry)
    assert reopened.task(task) == state
    assert reopened.store.aggregate(task).state == state
    assert reopened.active_turn(task, "worker").turn_id == worker  # type: ignore[union-attr]
    reopened.close()
