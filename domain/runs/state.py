"""The state of one dispatch run, and of a task's schedule, folded from their events.

Statuses: ``dispatching -> running -> done | failed | orphaned | superseded``;
``dispatching`` may also end ``failed`` (an identity conflict, a day that rolled
over, submits used up). :func:`evolve_run` folds a run's stream into a
:class:`RunState` and refuses an event its status cannot take;
:func:`evolve_schedule` folds a ``schedule:task`` stream into a
:class:`ScheduleState` (SPEC.md section 3).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from ..frozen import frozen, thawed
from ..tasks.copies import copier, maker
from ..tasks.evolve import InvalidTransition, evolves_stream
from .events import (
    RUN_EVENT_TYPES,
    RunAdopted,
    RunDone,
    RunEvent,
    RunFailed,
    RunMinted,
    RunOrphaned,
    RunSettingsChanged,
    RunStarted,
    RunSubmitFailed,
    RunSubmitted,
    RunSuperseded,
    ScheduleSet,
    SubmitErrorClass,
    Trigger,
)
from .settings import RunSettings

RunStatus = Literal["dispatching", "running", "done", "failed", "orphaned", "superseded"]
LIVE_RUN_STATUSES: frozenset[str] = frozenset({"dispatching", "running"})


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
    payload: Any = None
    """The host's per-run data (opaque JSON), handed to the executor with each submit;
    read-only all the way down (:func:`~..frozen.frozen`: its dicts and lists refuse
    every change), as every container of a state is. :meth:`to_dict` gives a plain copy."""
    catch_up: bool = False
    """A run the scheduled tick fired (a catch-up, as the dispatcher flags them); a
    manual run never is."""

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
            "payload": thawed(self.payload),
            "catch_up": True if self.catch_up else None,
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


# A fold makes a state per event: built and copied (stamped with the event's time and
# count, one copy) without a frozen __init__'s cost.
_new_run = maker(RunState)
_step = copier(RunState, stamped=True)


@evolves_stream(*RUN_EVENT_TYPES)
def evolve_run(state: RunState | None, event: RunEvent) -> RunState:
    """The run's state after ``event`` (``state`` is ``None`` before it was minted)."""
    if isinstance(event, RunMinted):
        if state is not None:
            raise InvalidTransition(f"run {event.run_id}: minted twice")
        return _new_run(
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
            payload=frozen(event.payload),
            catch_up=event.catch_up,
        )
    return _apply(_require(state, event, *LIVE_RUN_STATUSES), event)


def _apply(state: RunState, event: RunEvent) -> RunState:
    if isinstance(event, RunSubmitted | RunAdopted):
        _require(state, event, "dispatching")
        return _step(
            state,
            event,
            status="running",
            job_id=event.job_id,
            last_known_status=event.job_status,
            retry_after=None,
        )
    if isinstance(event, RunSubmitFailed):
        _require(state, event, "dispatching")
        return _step(
            state,
            event,
            retry_after=event.retry_after,
            submit_attempts=state.submit_attempts + (1 if event.consumed else 0),
            drains=state.drains + (1 if event.error_class == "drain" else 0),
            last_submit_error=event.error_class,
        )
    if isinstance(event, RunStarted):
        _require(state, event, "running")
        return _step(state, event, last_known_status=event.job_status)
    if isinstance(event, RunDone):
        _require(state, event, "running")
        return _step(
            state,
            event,
            status="done",
            last_known_status=event.job_status,
            completed_at=event.completed_at,
        )
    if isinstance(event, RunFailed):
        return _step(
            state,
            event,
            status="failed",
            error=RunError(event.code, event.message),
            last_known_status=event.job_status or state.last_known_status,
            completed_at=event.completed_at,
        )
    if isinstance(event, RunOrphaned):
        _require(state, event, "running")
        return _step(
            state,
            event,
            status="orphaned",
            error=RunError("orphaned", event.message),
            completed_at=event.completed_at,
        )
    if isinstance(event, RunSuperseded):
        _require(state, event, "running")
        return _step(
            state,
            event,
            status="superseded",
            error=RunError(event.code, event.message),
            completed_at=event.completed_at,
        )
    raise InvalidTransition(f"run {state.run_id}: no evolve for {type(event).__name__}")


@evolves_stream(ScheduleSet)
def evolve_schedule(state: ScheduleState | None, event: ScheduleSet) -> ScheduleState:
    """A task's schedule after ``event``."""
    return ScheduleState(task_id=event.task_id, run_at=event.run_at, updated_at=event.at)


@evolves_stream(RunSettingsChanged)
def evolve_run_settings(state: RunSettings | None, event: RunSettingsChanged) -> RunSettings:
    """The run settings in force after ``event``."""
    try:
        return RunSettings(**{f.name: getattr(event, f.name) for f in fields(RunSettings)})
    except ValueError as error:  # InvalidArgument: not settings tasktrail would record
        raise InvalidTransition(f"RunSettingsChanged: {error}") from None
