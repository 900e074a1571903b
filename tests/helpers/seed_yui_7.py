"""What the seventh-round yui pass tests (seed 000, yui 0.6.4 -> 0.6.6,
``FileTaskController``) share: tasks with Turns due for delivery, and a runtime whose
drains and deliveries a test scripts. The tests are tests/test_seed_yui_7_*.py;
docs/seed-fidelity.md, "Round seven (yui passes: concurrency, backoff, blocked tasks)",
says what changed."""

from __future__ import annotations

import threading
from typing import Any

from tasktrail.domain import Scheduler
from tasktrail.domain.turns.runtime import Runtime


def with_turns(scheduler: Scheduler, *ids: str, roles: tuple[str, ...] = ("worker",)) -> None:
    """Tasks with an undelivered Turn per role (due for delivery now)."""
    for task_id in ids:
        scheduler.submit("job", id=task_id)
        for role in roles:
            scheduler.start_turn(task_id, role)


class Scripted(Runtime):
    """A runtime whose drain notes each visit and runs ``on_drain(task_id, visit)``
    first; the runtime events of ``unreadable`` tasks cannot be applied, and delivering
    a Turn of a ``(task, role)`` in ``refusing`` raises."""

    def __init__(self, on_drain: Any = None) -> None:
        self.on_drain = on_drain
        self.unreadable: set[str] = set()
        self.refusing: set[tuple[str, str]] = set()
        self.drained: list[str] = []
        self.delivered: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def drain(self, scheduler: Any, task_id: str) -> None:
        with self._lock:
            self.drained.append(task_id)
            visit = self.drained.count(task_id)
        if self.on_drain is not None:
            self.on_drain(task_id, visit)
        if task_id in self.unreadable:
            raise ConnectionError(f"runtime events of {task_id} unreadable")

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if (task_id, role) in self.refusing:
            raise RuntimeError(f"{role} of {task_id}: socket closed")
        with self._lock:
            self.delivered.append((task_id, role))
        return "delivered"
