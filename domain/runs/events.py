"""The events of a dispatch run and of a task's schedule (SPEC.md section 3).

Each run's events go to the run's own stream, ``run:task|day|attempt`` (see
:mod:`.identity`): :class:`RunMinted` starts it ``dispatching``; a submit taken
(:class:`RunSubmitted`, :class:`RunAdopted`) makes it ``running``; a failed
submit (:class:`RunSubmitFailed`) keeps it ``dispatching``; the job's end or
loss ends it (:class:`RunDone`, :class:`RunFailed`, :class:`RunOrphaned`,
:class:`RunSuperseded`). :class:`ScheduleSet` sets or clears a task's scheduled
time on its ``schedule:task`` stream. Importing this module registers every one
of them as readable from a log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from ..tasks.events import TaskEvent, register_event
from .identity import run_identity, run_stream_id, schedule_stream_id

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
    """A run was minted, ``dispatching``; it is first redriven at ``retry_after``.

    Version 2 added ``payload``: the host's per-run data (opaque JSON, the
    dispatcher's session, message era and number), handed to the executor with
    every submit; and ``catch_up``: a run the scheduled tick fired (every scheduled
    run; until seed-fidelity round ten only one fired after its scheduled time).
    Runs minted before read as ``None`` and ``False``.
    """

    class_version: ClassVar[int] = 2

    tz: str
    trigger: Trigger
    client_job_id: str
    scheduled_for: float | None = None
    retry_after: float
    payload: Any = None
    catch_up: bool = False

    @staticmethod
    def upcast_v1_v2(payload: dict[str, Any]) -> None:
        """A run minted before version 2 carried no per-run payload nor catch-up flag."""
        payload["payload"] = None
        payload["catch_up"] = False


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


RUN_SETTINGS_STREAM = "settings:runs"


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSettingsChanged(TaskEvent):
    """The run ledger's settings in force from now on, whole (``configure_runs``):
    the zone, limits and windows its rules decide by, so that a replay decides as
    the live scheduler did. ``task_id`` is empty (scheduler-wide); the fields are
    :class:`~.settings.RunSettings`', with ``actor`` and ``why``: who set them and why
    (``ACT_FIELDS``)."""

    task_stream: ClassVar[bool] = False

    tz: str
    runs_per_day: int
    submit_attempts: int
    submit_spacing_ms: float
    run_spacing_ms: float
    per_tick: int
    reconcile_per_tick: int
    cap_per_day: int
    dispatch_wall_ms: float
    job_lost_ms: float
    catch_up_ms: float
    reconcile_wall_s: float | None
    dispatch_wall_s: float | None = 25.0
    actor: str | None = None
    why: str | None = None

    def stream_id(self) -> str:
        """The one stream of the run settings."""
        return RUN_SETTINGS_STREAM


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
for _cls in (*RUN_EVENT_TYPES, ScheduleSet, RunSettingsChanged):
    register_event(_cls)
