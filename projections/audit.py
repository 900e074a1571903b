"""The audit trail: one row per event, with the status it moved a task from and to, and
for an operator's act (submit, abort, retry, fork, a setting) who did it and why
(``actor``, ``reason``). A fork is recorded as its ``TaskSubmitted`` and, in the same
decision, its ``TaskForked``: the first row is the act's (who forked and why), and says
``command = fork`` with the source and its position in its ``detail`` beside the
submission's fields; the second is the lineage (:func:`_name_the_fork`)."""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Callable
from typing import Any

import orjson

from tasktrail.domain import TaskEvent, TaskState, World
from tasktrail.domain.tasks.events import ACT_FIELDS

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
    "TaskForked": "fork",
    "TurnSettingsChanged": "configure_turns",
    "RunSettingsChanged": "configure_runs",
    "RestartLimitChanged": "configure_restarts",
}
_BY_RULE = {5: "release", 6: "cascade", 9: "open", 10: "close", 12: "reserve", 13: "reserve"}
_FAULT_REASONS = {"threw", "no_outcome", "no_decision", "unknown_phase", "step_limit", "timeout"}
_FAULT_REASONS |= {"retries_exhausted"}  # rule 23: the scheduler ends it, not the phase
_COMMON = {"at", "rule", "task_id"}


def command_of(event: TaskEvent) -> str:
    """The command (or the scheduler's own step) that recorded ``event``."""
    return _kind(type(event)).command_of(event)


def is_refusal(event: TaskEvent) -> bool:
    """Whether the event records a refused command (kept for the audit, never applied)."""
    return _kind(type(event)).refused


class _Kind:
    """What the audit needs of an event class, worked out once per class."""

    __slots__ = (
        "acts",
        "command",
        "declared",
        "detail",
        "detail_of",
        "ending",
        "forked",
        "name",
        "recovery",
        "refused",
    )

    def __init__(self, cls: type[TaskEvent]) -> None:
        name = cls.__name__
        declared = getattr(cls, "command", None)
        self.declared: str | None = declared if isinstance(declared, str) else None
        self.recovery = name == "TaskRecovered"
        self.ending = name == "TaskEnded"
        self.forked = name == "TaskForked"
        self.refused = bool(getattr(cls, "refusal", False)) or name.endswith("Refused")
        self.name = name
        names = tuple(f.name for f in dataclasses.fields(cls))
        self.acts = all(name in names for name in ACT_FIELDS)
        """Whether its events record an operator's act: the row's ``actor``, ``reason``."""
        self.detail = tuple(
            name for name in names if name not in _COMMON and not (self.acts and name in ACT_FIELDS)
        )
        """The fields the row's ``detail`` holds, in the order the stored payload has them."""
        # One C call reads them all (a tuple even for one field).
        self.detail_of: Callable[[Any], tuple[Any, ...]] | None = (
            None
            if not self.detail
            else operator.attrgetter(*self.detail)
            if len(self.detail) > 1
            else lambda event, _get=operator.attrgetter(self.detail[0]): (_get(event),)
        )
        if name in _COMMANDS:
            self.command = _COMMANDS[name]
        else:
            # Events of later modules: TurnStarted -> start_turn, RunMinted -> mint_run.
            words = re.findall(r"[A-Z][a-z]*", name)
            self.command = (
                "_".join(w.lower() for w in reversed(words[-2:]))
                if len(words) >= 2
                else name.lower()
            )

    def command_of(self, event: TaskEvent) -> str:
        """:func:`command_of` for an event of this class."""
        if self.declared is not None:
            return self.declared
        if event.rule in _BY_RULE and not self.recovery:
            return _BY_RULE[event.rule]
        if self.ending and getattr(event, "reason", None) in _FAULT_REASONS:
            return "run_pass"
        return self.command


_KINDS: dict[type[TaskEvent], _Kind] = {}


def _kind(cls: type[TaskEvent]) -> _Kind:
    kind = _KINDS.get(cls)
    if kind is None:
        kind = _KINDS[cls] = _Kind(cls)
    return kind


def _status(state: Any) -> str | None:
    status = getattr(state, "status", None)
    return status if isinstance(status, str) else None


class AuditTrail(Projection):
    """One row per event: position, time, task, type, status before and after, cause."""

    name = "audit"
    version = 2
    """2: a fork's acting row says ``fork`` and names its source (it said ``submit``)."""
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
                "actor": str,
                "reason": str,
            },
            pk="position",
            indexes=[("task_id", "position"), ("event_type",), ("at",), ("actor",)],
            times=("at",),
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
            status_before: str | None
            status_after: str | None
            status_before = status_after = task.status if task is not None else None
            if _status(after) is not None:
                status_before, status_after = _status(before), _status(after)
        else:
            status_before = before.status if before is not None else None
            status_after = after.status
        kind = _KINDS.get(type(event)) or _kind(type(event))
        detail_of = kind.detail_of
        # A row per position, never deleted: straight into the batch's rows.
        rows = changes.upserts.get("audit")
        if rows is None:
            rows = changes.upserts["audit"] = {}
        elif kind.forked:
            _name_the_fork(rows, event)
        rows[position] = {
            "position": position,
            "at": event.at,
            "task_id": event.task_id,
            "stream_id": event.stream_id(),
            "event_type": kind.name,
            "status_before": status_before,
            "status_after": status_after,
            "command": kind.command_of(event),
            "rule": event.rule,
            "refused": int(kind.refused),
            "detail": (
                orjson.dumps(dict(zip(kind.detail, detail_of(event), strict=True))).decode()
                if detail_of is not None
                else None
            ),
            "actor": event.actor if kind.acts else None,  # type: ignore[attr-defined]
            "reason": event.why if kind.acts else None,  # type: ignore[attr-defined]
        }


def _name_the_fork(rows: dict[Any, dict[str, Any]], forked: Any) -> None:
    """A fork's ``TaskForked`` follows its ``TaskSubmitted`` in the same decision, so the
    last row written is the submission's (the projector never ends a batch between the
    two, :func:`amends_previous`): that row, the act, says ``fork`` and names the source
    and its position, as the lineage row does."""
    submitted = rows[next(reversed(rows))]
    if submitted["task_id"] != forked.task_id or submitted["event_type"] != "TaskSubmitted":
        return  # not the fork's submission (a log cut or damaged between them)
    detail = orjson.loads(submitted["detail"] or "{}")
    detail["source_id"], detail["source_position"] = forked.source_id, forked.source_position
    rows[submitted["position"]] = {
        **submitted,
        "command": "fork",
        "detail": orjson.dumps(detail).decode(),
    }


def amends_previous(event: TaskEvent) -> bool:
    """Whether the audit row of ``event`` rewrites the row of the event before it (a
    fork's ``TaskForked``, its ``TaskSubmitted``): a batch of the projector does not
    end between the two."""
    return _kind(type(event)).forked
