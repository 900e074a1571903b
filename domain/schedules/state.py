"""A schedule's state, folded from its stream, and the world's index of live schedules.

:func:`evolve_schedule` folds ``cron:<name>`` into a :class:`CronSchedule`; the
``cron_schedules`` index keeps each live schedule's next tick, so a worker learns whether
any is due from a handful of numbers, never a read of the store (:func:`next_due`). A
removed schedule's stream is retired: compaction drops it from memory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from ..frozen import frozen, thawed
from ..tasks.evolve import InvalidTransition, evolves_stream
from ..world import World, register_indexer, register_retirer
from .events import (
    SCHEDULE_EVENT_TYPES,
    ScheduleEvent,
    ScheduleRecorded,
    ScheduleRemoved,
    ScheduleTicked,
)

ScheduleStatus = Literal["live", "removed"]
CRON_SCHEDULES = "cron_schedules"
"""The world index: each live schedule's name with its next tick (ms)."""


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """Everything known of one schedule after its events so far (a dispatch run's
    ``ScheduleState``, in :mod:`..runs.state`, is another thing: a task's run time)."""

    name: str
    kind: str
    phase: str
    version: int
    cron: str
    tz: str
    catch_up: bool
    status: ScheduleStatus
    next_at: float
    """The next tick a task is due for (scheduler ms)."""
    recorded_at: float
    memos: Any = None
    """What each tick's task starts with (read-only, as every container of a state)."""
    last_tick: float | None = None
    """The latest tick a task was submitted for."""
    submitted: int = 0
    """Tasks submitted since the schedule was recorded."""
    updated_at: float = 0
    events: int = 0
    """How many events made this state: the stream version."""

    @property
    def live(self) -> bool:
        """Not removed: it submits a task at each tick."""
        return self.status == "live"

    def to_dict(self) -> dict[str, Any]:
        """The schedule as plain JSON-ready data."""
        return {
            "name": self.name,
            "kind": self.kind,
            "phase": self.phase,
            "version": self.version,
            "cron": self.cron,
            "tz": self.tz,
            "catch_up": self.catch_up,
            "status": self.status,
            "next_at": self.next_at,
            "last_tick": self.last_tick,
            "submitted": self.submitted,
            "recorded_at": self.recorded_at,
            "memos": thawed(self.memos),
        }


def _live(state: Any, event: ScheduleEvent) -> CronSchedule:
    if not isinstance(state, CronSchedule) or not state.live:
        raise InvalidTransition(f"schedule {event.name}: {type(event).__name__} while not live")
    return state


@evolves_stream(*SCHEDULE_EVENT_TYPES)
def evolve_schedule(state: CronSchedule | None, event: ScheduleEvent) -> CronSchedule:
    """The schedule after ``event`` (``state`` is ``None`` before its first)."""
    events = (state.events if state is not None else 0) + 1
    if isinstance(event, ScheduleRecorded):
        # Recorded whole: a change, or a schedule set up again after its removal.
        return CronSchedule(
            name=event.name,
            kind=event.kind,
            phase=event.phase,
            version=event.version,
            cron=event.cron,
            tz=event.tz,
            catch_up=event.catch_up,
            status="live",
            next_at=event.next_at,
            recorded_at=event.at,
            memos=frozen(event.memos),
            updated_at=event.at,
            events=events,
        )
    live = _live(state, event)
    if isinstance(event, ScheduleTicked):
        return replace(
            live,
            next_at=event.next_at,
            last_tick=event.tick_at,
            submitted=live.submitted + event.submitted,
            updated_at=event.at,
            events=events,
        )
    if isinstance(event, ScheduleRemoved):
        return replace(live, status="removed", updated_at=event.at, events=events)
    raise InvalidTransition(f"schedule {event.name}: no evolve for {type(event).__name__}")


def index_schedules(world: World, event: Any, previous: Any, state: Any) -> None:
    """Keep ``world.indexes["cron_schedules"]``: each live schedule's next tick."""
    if not isinstance(state, CronSchedule):
        return
    index: dict[str, float] = world.indexes.setdefault(CRON_SCHEDULES, {})
    if state.live:
        index[state.name] = state.next_at
    else:
        index.pop(state.name, None)


register_indexer(index_schedules, task_streams=False, reacts_to=SCHEDULE_EVENT_TYPES)


def retired_schedule(world: World, stream_id: str, state: Any) -> bool | None:
    """A removed schedule is finished with (read back if set up again)."""
    return not state.live if isinstance(state, CronSchedule) else None


register_retirer(retired_schedule)


def live_schedules(world: World) -> dict[str, float]:
    """Each live schedule's name with its next tick."""
    index: dict[str, float] = world.indexes.get(CRON_SCHEDULES, {})
    return index


def next_due(world: World) -> float | None:
    """The earliest tick any live schedule is due at (``None``: no schedule)."""
    index = live_schedules(world)
    return min(index.values()) if index else None
