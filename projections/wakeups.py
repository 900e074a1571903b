"""Pending Leader wakeups: per task, the first request, every reason, the deadlines.

``aggregation_deadline`` is when the wakeup is due while the Leader is idle;
``force_deadline`` when it is dispatched even though the Leader is busy. Both
come from the projection's :class:`~tasktrail.domain.turns.settings.TurnSettings` (the
documented defaults unless given); ``ReadModel.next_wakeup_deadline()`` picks
the one that applies from the live mirror's ``active_turns``.
"""

from __future__ import annotations

from typing import Any

import orjson

from tasktrail.domain import TaskEvent, World
from tasktrail.domain.turns.events import WakeupEvent
from tasktrail.domain.turns.folds import pending_wakeups
from tasktrail.domain.turns.settings import DEFAULT_TURN_SETTINGS, TurnSettings

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
            },
            pk="task_id",
            indexes=[("aggregation_deadline",), ("force_deadline",)],
            times=(
                "first_requested_at",
                "last_requested_at",
                "aggregation_deadline",
                "force_deadline",
            ),
        ),
    )

    def __init__(self, settings: TurnSettings = DEFAULT_TURN_SETTINGS) -> None:
        self.settings = settings

    def apply(
        self,
        changes: Changes,
        position: int,
        event: TaskEvent,
        before: Any,
        after: Any,
        world: World,
    ) -> None:
        if not isinstance(event, WakeupEvent):
            return
        wakeup = pending_wakeups(world).get(event.task_id)
        if wakeup is None:
            changes.delete("pending_wakeups", event.task_id)
            return
        first = wakeup.first_requested_at
        changes.upsert(
            "pending_wakeups",
            event.task_id,
            {
                "task_id": event.task_id,
                "reasons": orjson.dumps(list(wakeup.reasons)).decode(),
                "request_count": wakeup.request_count,
                "first_requested_at": first,
                "last_requested_at": wakeup.last_requested_at,
                "aggregation_deadline": first + self.settings.aggregation_window_ms,
                "force_deadline": first + self.settings.force_window_ms,
            },
        )
