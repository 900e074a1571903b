"""The live mirror: every non-terminal task, the waiters index, the sleeping set,
the active Turns, and the restart limit in force.

One row per live task in ``live_tasks`` (a terminal task's row is deleted),
``waiters`` (who waits on whom, and how), ``sleeping`` (when each sleep is
due), ``active_turns`` (each role's open Turn), ``restart_limit`` (the limit the
log recorded last, one row; none: the default, 3). The ownership tree is
``live_tasks.owner_id``, indexed.
"""

from __future__ import annotations

from typing import Any

import orjson

from tasktrail.domain import TaskEvent, TaskState, World
from tasktrail.domain.tasks.restart_limit import RESTART_LIMIT_STREAM, RestartLimitChanged

from .base import Changes, Projection, TableSpec


def _json(value: Any) -> str | None:
    if value in (None, (), {}, []):
        return None
    return orjson.dumps(value).decode()


def live_row(task: TaskState) -> dict[str, Any]:
    """The ``live_tasks`` row of one task."""
    checkpoint = task.checkpoint
    return {
        "task_id": task.id,
        "kind": task.kind,
        "version": task.version,
        "status": task.status,
        "phase": checkpoint.phase if checkpoint is not None else None,
        "attempt": checkpoint.attempt if checkpoint is not None else None,
        "owner_id": task.owner_id,
        "conversation_id": task.conversation_id,
        "project_ids": _json(list(task.project_ids)),
        "mode": task.mode,
        "policy": task.policy,
        "waiting_on": _json(list(task.on)),
        "until": task.until,
        "outcome": task.outcome.status if task.outcome is not None else None,
        "restarts": task.restarts,
        "abort_requested": int(task.abort_requested),
        "abort_reason": task.abort_reason,
        "memos": _json(task.memos),
        "submitted_at": task.submitted_at,
        "updated_at": task.updated_at,
        "events": task.events,
    }


class LiveMirror(Projection):
    """Every non-terminal task with its state, who waits on whom, and who sleeps until when."""

    name = "live_mirror"
    coalesces = True  # rows are a function of each stream's current state
    tables = (
        TableSpec(
            "live_tasks",
            {
                "task_id": str,
                "kind": str,
                "version": int,
                "status": str,
                "phase": str,
                "attempt": int,
                "owner_id": str,
                "conversation_id": str,
                "project_ids": str,
                "mode": str,
                "policy": str,
                "waiting_on": str,
                "until": float,
                "outcome": str,
                "restarts": int,
                "abort_requested": int,
                "abort_reason": str,
                "memos": str,
                "submitted_at": float,
                "updated_at": float,
                "events": int,
            },
            pk="task_id",
            indexes=[("status",), ("owner_id",), ("kind", "status")],
            times=("until", "submitted_at", "updated_at"),
        ),
        TableSpec(
            "waiters",
            {"awaited_id": str, "waiter_id": str, "policy": str},
            pk=("awaited_id", "waiter_id"),
            indexes=[("waiter_id",)],
        ),
        TableSpec(
            "active_turns",
            {
                "task_id": str,
                "role": str,
                "turn_id": str,
                "status": str,
                "started_at": float,
                "progress_at": float,
                "delivery_outcome": str,
                "delivery_attempts": int,
                "completion_due_at": float,
            },
            pk=("task_id", "role"),
            indexes=[("role",)],
            times=("started_at", "progress_at", "completion_due_at"),
        ),
        TableSpec(
            "sleeping",
            {"task_id": str, "until": float, "abort_requested": int},
            pk="task_id",
            indexes=[("until",)],
            times=("until",),
        ),
        TableSpec(
            "restart_limit",
            {"stream": str, "restart_limit": int, "changed_at": float},
            pk="stream",
            times=("changed_at",),
        ),
    )

    def apply(
        self,
        changes: Changes,
        position: int,
        event: TaskEvent,
        before: Any,
        after: Any,
        world: World,
    ) -> None:
        if isinstance(event, RestartLimitChanged):
            # The limit in force (one row): what "parked" is measured against.
            changes.upsert(
                "restart_limit",
                RESTART_LIMIT_STREAM,
                {"stream": RESTART_LIMIT_STREAM, "restart_limit": after, "changed_at": event.at},
            )
            return
        if not isinstance(after, TaskState):
            return
        if isinstance(before, TaskState) and before.status == "waiting":
            for awaited in before.on:
                changes.delete("waiters", (awaited, before.id))
        roles = set(after.roles) | (set(before.roles) if isinstance(before, TaskState) else set())
        for role in sorted(roles):
            turn = after.roles[role].active if role in after.roles and after.live else None
            if turn is None:
                changes.delete("active_turns", (after.id, role))
                continue
            changes.upsert(
                "active_turns",
                (after.id, role),
                {
                    "task_id": after.id,
                    "role": role,
                    "turn_id": turn.turn_id,
                    "status": turn.status,
                    "started_at": turn.started_at,
                    "progress_at": turn.progress_at,
                    "delivery_outcome": turn.delivery_outcome,
                    "delivery_attempts": turn.delivery_attempts,
                    "completion_due_at": turn.completion_due_at,
                },
            )
        if not after.live:
            changes.delete("live_tasks", after.id)
            changes.delete("sleeping", after.id)
            return
        changes.upsert("live_tasks", after.id, live_row(after))
        if after.status == "waiting":
            for awaited in after.on:
                changes.upsert(
                    "waiters",
                    (awaited, after.id),
                    {"awaited_id": awaited, "waiter_id": after.id, "policy": after.policy},
                )
        if after.status == "sleeping":
            changes.upsert(
                "sleeping",
                after.id,
                {
                    "task_id": after.id,
                    "until": after.until,
                    "abort_requested": int(after.abort_requested),
                },
            )
        else:
            changes.delete("sleeping", after.id)
