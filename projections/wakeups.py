"""Pending Leader wakeups: per task, the first request, every reason, the deadlines.

``aggregation_deadline`` is when the wakeup is due while the Leader is idle;
``force_deadline`` when it is dispatched even though the Leader is busy;
``resignal_at`` when a pass that found the Leader busy signals it again,
``busy_turn_id`` the Leader Turn a pass last found busy and ``busy_attempts`` how often
passes found that Turn busy (none yet: the wakeup stays due at its aggregation end, as
yui's wake timer fires there; a row an earlier release wrote has no ``busy_turn_id``).
The first two
come from the Turn settings the log recorded (``configure_turns``; the documented
defaults until then), as the scheduler decided with them, and move when they change;
``ReadModel.next_wakeup_deadline(now)`` picks the one that applies from the live
mirror's ``active_turns``.
"""

from __future__ import annotations

from typing import Any

import orjson

from tasktrail.domain import TaskEvent, World
from tasktrail.domain.turns.events import TurnSettingsChanged, WakeupEvent
from tasktrail.domain.turns.folds import pending_wakeups
from tasktrail.domain.turns.settings import TurnSettings, turn_settings_of

from .base import Changes, Projection, TableSpec


class PendingWakeups(Projection):
    """One row per task with a pending Leader wakeup."""

    name = "pending_wakeups"
    coalesces = True  # rows are a function of each stream's current state
    tables = (
        TableSpec(
            "pending_wakeups",
            {
                "task_id": str,
                "reasons": str,
                "request_count": int,
                "first_requested_at": float,
                "last_requested_at": float,
                "aggregation_deadline": float,
                "force_deadline": float,
                "resignal_at": float,
                "busy_attempts": int,
                "busy_turn_id": str,
            },
            pk="task_id",
            indexes=[("aggregation_deadline",), ("force_deadline",)],
            times=(
                "first_requested_at",
                "last_requested_at",
                "aggregation_deadline",
                "force_deadline",
                "resignal_at",
            ),
        ),
    )

    def __init__(self, settings: TurnSettings | None = None) -> None:
        self.settings = settings
        """Fixed settings to compute deadlines with; ``None`` (the default): those the
        log recorded, as the scheduler decided with them."""

    def apply(
        self,
        changes: Changes,
        position: int,
        event: TaskEvent,
        before: Any,
        after: Any,
        world: World,
    ) -> None:
        if isinstance(event, TurnSettingsChanged):
            # The windows changed: every pending wakeup's deadlines move with them.
            for task_id in pending_wakeups(world):
                self._row(changes, world, task_id)
        elif isinstance(event, WakeupEvent):
            self._row(changes, world, event.task_id)

    def _row(self, changes: Changes, world: World, task_id: str) -> None:
        wakeup = pending_wakeups(world).get(task_id)
        if wakeup is None:
            changes.delete("pending_wakeups", task_id)
            return
        settings = self.settings if self.settings is not None else turn_settings_of(world)
        first = wakeup.first_requested_at
        changes.upsert(
            "pending_wakeups",
            task_id,
            {
                "task_id": task_id,
                "reasons": orjson.dumps(list(wakeup.reasons)).decode(),
                "request_count": wakeup.request_count,
                "first_requested_at": first,
                "last_requested_at": wakeup.last_requested_at,
                "aggregation_deadline": first + settings.aggregation_window_ms,
                "force_deadline": first + settings.force_window_ms,
                "resignal_at": wakeup.resignal_at,
                "busy_attempts": wakeup.busy_attempts,
                "busy_turn_id": wakeup.busy_turn_id,
            },
        )
