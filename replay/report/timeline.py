"""The report's timeline as data: rows of bars and marks on the scheduler clock.

:class:`TimelineBuilder` is fed each folded event with the state before and after it
(it runs as a projection inside the one fold, :func:`tasktrail.replay.fold`), and
keeps, per task, one row with lanes: ``task`` (a bar per stay: pending, running at a
phase, waiting, sleeping, holding an outcome), ``role:NAME`` (a bar per Turn; Leader
wakeups and runtime cleanups as marks) and ``runs`` (a bar per dispatch run). Marks
are the moments: abort marks, crashes and recoveries, closes, retries, parking,
refusals, the outcome. Waits become arrows to the tasks awaited. Nothing here formats
HTML (see :mod:`.page`); every string is kept as the task recorded it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tasktrail.domain import TaskEvent, TaskState, World
from tasktrail.domain.tasks.definitions import parked
from tasktrail.domain.tasks.describe import format_at
from tasktrail.domain.tasks.restart_limit import restart_limit_of
from tasktrail.projections import Changes, Projection
from tasktrail.projections.audit import is_refusal

from .stays import (
    RUNS_LANE,
    TASK_LANE,
    Bar,
    Mark,
    brief,
    role_lane,
    stay_bar,
    stay_key,
    words,
)


@dataclass
class Arrow:
    """A wait: from the waiter at the wait's start to the task awaited, at the moment it
    ended (or the report's end)."""

    from_task: str
    at: float
    to_task: str
    policy: str
    position: int
    to_at: float | None = None


@dataclass
class Row:
    """One task of the timeline and everything drawn in its lanes."""

    task_id: str
    kind: str
    owner_id: str | None
    order: int
    lanes: list[str] = field(default_factory=lambda: [TASK_LANE])
    bars: list[Bar] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    ended_at: float | None = None
    """When its outcome was decided (held or ended)."""
    depth: int = 0
    context: bool = False
    """Shown because a task of the tree awaited it, not part of the tree itself."""

    def lane(self, name: str) -> str:
        if name not in self.lanes:
            self.lanes.append(name)
        return name


@dataclass
class Timeline:
    """The finished timeline: rows in tree order, arrows, and the clock range."""

    rows: list[Row]
    arrows: list[Arrow]
    start: float
    end: float
    hidden: int = 0
    """Tasks left out by the row cap."""
    clock: float | None = None
    """The time of the last event folded, drawn or not."""


class TimelineBuilder(Projection):
    """Folds events into :class:`Row` s; a projection with no tables, so the replay fold
    that builds the report's state builds its timeline in the same pass."""

    name = "timeline"

    def __init__(self, accept: Callable[[str], bool], restart_limit: int | None) -> None:
        self.accept = accept
        self.restart_limit = restart_limit
        """What "parked" is measured against; ``None``: the limit the log recorded as of
        each event, as the scheduler decided with it."""
        self.rows: dict[str, Row] = {}
        self.arrows: list[Arrow] = []
        self.hidden = 0
        self.first_at: float | None = None
        self.last_at: float | None = None
        self.clock: float | None = None
        self._stays: dict[str, tuple[tuple[Any, ...], Bar]] = {}
        self._open: dict[tuple[str, str], Bar] = {}

    def apply(
        self,
        changes: Changes,
        position: int,
        event: TaskEvent,
        before: Any,
        after: Any,
        world: World,
    ) -> None:
        task_id = event.task_id
        self.clock = event.at if self.clock is None else max(self.clock, event.at)
        row = self.rows.get(task_id)
        if row is None:
            if not isinstance(after, TaskState) or before is not None:
                return
            if not self.accept(task_id):
                self.hidden += 1
                return
            row = self.rows[task_id] = Row(task_id, after.kind, after.owner_id, len(self.rows))
        self.first_at = event.at if self.first_at is None else min(self.first_at, event.at)
        self.last_at = event.at if self.last_at is None else max(self.last_at, event.at)
        name = type(event).__name__
        if name.startswith("Turn"):
            self._turn(row, name, position, event)
        elif name.startswith("Wakeup") or name.startswith("RuntimeCleanup"):
            lane = role_lane(getattr(event, "role", "leader"))
            css = "wakeup" if name[0] == "W" else "cleanup"
            self._mark(row, lane, css, words(name), position, event)
        elif name.startswith("Run") or name == "ScheduleSet":
            self._run(row, name, position, event)
        elif isinstance(after, TaskState) and type(event).task_stream:
            limit = self.restart_limit
            self._task(row, name, position, event, after, limit or restart_limit_of(world))
        elif name in ("PassTaskBlocked", "PassTaskDeferred", "PassTaskFailed") or (
            name.startswith("TaskPassRetry")
        ):
            self._mark(row, TASK_LANE, "pass", words(name), position, event)
        elif is_refusal(event):
            label = words(name)
            self._mark(row, TASK_LANE, "refusal", label, position, event, note=label)

    # ─── the task lane: stays and the moments between them ──────────────────

    def _task(
        self, row: Row, name: str, position: int, event: Any, after: TaskState, limit: int
    ) -> None:
        task_id = row.task_id
        row.kind = after.kind
        if name == "TaskRecovered":
            self._end_stay(task_id, event.at, "interrupted")
            worker = f" of worker {event.worker}" if event.worker else ""
            label = f"crash{worker}: recovered, restarts={event.restarts} (rule 9)"
            note = f"crash, restart {event.restarts}"
            if parked(after, limit):
                note += ": parked"
            self._mark(row, TASK_LANE, "crash", label, position, event, note=note)
            if parked(after, limit):
                label = f"parked: restarts {after.restarts} >= restart_limit {limit}"
                self._mark(row, TASK_LANE, "parked", label, position, event)
        elif name == "TaskStopped":
            self._end_stay(task_id, event.at, "stopped")
            self._mark(row, TASK_LANE, "stop", "closed: pending again (rule 10)", position, event)
        elif name == "AbortMarked":
            label = "abandoned on restart" if event.reason == "restart" else "abort mark"
            if event.by:
                label += f", cascaded from {event.by} (rule 6)"
            self._mark(row, TASK_LANE, "abort", label, position, event)
        elif name == "RestartsCleared":
            self._mark(row, TASK_LANE, "retry", "retry: restarts cleared", position, event)
        elif name == "MemoRecorded":
            self._mark(row, TASK_LANE, "note", f"memo {event.name}", position, event)
        elif name == "TaskMigrated":
            label = f"migrated v{event.from_version} -> v{event.to_version}"
            self._mark(row, TASK_LANE, "note", label, position, event)
        elif name == "WaitStarted":
            for awaited in event.on:
                self.arrows.append(Arrow(task_id, event.at, awaited, event.policy, position))
        if after.status in ("completing", "terminal") and row.ended_at is None:
            row.ended_at = event.at
        if after.status == "terminal":
            self._end_stay(task_id, event.at)
            outcome = after.outcome
            status = outcome.status if outcome is not None else "ended"
            why = (outcome.message or outcome.reason) if outcome is not None else None
            note = f"{status}: {why}" if why else status
            self._mark(row, TASK_LANE, "end", note, position, event, state=status, note=note)
            return
        key = stay_key(after)
        current = self._stays.get(task_id)
        if current is not None and current[0] == key:
            current[1].details.append(("event", brief(event)))
            return
        self._end_stay(task_id, event.at)
        bar = stay_bar(after, event, position, parked(after, limit))
        row.bars.append(bar)
        self._stays[task_id] = (key, bar)

    def _end_stay(self, task_id: str, at: float, state: str = "") -> None:
        current = self._stays.pop(task_id, None)
        if current is not None:
            current[1].end = at
            if state:
                current[1].state = state

    # ─── Turns, runs and the other lanes ────────────────────────────────────

    def _turn(self, row: Row, name: str, position: int, event: Any) -> None:
        lane = row.lane(role_lane(event.role))
        key = (row.task_id, f"turn:{event.turn_id}")
        if name == "TurnStarted":
            started = Bar(lane, event.at, "turn", event.turn_id, position, state="active")
            started.details += [("event", brief(event))]
            row.bars.append(started)
            self._open[key] = started
            return
        bar = self._open.get(key)
        ended = {"TurnCompleted", "TurnFailed", "TurnExited", "TurnStalled"}
        if bar is not None and name in ended:
            bar.end = event.at
            bar.state = name.removeprefix("Turn").lower()
            bar.details.append(("ended", brief(event)))
            if bar.state != "completed":
                bar.note = f"Turn {bar.state}"
            del self._open[key]
            return
        if name == "TurnCompletionRefused" or name == "TurnObservationDropped":
            label = words(name)
            self._mark(row, lane, "refusal", label, position, event, note=label)
        elif name in ("TurnDeliveryRetryScheduled", "TurnDeliveryFailed", "TurnDeliveryHeld"):
            self._mark(row, lane, "retry", words(name), position, event)
        elif bar is not None:
            bar.details.append(("event", brief(event)))
        else:
            self._mark(row, lane, "note", words(name), position, event)

    def _run(self, row: Row, name: str, position: int, event: Any) -> None:
        lane = row.lane(RUNS_LANE)
        if name == "ScheduleSet":
            when = format_at(event.run_at) if event.run_at is not None else "none"
            self._mark(row, lane, "note", f"scheduled for {when}", position, event)
            return
        key = (row.task_id, f"run:{event.run_id}")
        if name == "RunMinted":
            label = f"{event.day} #{event.attempt} ({event.trigger})"
            minted = Bar(lane, event.at, "run", label, position, state="dispatching")
            minted.details += [("run", event.run_id), ("event", brief(event))]
            row.bars.append(minted)
            self._open[key] = minted
            return
        bar = self._open.get(key)
        if name == "RunSubmitFailed":
            label = f"submit failed: {event.error_class}"
            self._mark(row, lane, "refusal", label, position, event, note=label)
        if bar is None:
            return
        bar.details.append(("event", brief(event)))
        if name == "RunStarted":
            bar.state = "running"
        elif name in ("RunDone", "RunFailed", "RunOrphaned", "RunSuperseded"):
            bar.end = event.at
            bar.state = name.removeprefix("Run").lower()
            code = getattr(event, "code", None)
            if code:
                bar.label += f" {code}"
            if bar.state in ("failed", "orphaned"):
                message = getattr(event, "message", "")
                bar.note = f"run {bar.state}" + (f": {code}" if code else "")
                bar.note += f" ({message})" if message and message != code else ""
            del self._open[key]

    def _mark(
        self,
        row: Row,
        lane: str,
        css: str,
        label: str,
        position: int,
        event: Any,
        *,
        state: str = "",
        note: str = "",
    ) -> None:
        row.lane(lane)
        details = [("event", brief(event))]
        row.marks.append(Mark(lane, event.at, css, label, position, details, state, note))

    # ─── finishing ──────────────────────────────────────────────────────────

    def finish(self, end: float | None = None, context: frozenset[str] = frozenset()) -> Timeline:
        """The rows in tree order (owners before what they own, in submission order),
        open bars ended at ``end`` (default: the last event's time)."""
        start = self.first_at if self.first_at is not None else 0.0
        stop = end if end is not None else (self.last_at if self.last_at is not None else start)
        ordered: list[Row] = []
        children: dict[str | None, list[Row]] = {}
        for row in sorted(self.rows.values(), key=lambda r: r.order):
            row.context = row.task_id in context
            owner = row.owner_id if row.owner_id in self.rows else None
            children.setdefault(owner, []).append(row)
        stack = [(row, 0) for row in reversed(children.get(None, []))]
        while stack:
            row, depth = stack.pop()
            row.depth = depth
            ordered.append(row)
            stack.extend((child, depth + 1) for child in reversed(children.get(row.task_id, [])))
        furthest = stop
        for row in ordered:
            for bar in row.bars:
                if bar.end is not None:  # ended: drawn as it happened, not as planned
                    bar.planned_end = None
                    continue
                bar.end = stop
                if bar.planned_end is not None and bar.planned_end > stop:
                    furthest = max(furthest, bar.planned_end)  # a sleep still due
                else:
                    bar.planned_end = None
        arrows = []
        for arrow in self.arrows:
            target = self.rows.get(arrow.to_task)
            if target is None or arrow.from_task not in self.rows:
                continue
            arrow.to_at = target.ended_at if target.ended_at is not None else stop
            arrows.append(arrow)
        return Timeline(ordered, arrows, start, max(furthest, start), self.hidden, self.clock)


__all__ = [
    "RUNS_LANE",
    "TASK_LANE",
    "Arrow",
    "Bar",
    "Mark",
    "Row",
    "Timeline",
    "TimelineBuilder",
    "role_lane",
]
