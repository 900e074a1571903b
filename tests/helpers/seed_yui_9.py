"""What the ninth-round yui tests (seeds 000 and 001: yui 0.6.4 -> 0.6.6,
``FileTaskController``, and yui 0.13.9 -> 0.14.0, Turns) share: the Leader wake windows,
a busy Leader's wakeup whose aggregation window just ended and what its found-busy
records say, and a runtime whose deliveries fail for some tasks. The tests are
tests/test_seed_yui_9_*.py; docs/seed-fidelity.md, "Round nine (yui)", says what
changed."""

from __future__ import annotations

from typing import Any

from helpers.probes import busy_leader, of_type
from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.turns.events import WakeupFoundBusy
from tasktrail.domain.turns.runtime import Runtime
from tasktrail.domain.turns.settings import TurnSettings

AGGREGATION = TurnSettings().aggregation_window_ms  # yui's LEADER_WAKE_AGGREGATION_MS
FORCE = TurnSettings().force_window_ms  # yui's LEADER_WAKE_FORCE_MS


def _found(scheduler: Scheduler) -> list[tuple[int, float | None]]:
    """Each WakeupFoundBusy as (attempt, ms from its record to its re-signal)."""
    return [
        (f.attempt, None if f.resignal_at is None else f.resignal_at - f.at)
        for f in of_type(scheduler, WakeupFoundBusy)
    ]


def _busy_wakeup(scheduler: Scheduler, clock: ManualClock, task_id: str = "t1") -> float:
    """A task whose Leader is busy with a delivered Turn and whose wakeup's aggregation
    window just ended; returns when the wakeup was first requested."""
    scheduler.submit("job", id=task_id)
    busy_leader(scheduler, task_id)
    first_at = clock.now
    scheduler.request_wakeup(task_id, "mail")
    clock.set(first_at + AGGREGATION)
    return first_at


class Failing(Runtime):
    """Delivering any Turn of a task in ``failing`` raises (its per-task pass fails)."""

    def __init__(self, *failing: str) -> None:
        self.failing = set(failing)

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if task_id in self.failing:
            raise RuntimeError(f"{task_id}: socket closed")
        return "delivered"
