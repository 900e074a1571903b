"""Turns (SPEC.md section 2): delivery retries with capped exponential backoff, their
exhaustion (turns.delivery_retry / turns.delivery_exhausted), and the delivered and held
outcomes."""

from __future__ import annotations

from typing import Any

from helpers.turns import running_task

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.turns.events import TurnDeliveryFailed, TurnFailed
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import retry_delay_ms

# ─── turns.delivery_retry / turns.delivery_exhausted ────────────────────────


def test_turn_delivery_retry_delay_is_capped_exponential() -> None:
    assert [retry_delay_ms(250, attempt) for attempt in range(6)] == [
        250,
        500,
        1000,
        2000,
        2000,
        2000,
    ]
    assert retry_delay_ms(100, 10) == 800  # 100 * 2**3: the exponent is capped at 3


def test_turn_retryable_delivery_is_retried_after_backoff(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    delays = []
    for outcome in ("not-ready", "runtime-unavailable", "not-ready", "not-ready", "not-ready"):
        decision = scheduler.deliver_turn(task, "worker", turn, outcome)
        assert decision.status == "retry" and decision.retry_at is not None
        delays.append(decision.retry_at - clock.now)
        clock.advance(decision.retry_at - clock.now)
    assert delays == [250, 500, 1000, 2000, 2000]
    assert scheduler.deliver_turn(task, "worker", turn, "delivered").status == "delivered"
    active = scheduler.active_turn(task, "worker")
    assert active is not None and active.status == "delivered" and active.retry_at is None


def test_turn_delivery_exhaustion_records_failure_and_ends_failed(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    scheduler.configure_turns(delivery_retry_limit=3)
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    statuses = [scheduler.deliver_turn(task, "worker", turn, "not-ready").status for _ in range(4)]
    assert statuses == ["retry", "retry", "retry", "failed"]
    failure, ended = scheduler.history(task)[-2:]
    assert isinstance(failure, TurnDeliveryFailed) and failure.attempts == 4
    assert failure.cause == "turns.delivery_exhausted"
    assert isinstance(ended, TurnFailed) and ended.reason == "delivery_exhausted"
    last = scheduler.roles(task)["worker"].last
    assert last is not None and last.status == "failed" and last.end_reason == "delivery_exhausted"


class Flaky(Runtime):
    """Delivers ``not-ready`` forever, counting attempts."""

    def __init__(self) -> None:
        self.attempts: list[int] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        self.attempts.append(attempt)
        return "not-ready"


def test_turn_pass_delivers_when_retry_is_due(scheduler: Scheduler, clock: ManualClock) -> None:
    scheduler.configure_turns(delivery_retry_limit=2)
    task = running_task(scheduler)
    scheduler.start_turn(task, "worker")
    runtime = Flaky()
    scheduler.controller_pass(runtime=runtime)  # first try: not-ready, retry at +250
    scheduler.controller_pass(runtime=runtime)  # not due yet: no try
    assert runtime.attempts == [0]
    clock.advance(250)
    scheduler.controller_pass(runtime=runtime)
    clock.advance(500)
    report = scheduler.controller_pass(runtime=runtime)
    assert runtime.attempts == [0, 1, 2]
    assert report.turns == {task: {"worker": "failed"}}


def test_turn_delivered_and_held_outcomes(scheduler: Scheduler) -> None:
    task = running_task(scheduler)
    turn = scheduler.start_turn(task, "worker")
    held = scheduler.deliver_turn(task, "worker", turn, "writer-attached")
    assert held.status == "held"
    active = scheduler.active_turn(task, "worker")
    assert active is not None and active.delivery_held and active.retry_at is None
    assert scheduler.deliver_turn(task, "worker", turn, "already-delivered").status == "delivered"
    head = scheduler.store.head()
    assert scheduler.deliver_turn(task, "worker", turn, "delivered").status == "unchanged"
    assert scheduler.store.head() == head
