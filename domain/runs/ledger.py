"""The run ledger: the index of every run a world keeps (SPEC.md section 3).

The ledger (``world.indexes["ledger"]``, a :class:`Ledger`) indexes every run by
task and day, counts runs per day, keeps the live runs in ledger order (for the
round-robin reconcile), each task's schedule, and each task's marker: the
``running``/``done``/``failed`` note the seed writes on its task row.
:func:`index_ledger` keeps it current; importing this module registers it with
every :class:`~..world.World`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..tasks.events import TaskEnded, TaskEvent, TaskSubmitted
from ..world import World, register_compactor, register_indexer, register_retirer
from .events import RunAdopted, RunDone, RunEvent, RunFailed, RunMinted, RunSubmitted, ScheduleSet
from .state import RunState, ScheduleState

Marker = Literal["running", "done", "failed"]


@dataclass
class DayCounts:
    """Per-day counters of the ledger: runs minted, by trigger, and how they ended."""

    runs: int = 0
    manual: int = 0
    scheduled: int = 0
    ended: dict[str, int] = field(default_factory=dict)
    """Ended runs by final status (``done``, ``failed``, ...)."""


@dataclass
class Ledger:
    """The run ledger of a world (``world.indexes["ledger"]``), kept by :func:`index_ledger`."""

    runs: dict[str, RunState] = field(default_factory=dict)
    """Every run by id, in ledger (mint) order."""
    by_task_day: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    """Run ids of each (task, day), attempt order."""
    per_day: dict[str, DayCounts] = field(default_factory=dict)
    live: dict[str, None] = field(default_factory=dict)
    """Live (dispatching or running) run ids, in ledger order: what reconcile visits."""
    schedules: dict[str, float] = field(default_factory=dict)
    """Each scheduled task's run time."""
    markers: dict[str, Marker] = field(default_factory=dict)
    """Each task's marker: ``running`` once a run's job is taken, ``done``/``failed`` when a
    running run ends so; cleared when the task is rescheduled."""

    def runs_of(self, task_id: str, day: str) -> list[RunState]:
        """The runs of one task on one day, attempt order."""
        return [self.runs[r] for r in self.by_task_day.get((task_id, day), ())]

    def live_run(self, task_id: str, day: str) -> RunState | None:
        """The task's in-flight run that day, if any."""
        for run in self.runs_of(task_id, day):
            if run.live:
                return run
        return None

    def runs_on(self, day: str) -> int:
        """How many runs (every task, every status) the day has."""
        counts = self.per_day.get(day)
        return counts.runs if counts is not None else 0

    def live_reservations(self, where: Mapping[str, Any] | None = None) -> list[RunState]:
        """The live runs (dispatching or running), in ledger order, whose payload holds
        every key of ``where`` with its value (the dispatcher lists its live
        reservations by message era this way); ``None``: every live run."""
        runs = [self.runs[run_id] for run_id in self.live]
        if not where:
            return runs
        return [
            run
            for run in runs
            if isinstance(run.payload, dict)
            and all(
                key in run.payload and run.payload[key] == value for key, value in where.items()
            )
        ]

    def copy(self) -> Ledger:
        """A copy to change apart from this ledger, counters and lists included (the
        runs are frozen states, shared)."""
        return Ledger(
            runs=dict(self.runs),
            by_task_day={key: list(ids) for key, ids in self.by_task_day.items()},
            per_day={
                day: DayCounts(c.runs, c.manual, c.scheduled, dict(c.ended))
                for day, c in self.per_day.items()
            },
            live=dict(self.live),
            schedules=dict(self.schedules),
            markers=dict(self.markers),
        )

    def rows(self) -> list[dict[str, Any]]:
        """Every run as plain data, ledger order."""
        return [run.to_dict() for run in self.runs.values()]


LEDGER = "ledger"


def ledger_of(world: World) -> Ledger:
    """The world's run ledger (empty until a run or schedule event is folded)."""
    ledger = world.indexes.get(LEDGER)
    if ledger is None:
        ledger = world.indexes[LEDGER] = Ledger()
    assert isinstance(ledger, Ledger)
    return ledger


def index_ledger(world: World, event: TaskEvent, previous: Any, state: Any) -> None:
    """Keep the ledger of ``world`` current after one event was folded."""
    if isinstance(event, ScheduleSet):
        ledger = ledger_of(world)
        if event.run_at is None:
            ledger.schedules.pop(event.task_id, None)
        else:
            ledger.schedules[event.task_id] = event.run_at
        ledger.markers.pop(event.task_id, None)
        # runs.marker_running_kept (dispatcher): while a run's job runs and the new
        # schedule does not supersede it, the task stays marked running (the
        # dispatcher's reconcile marks it again), so no second run starts beside it.
        for run_id in ledger.live:
            live = ledger.runs[run_id]
            running = live.task_id == event.task_id and live.status == "running"
            if running and not _moved(live, event.run_at):
                ledger.markers[event.task_id] = "running"
        return
    if not isinstance(event, RunEvent):
        return
    ledger = ledger_of(world)
    run: RunState = state
    ledger.runs[run.run_id] = run
    if isinstance(event, RunMinted):
        ledger.by_task_day.setdefault((run.task_id, run.day), []).append(run.run_id)
        counts = ledger.per_day.setdefault(run.day, DayCounts())
        counts.runs += 1
        if run.trigger == "manual":
            counts.manual += 1
        else:
            counts.scheduled += 1
        ledger.live[run.run_id] = None
    if isinstance(event, RunSubmitted | RunAdopted):
        ledger.markers[run.task_id] = "running"
    if not run.live:
        ledger.live.pop(run.run_id, None)
        ended = ledger.per_day.setdefault(run.day, DayCounts()).ended
        ended[run.status] = ended.get(run.status, 0) + 1
        was_running = previous is not None and previous.status == "running"
        # runs.marker_of_its_schedule (dispatcher): a run scheduled for a time the task
        # was moved from (its cancel found the job ended) leaves the task unmarked, so
        # the new schedule still fires.
        moved = _moved(run, ledger.schedules.get(run.task_id))
        if isinstance(event, RunDone) and not moved:
            ledger.markers[run.task_id] = "done"
        elif isinstance(event, RunFailed) and was_running and not moved:
            ledger.markers[run.task_id] = "failed"


def _moved(run: RunState, run_at: float | None) -> bool:
    """Whether the task's schedule moved from the time ``run`` was scheduled for: what
    reconcile supersedes it for."""
    return run.scheduled_for is not None and run_at not in (None, run.scheduled_for)


register_indexer(index_ledger, task_streams=False, reacts_to=(ScheduleSet, RunEvent))


RECENT_DAYS = 3
"""Days of counters a compacted ledger keeps: today's (the daily cap and the attempts of a
task and day read it) with a margin for clocks in other time zones."""


def compact_ledger(world: World) -> None:
    """Keep what the rules read: live runs, the recent days' runs of live tasks (a
    task's attempts that day) and the recent days' counters (the daily cap), and the
    schedules and markers of live tasks (only a live task is dispatched). Older runs and the runs of
    ended tasks stay in the log and the read models."""
    ledger = world.indexes.get(LEDGER)
    if not isinstance(ledger, Ledger):
        return
    live = world.live
    days = set(sorted(ledger.per_day)[-RECENT_DAYS:])
    ledger.runs = {
        r: run
        for r, run in ledger.runs.items()
        if run.live or (run.day in days and run.task_id in live)
    }
    days.update(run.day for run in ledger.runs.values())
    ledger.per_day = {day: counts for day, counts in ledger.per_day.items() if day in days}
    ledger.by_task_day = {
        key: [r for r in ids if r in ledger.runs]
        for key, ids in ledger.by_task_day.items()
        if key[1] in days and (key[0] in live or any(r in ledger.runs for r in ids))
    }
    ledger.schedules = {t: at for t, at in ledger.schedules.items() if t in live}
    ledger.markers = {
        task_id: marker for task_id, marker in ledger.markers.items() if task_id in live
    }


def retired_run_stream(world: World, stream_id: str, state: Any) -> bool | None:
    """A run stream is finished with once the run ended; a schedule's once its task did."""
    if isinstance(state, RunState):
        return not state.live
    if isinstance(state, ScheduleState):
        return state.task_id not in world.live
    return None


register_compactor(compact_ledger)
register_retirer(retired_run_stream)
LIVE_SCHEDULES = "live_schedules"


def index_live_schedules(world: World, event: TaskEvent, previous: Any, state: Any) -> None:
    """Keep ``world.indexes["live_schedules"]``: each live task's run time (what
    :func:`~.admission.due_tasks` visits a tick), without the schedules of ended tasks."""
    if isinstance(event, ScheduleSet):
        schedules: dict[str, float] = world.indexes.setdefault(LIVE_SCHEDULES, {})
        if event.run_at is None or event.task_id not in world.live:
            schedules.pop(event.task_id, None)
        else:
            schedules[event.task_id] = event.run_at
    elif type(event).task_stream:
        ledger = world.indexes.get(LEDGER)
        run_at = ledger.schedules.get(event.task_id) if ledger is not None else None
        if run_at is not None and state is not None and state.live:
            world.indexes.setdefault(LIVE_SCHEDULES, {})[event.task_id] = run_at
        elif LIVE_SCHEDULES in world.indexes:
            world.indexes[LIVE_SCHEDULES].pop(event.task_id, None)


# A schedule, and a task turning live or ending: a task's liveness changes only then.
register_indexer(
    index_live_schedules, restorable=True, reacts_to=(ScheduleSet, TaskSubmitted, TaskEnded)
)


def live_schedules(world: World) -> dict[str, float]:
    """Each live scheduled task's run time."""
    schedules: dict[str, float] = world.indexes.get(LIVE_SCHEDULES, {})
    return schedules
