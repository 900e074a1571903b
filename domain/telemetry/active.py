"""The active-tasks counter (``tasktrail.tasks.active``) as pi-durable keeps it: per
process, ``+1`` for each live task a scheduler loads at open and each it submits,
``-1`` at the terminal outcome of a task it counted and, at close, for each it still
counts. So the counter never goes below zero, and a process adds nothing once closed.
"""

from __future__ import annotations

from typing import Any

from ..world import World


class ActiveTasks:
    """What one scheduler added to an up-down counter of active tasks."""

    def __init__(self) -> None:
        self.counter: Any = None
        """The counter :attr:`counted` was added to."""
        self.counted: dict[str, str] = {}
        """Tasks this process added to the counter, with their kinds."""

    def count_on(self, world: World, counter: Any) -> None:
        """Make ``counter`` the one counted on: what was counted on another is taken
        back from it, and the live tasks of ``world`` (those loaded) are added."""
        if counter is self.counter:
            return
        self.release()
        for task_id in list(world.live):
            task = world.get(task_id)
            if task is None:
                continue
            counter.add(1, {"task.kind": task.kind})
            self.counted[task_id] = task.kind
        self.counter = counter

    def submitted(self, task_id: str, kind: str) -> None:
        """A task submitted here: counted."""
        if self.counter is not None and task_id not in self.counted:
            self.counter.add(1, {"task.kind": kind})
            self.counted[task_id] = kind

    def ended(self, task_id: str) -> None:
        """A task ended: taken back, if it was counted here."""
        kind = self.counted.pop(task_id, None)
        if kind is not None and self.counter is not None:
            self.counter.add(-1, {"task.kind": kind})

    def release(self) -> None:
        """Take back everything counted (at close, or when the providers change)."""
        if self.counter is not None:
            for kind in self.counted.values():
                self.counter.add(-1, {"task.kind": kind})
        self.counted.clear()
        self.counter = None
