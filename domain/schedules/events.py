"""The events of a schedule, each on the schedule's own stream ``cron:<name>``.

:class:`ScheduleRecorded` sets a schedule up (or changes it: recorded whole), with the
first tick it is due at; :class:`ScheduleTicked` says which ticks a worker submitted a
task for and when the schedule is due next; :class:`ScheduleRemoved` ends it
(``unschedule``). Every time a decision computed from the cron expression is recorded
on the event (``next_at``), so the fold reads no cron parser and no time-zone table:
replay folds what the live scheduler decided. Importing this module registers them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..tasks.events import TaskEvent, register_event

STREAM_PREFIX = "cron:"
"""A schedule's stream id is this and its name (``schedule:`` is a task's run time's,
:mod:`..runs.identity`)."""


def schedule_stream_id(name: str) -> str:
    """The stream of the schedule named ``name``."""
    return STREAM_PREFIX + name


def tick_task_id(name: str, tick_at: float) -> str:
    """The id of the task a schedule's tick submits: the same on every worker, so a
    second submission of one tick is a taken id (rule 27)."""
    return f"sched:{name}:{int(tick_at)}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleEvent(TaskEvent):
    """Base of a schedule's events: scheduler-wide (``task_id`` empty), on the
    schedule's own stream."""

    task_stream: ClassVar[bool] = False

    name: str

    def stream_id(self) -> str:
        """The schedule's own stream."""
        return schedule_stream_id(self.name)


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleRecorded(ScheduleEvent):
    """A schedule was set up, or changed (recorded whole): a task of ``kind`` (at
    ``phase``, ``version``, with ``memos``) at each tick of ``cron`` read in ``tz``;
    ``catch_up``: after downtime, each missed tick (else the latest only). ``next_at``:
    its first tick, after the time it was recorded. ``actor``, ``why``: who and why."""

    command: ClassVar[str] = "schedule"

    kind: str
    phase: str
    version: int
    cron: str
    tz: str
    catch_up: bool
    next_at: float
    memos: Any = None
    actor: str | None = None
    why: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleTicked(ScheduleEvent):
    """A worker submitted the schedule's due ticks: ``submitted`` tasks, the latest for
    the tick at ``tick_at``; ``due_at`` was the earliest tick due (ticks from it to
    ``tick_at`` without a task were skipped: ``catch_up`` off, or past its bound).
    ``next_at``: the next tick, after the time this was decided."""

    command: ClassVar[str] = "tick"

    due_at: float
    tick_at: float
    submitted: int
    next_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleRemoved(ScheduleEvent):
    """The schedule was removed (``unschedule``): it submits nothing more."""

    command: ClassVar[str] = "unschedule"

    actor: str | None = None
    why: str | None = None


SCHEDULE_EVENT_TYPES: tuple[type[ScheduleEvent], ...] = (
    ScheduleRecorded,
    ScheduleTicked,
    ScheduleRemoved,
)
for _cls in SCHEDULE_EVENT_TYPES:
    register_event(_cls)
