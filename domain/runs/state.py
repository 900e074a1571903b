"""Dispatch runs as events, the run state they fold into, and the run ledger (SPEC.md section 3).

A **run** is one attempt to hand a task to an executor on a local ``day``. Its
identity is ``task|day|attempt`` (also its id), where ``attempt`` is 1 + the
runs that task already has that day, whatever their status. A run outlives its
task's terminal event, so its events live on a stream of their own,
``run:task|day|attempt``: two writers that mint the same attempt both write
version 1 of that stream, and the second loses (optimistic concurrency).

Statuses: ``dispatching -> running -> done | failed | orphaned | superseded``;
``dispatching`` may also end ``failed`` (an identity conflict, a day that rolled
over, submits used up).

A task's scheduled time lives on its own stream too (``schedule:task``), set by
:class:`ScheduleSet`.

The ledger (``world.indexes["ledger"]``, a :class:`Ledger`) indexes every run by
task and day, counts runs per day, keeps the live runs in ledger order (for the
round-robin reconcile), each task's schedule, and each task's marker: the
``running``/``done``/``failed`` note the seed writes on its task row.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar, Literal
from zoneinfo import ZoneInfo

from ..tasks.events import TaskEvent, register_event
from ..tasks.evolve import InvalidTransition, evolves_stream
from ..world import World, register_indexer

RunStatus = Literal["dispatching", "running", "done", "failed", "orphaned", "superseded"]
LIVE_RUN_STATUSES: frozenset[str] = frozenset({"dispatching", "running"})
Trigger = Literal["manual", "scheduled"]
TRIGGERS: tuple[Trigger, ...] = ("manual", "scheduled")
SubmitErrorClass = Literal["identity_conflict", "adopt", "fence", "drain", "transient"]
SUBMIT_ERROR_CLASSES: tuple[SubmitErrorClass, ...] = (
    "identity_conflict",
    "adopt",
    "fence",
    "drain",
    "transient",
)
Marker = Literal["running", "done", "failed"]

RUN_STREAM_PREFIX = "run:"
SCHEDULE_STREAM_PREFIX = "schedule:"


# ─── identity, client job id and the local day ──────────────────────────────


def run_identity(task_id: str, day: str, attempt: int) -> str:
    """A run's identity and id: ``task|day|attempt``."""
    return f"{task_id}|{day}|{attempt}"


def run_stream_id(run_id: str) -> str:
    """The stream a run's events are appended to."""
    return f"{RUN_STREAM_PREFIX}{run_id}"


def schedule_stream_id(task_id: str) -> str:
    """The stream a task's scheduled time is kept on."""
    return f"{SCHEDULE_STREAM_PREFIX}{task_id}"


def client_job_id(task_id: str, tz: str, day: str, attempt: int) -> str:
    """The deterministic, UUIDv4-shaped client job id of a run.

    sha256 of ``task|{task}|{tz}|{day}|{attempt}`` (the zone before the day),
    its first 16 bytes with the version nibble set to 4 and the variant bits to
    ``10``, written 8-4-4-4-12 in lowercase hex. A retry or redrive of a run
    reuses it, which is what lets a redrive adopt a job a lost answer left.
    """
    digest = hashlib.sha256(f"task|{task_id}|{tz}|{day}|{attempt}".encode()).digest()
    raw = bytearray(digest[:16])
    raw[6] = 0x40 | (raw[6] & 0x0F)
    raw[8] = 0x80 | (raw[8] & 0x3F)
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def local_day(now_ms: float, tz: str) -> str:
    """The calendar date (``YYYY-MM-DD``) in zone ``tz`` at scheduler time ``now_ms``."""
    return datetime.fromtimestamp(now_ms / 1000.0, ZoneInfo(tz)).date().isoformat()


# ─── events ─────────────────────────────────────────────────────────────────


@dataclass(frozen=True, kw_only=True, slots=True)
class RunEvent(TaskEvent):
    """Base of the events of one run, on its own stream ``run:task|day|attempt``."""

    task_stream: ClassVar[bool] = False

    day: str
    attempt: int

    @property
    def run_id(self) -> str:
        """The run's identity, ``task|day|attempt``."""
        return run_identity(self.task_id, self.day, self.attempt)

    def stream_id(self) -> str:
        """The run's own stream."""
        return run_stream_id(self.run_id)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunMinted(RunEvent):
    """A run was minted, ``dispatching``; it is first redriven at ``retry_after``."""

    tz: str
    trigger: Trigger
    client_job_id: str
    scheduled_for: float | None = None
    retry_after: float


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSubmitted(RunEvent):
    """The executor accepted the run's submit: ``running`` with that job."""

    job_id: str
    job_status: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RunAdopted(RunEvent):
    """A live job with the run's client job id was already there and was taken: ``running``."""

    job_id: str
    job_status: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSubmitFailed(RunEvent):
    """A submit failed with ``error_class``; the run stays ``dispatching`` until
    ``retry_after`` (an ``identity_conflict`` is followed by :class:`RunFailed`).

    ``consumed`` says whether it used up one of the run's submit attempts (a
    ``drain`` never does).
    """

    error_class: SubmitErrorClass
    message: str
    retry_after: float
    consumed: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class RunStarted(RunEvent):
    """The executor reported the run's job in a new live status (queued to running, say)."""

    job_status: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RunDone(RunEvent):
    """The run's job completed: ``done``."""

    completed_at: float
    job_status: str = "completed"


@dataclass(frozen=True, kw_only=True, slots=True)
class RunFailed(RunEvent):
    """The run ended ``failed``; ``code`` says why (``identity_conflict``, ``expired``,
    ``submit_exhausted``, ``job_lost``, or the job's own error code or status)."""

    code: str
    message: str
    completed_at: float
    job_status: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOrphaned(RunEvent):
    """The run's task ended, or its job is gone: ``orphaned``."""

    message: str
    completed_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSuperseded(RunEvent):
    """The task was rescheduled before the run's job ran: ``superseded``. ``code`` is
    ``superseded``, or the job's terminal status when the cancel found it ended."""

    code: str
    message: str
    completed_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class ScheduleSet(TaskEvent):
    """A task's scheduled run time was set (``run_at`` in scheduler ms) or cleared (``None``)."""

    task_stream: ClassVar[bool] = False

    run_at: float | None

    def stream_id(self) -> str:
        """The task's schedule stream."""
        return schedule_stream_id(self.task_id)


RUN_EVENT_TYPES: tuple[type[RunEvent], ...] = (
    RunMinted,
    RunSubmitted,
    RunAdopted,
    RunSubmitFailed,
    RunStarted,
    RunDone,
    RunFailed,
    RunOrphaned,
    RunSuperseded,
)
for _cls in (*RUN_EVENT_TYPES, ScheduleSet):
    register_event(_cls)


# ─── state ──────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class RunError:
    """Why a run ended other than ``done``."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class RunState:
    """Everything known of one run after its events so far."""

    run_id: str
    task_id: str
    day: str
    attempt: int
    tz: str
    trigger: Trigger
    client_job_id: str
    status: RunStatus
    fired_at: float
    retry_after: float | None
    scheduled_for: float | None = None
    submit_attempts: int = 0
    """Submits used up (a ``drain`` uses none)."""
    drains: int = 0
    """Submits refused by a maintenance drain."""
    last_submit_error: SubmitErrorClass | None = None
    job_id: str | None = None
    last_known_status: str | None = None
    error: RunError | None = None
    completed_at: float | None = None
    updated_at: float = 0
    events: int = 0
    """How many events made this state: the stream version."""

    @property
    def live(self) -> bool:
        """``dispatching`` or ``running``: not yet ended."""
        return self.status in LIVE_RUN_STATUSES

    def to_dict(self) -> dict[str, Any]:
        """The run as plain JSON-ready data, leaving out what is unset."""
        out: dict[str, Any] = {
            "run_id": self.run_id,
            "task_id": self.task_id,
            "day": self.day,
            "attempt": self.attempt,
            "trigger": self.trigger,
            "status": self.status,
            "client_job_id": self.client_job_id,
            "tz": self.tz,
            "fired_at": self.fired_at,
            "submit_attempts": self.submit_attempts,
        }
        optional = {
            "scheduled_for": self.scheduled_for,
            "retry_after": self.retry_after if self.live else None,
            "drains": self.drains or None,
            "last_submit_error": self.last_submit_error,
            "job_id": self.job_id,
            "last_known_status": self.last_known_status,
            "completed_at": self.completed_at,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        if self.error is not None:
            out["error"] = {"code": self.error.code, "message": self.error.message}
        return out


@dataclass(frozen=True, slots=True)
class ScheduleState:
    """A task's scheduled run time (``None`` once cleared)."""

    task_id: str
    run_at: float | None
    updated_at: float


def _require(state: RunState | None, event: RunEvent, *statuses: str) -> RunState:
    if state is None:
        raise InvalidTransition(f"run {event.run_id}: {type(event).__name__} before it was minted")
    if state.status not in statuses:
        raise InvalidTransition(f"run {state.run_id}: {type(event).__name__} while {state.status}")
    return state


@evolves_stream(*RUN_EVENT_TYPES)
def evolve_run(state: RunState | None, event: RunEvent) -> RunState:
    """The run's state after ``event`` (``state`` is ``None`` before it was minted)."""
    if isinstance(event, RunMinted):
        if state is not None:
            raise InvalidTransition(f"run {event.run_id}: minted twice")
        return RunState(
            run_id=event.run_id,
            task_id=event.task_id,
            day=event.day,
            attempt=event.attempt,
            tz=event.tz,
            trigger=event.trigger,
            client_job_id=event.client_job_id,
            status="dispatching",
            fired_at=event.at,
            retry_after=event.retry_after,
            scheduled_for=event.scheduled_for,
            updated_at=event.at,
            events=1,
        )
    current = _require(state, event, *LIVE_RUN_STATUSES)
    next_state = _apply(current, event)
    return replace(next_state, updated_at=event.at, events=current.events + 1)


def _apply(state: RunState, event: RunEvent) -> RunState:
    if isinstance(event, RunSubmitted | RunAdopted):
        _require(state, event, "dispatching")
        return replace(
            state,
            status="running",
            job_id=event.job_id,
            last_known_status=event.job_status,
            retry_after=None,
        )
    if isinstance(event, RunSubmitFailed):
        _require(state, event, "dispatching")
        return replace(
            state,
            retry_after=event.retry_after,
            submit_attempts=state.submit_attempts + (1 if event.consumed else 0),
            drains=state.drains + (1 if event.error_class == "drain" else 0),
            last_submit_error=event.error_class,
        )
    if isinstance(event, RunStarted):
        _require(state, event, "running")
        return replace(state, last_known_status=event.job_status)
    if isinstance(event, RunDone):
        _require(state, event, "running")
        return replace(
            state,
            status="done",
            last_known_status=event.job_status,
            completed_at=event.completed_at,
        )
    if isinstance(event, RunFailed):
        return replace(
            state,
            status="failed",
            error=RunError(event.code, event.message),
            last_known_status=event.job_status or state.last_known_status,
            completed_at=event.completed_at,
        )
    if isinstance(event, RunOrphaned):
        _require(state, event, "running")
        return replace(
            state,
            status="orphaned",
            error=RunError("orphaned", event.message),
            completed_at=event.completed_at,
        )
    if isinstance(event, RunSuperseded):
        _require(state, event, "running")
        return replace(
            state,
            status="superseded",
            error=RunError(event.code, event.message),
            completed_at=event.completed_at,
        )
    raise InvalidTransition(f"run {state.run_id}: no evolve for {type(event).__name__}")


@evolves_stream(ScheduleSet)
def evolve_schedule(state: ScheduleState | None, event: ScheduleSet) -> ScheduleState:
    """A task's schedule after ``event``."""
    return ScheduleState(task_id=event.task_id, run_at=event.run_at, updated_at=event.at)


# ─── the ledger index ───────────────────────────────────────────────────────


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
        if isinstance(event, RunDone):
            ledger.markers[run.task_id] = "done"
        elif isinstance(event, RunFailed) and was_running:
            ledger.markers[run.task_id] = "failed"


register_indexer(index_ledger, task_streams=False)  # run and schedule streams only
