"""The audit trail: one row per event, with the status it moved a task from and to."""

from __future__ import annotations

import re
from typing import Any

import orjson

from tasktrail.domain import TaskEvent, TaskState, World
from tasktrail.domain.events import event_payload

from .base import Changes, Projection, TableSpec

_COMMANDS = {
    "TaskSubmitted": "submit",
    "TaskReserved": "reserve",
    "TaskMigrated": "reserve",
    "CheckpointCommitted": "checkpoint",
    "MemoRecorded": "memo",
    "WaitStarted": "wait",
    "SleepStarted": "sleep",
    "OutcomeHeld": "finish",
    "TaskEnded": "finish",
    "AbortMarked": "abort",
    "TaskRecovered": "open",
    "TaskStopped": "close",
    "RestartsCleared": "retry",
}
_BY_RULE = {5: "release", 6: "cascade", 9: "open", 10: "close", 12: "reserve", 13: "reserve"}
_FAULT_REASONS = {"threw", "no_outcome", "no_decision", "unknown_phase", "step_limit"}
_COMMON = {"at", "rule", "task_id"}


def command_of(event: TaskEvent) -> str:
    """The command (or the scheduler's own step) that recorded ``event``."""
    declared = getattr(type(event), "command", None)
    if isinstance(declared, str):
        return declared
    name = type(event).__name__
    if event.rule in _BY_RULE and name != "TaskRecovered":
        return _BY_RULE[event.rule]
    if name == "TaskEnded" and getattr(event, "reason", None) in _FAULT_REASONS:
        return "run_pass"
    if name in _COMMANDS:
        return _COMMANDS[name]
    # Events of later modules: TurnStarted -> start_turn, RunMinted -> mint_run.
    words = re.findall(r"[A-Z][a-z]*", name)
    return "_".join(w.lower() for w in reversed(words[-2:])) if len(words) >= 2 else name.lower()


def is_refusal(event: TaskEvent) -> bool:
    """Whether the event records a refused command (kept for the audit, never applied)."""
    return bool(getattr(type(event), "refusal", False)) or type(event).__name__.endswith("Refused")


def _status(state: Any) -> str | None:
    status = getattr(state, "status", None)
    return status if isinstance(status, str) else None


class AuditTrail(Projection):
    """One row per event: position, time, task, type, status before and after, cause."""

    name = "audit"
    tables = (
        TableSpec(
            "audit",
            {
                "position": int,
                "at": float,
                "task_id": str,
                "stream_id": str,
                "event_type": str,
                "status_before": str,
                "status_after": str,
                "command": str,
                "rule": int,
                "refused": int,
                "detail": str,
            },
            pk="position",
            indexes=[("task_id", "position"), ("event_type",), ("at",)],
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
        if not isinstance(after, TaskState):
            task = world.get(event.task_id)
            status_before = status_after = task.status if task is not None else None
            if _status(after) is not None:
                status_before, status_after = _status(before), _status(after)
        else:
            status_before, status_after = _status(before), after.status
        detail = {k: v for k, v in event_payload(event).items() if k not in _COMMON}
        changes.upsert(
            "audit",
            position,
            {
                "position": position,
                "at": event.at,
                "task_id": event.task_id,
                "stream_id": event.stream_id(),
                "event_type": type(event).__name__,
                "status_before": status_before,
                "status_after": status_after,
                "command": command_of(event),
                "rule": event.rule,
                "refused": int(is_refusal(event)),
                "detail": orjson.dumps(detail).decode() if detail else None,
            },
        )
