"""The events of controller passes: what one pass did, on its own stream
``pass:<pass id>`` (scheduler-wide ones have ``task_id`` :data:`SCHEDULER_WIDE`), and
a task's task-pass retries, on ``task-pass:<task id>``; each registered with its
stored topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..tasks.events import TaskEvent, register_event

SCHEDULER_WIDE = ""
"""The ``task_id`` of pass events that are about no one task."""

PASS_STREAM_PREFIX = "pass:"

TASK_PASS_STREAM_PREFIX = "task-pass:"


@dataclass(frozen=True, kw_only=True, slots=True)
class PassEvent(TaskEvent):
    """Base of the events of one controller pass, on its stream ``pass:<pass id>``."""

    task_stream: ClassVar[bool] = False
    pass_id: str

    def stream_id(self) -> str:
        """The pass's own stream."""
        return f"{PASS_STREAM_PREFIX}{self.pass_id}"


@dataclass(frozen=True, kw_only=True, slots=True)
class PassStarted(PassEvent):
    """A pass began: its scope (``full`` or ``dirty``), its keys, the tasks it
    covers (in order), its concurrency bound and the tasks a due retry added."""

    scope: str
    keys: tuple[str, ...]
    task_ids: tuple[str, ...]
    concurrency: int
    retried: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class PassTaskBlocked(PassEvent):
    """The task's runtime events failed: it is blocked for this pass."""

    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class PassTaskDeferred(PassEvent):
    """The task's projects ``project_ids`` are under maintenance: deferred, not failed."""

    project_ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class PassTaskFailed(PassEvent):
    """The per-task pass raised ``error``."""

    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class PassFinished(PassEvent):
    """The pass ended: which tasks it did, blocked, deferred, failed or skipped."""

    done: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()
    deferred: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskPassEvent(TaskEvent):
    """Base of a task's task-pass retry events, on ``task-pass:<task id>``."""

    task_stream: ClassVar[bool] = False
    pass_id: str | None = None

    def stream_id(self) -> str:
        """The task's retry stream."""
        return f"{TASK_PASS_STREAM_PREFIX}{self.task_id}"


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskPassRetryScheduled(TaskPassEvent):
    """The failed per-task pass runs again at ``retry_at`` (``attempt`` earlier retries)."""

    keys: tuple[str, ...]
    attempt: int
    retry_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskPassRetryAbandoned(TaskPassEvent):
    """The retry limit was reached: no more retries of this failure."""

    keys: tuple[str, ...]
    attempts: int


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskPassRetryCleared(TaskPassEvent):
    """The retry is no longer needed: ``succeeded``, or ``task_ended`` (the task ended
    or holds its outcome)."""

    why: str


PASS_EVENT_TYPES: tuple[type[TaskEvent], ...] = (
    PassStarted,
    PassTaskBlocked,
    PassTaskDeferred,
    PassTaskFailed,
    PassFinished,
    TaskPassRetryScheduled,
    TaskPassRetryAbandoned,
    TaskPassRetryCleared,
)

for _cls in PASS_EVENT_TYPES:
    register_event(_cls)
