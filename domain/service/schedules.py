"""Schedules: a task of a kind at each tick of a cron expression, one a tick across a
fleet (rules 26 and 27). Mixed into :class:`~..app.scheduler.Scheduler` as
:class:`ScheduleCommands`; a :class:`~..app.worker.Worker` calls
:meth:`~ScheduleCommands.submit_due_schedules` each tick, which reads only the world's
index of live schedules until one is due."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ConflictError, InvalidArgument, Refused, TaskIdTaken
from ..schedules import rules
from ..schedules.events import schedule_stream_id
from ..schedules.state import CronSchedule, live_schedules, next_due
from ..tasks.definitions import Registry
from ..world import World

if TYPE_CHECKING:
    from ..clock import Clock

T = TypeVar("T")
log = logging.getLogger("tasktrail.worker")


class ScheduleCommands:
    """``schedule``, ``unschedule``, ``schedules`` and the worker's
    ``submit_due_schedules``, mixed into :class:`~..app.scheduler.Scheduler`."""

    registry: Registry
    _schedule_refusals: dict[str, float] | None = None

    if TYPE_CHECKING:
        world: World
        clock: Clock
        closing: bool
        _lock: Any

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def now(self) -> float: ...
        def _catch_up(self) -> None: ...

    def schedule(
        self,
        name: str,
        kind: str,
        *,
        cron: str = "*/5 * * * *",
        tz: str = "UTC",
        memos: Mapping[str, Any] | None = None,
        catch_up: bool = False,
        phase: str | None = None,
        version: int | None = None,
        actor: str | None = None,
        reason: str | None = None,
    ) -> CronSchedule:
        """Submit a task of ``kind`` (with ``memos``) at each tick of ``cron`` read in the
        time zone ``tz``, on the scheduler clock; returns the schedule as recorded.

        A worker of the store submits each tick's task once, across the fleet (rule 27).
        After downtime, ``catch_up=False`` submits the latest missed tick only;
        ``catch_up=True`` each missed one, the latest 100 at most. ``phase`` and
        ``version`` default to the registered definition's first phase and version
        now (a scheduler without the definition must name the phase). Recording the same
        schedule again appends nothing; a changed one is recorded whole, due from now.
        Rule 26 refuses a cron expression or a time zone that does not read."""
        definition = self.registry.get(kind) if isinstance(kind, str) else None
        if phase is None:
            if definition is None or not definition.phases:
                raise InvalidArgument(
                    f"schedule({name!r}, {kind!r}) needs phase=...: "
                    "no registered definition names a first phase"
                )
            phase = next(iter(definition.phases))
        if version is None:
            version = definition.version if definition is not None else 1
        self._decide(
            rules.record_schedule,
            name=name,
            kind=kind,
            phase=phase,
            version=version,
            cron=cron,
            tz=tz,
            catch_up=catch_up,
            memos=memos,
            actor=actor,
            why=reason,
        )
        state: CronSchedule = self.world.stream(schedule_stream_id(name))
        return state

    def unschedule(self, name: str, *, actor: str | None = None, reason: str | None = None) -> None:
        """Remove the schedule ``name``: no tick submits a task after this (the tasks
        submitted stay). Rule 27 refuses a name no live schedule has."""
        self._decide(rules.remove_schedule, name, actor=actor, why=reason)

    def schedules(self) -> list[CronSchedule]:
        """The live schedules, by name (what other writers appended folded in)."""
        with self._lock:  # a command of another thread may be folding meanwhile
            self._catch_up()
            world = self.world
            names = sorted(live_schedules(world))
            return [world.stream(schedule_stream_id(name)) for name in names]

    def next_schedule_due(self) -> float | None:
        """The earliest tick a live schedule is due at (scheduler ms), or ``None``; a
        tick refused here is left to the other workers (:meth:`submit_due_schedules`)."""
        refused = self._refused_ticks()
        with self._lock:  # a command of another thread may be folding meanwhile
            if not refused:
                return next_due(self.world)
            live = live_schedules(self.world).items()
            due = [at for name, at in live if refused.get(name) != at]
        return min(due) if due else None

    def _refused_ticks(self) -> dict[str, float]:
        """The ticks the rules refused here, by schedule: this process's memory."""
        refused = self._schedule_refusals
        if refused is None:
            refused = self._schedule_refusals = {}
        return refused

    def submit_due_schedules(self) -> list[str]:
        """Submit the tasks of every schedule due now (rule 27); returns their ids. What
        it costs when none is due: a look at the live schedules' next ticks."""
        with self._lock:  # a command of another thread may be folding meanwhile
            due = next_due(self.world)
            if due is None or self.closing or due > (now := self.now()):
                return []
            schedules = sorted(live_schedules(self.world).items())
        submitted: list[str] = []
        refused = self._refused_ticks()
        for name, next_at in schedules:
            if next_at > now or refused.get(name) == next_at:
                continue
            try:
                submitted += self._decide(rules.tick_schedule, name)
            except (ConflictError, TaskIdTaken) as lost:
                # Another worker appended this tick first; the world is refreshed with it.
                log.debug("schedule %s: another worker submitted its tick (%s)", name, lost)
            except Refused as refusal:
                # Not asked again at every poll, nor fatal to the worker: passed over here
                # until the schedule changes (a fleet's other workers still try it).
                refused[name] = next_at
                log.warning("schedule %s: its tick was refused here: %s", name, refusal)
        for task_id in submitted:
            log.info("submitted %s", task_id)
        return submitted
