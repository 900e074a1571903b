"""What the Turn rule tests (SPEC.md section 2) share: a store's events read back, a
Turn's events, a task to start Turns on and one finished. The tests are
tests/test_turns_one_active.py, _liveness.py, _delivery.py, _cleanup.py and
_commands.py."""

from __future__ import annotations

from tasktrail.domain import Scheduler, TaskEvent
from tasktrail.domain.turns.events import TurnEvent


def events_of(scheduler: Scheduler) -> list[TaskEvent]:
    """Every event in the store, in log order (read back, not from memory)."""
    return [recorded.event for recorded in scheduler.store.read()]


def turn_events(scheduler: Scheduler, turn_id: str) -> list[TaskEvent]:
    return [e for e in events_of(scheduler) if isinstance(e, TurnEvent) and e.turn_id == turn_id]


def running_task(scheduler: Scheduler, task_id: str = "t1") -> str:
    """A task left pending (Turns do not need its invocation)."""
    return scheduler.submit("job", id=task_id)


def finished_task(scheduler: Scheduler, task_id: str) -> str:
    scheduler.reserve(task_id)
    scheduler.finish(task_id, "completed")
    return task_id
