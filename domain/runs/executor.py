"""The executor a host hands runs to: what passes to and from it, and the errors it raises.

The host implements :class:`Executor` (submit, find by client job id,
snapshot, cancel, complete). The application layer calls it, classifies what
it raised with :func:`classify_submit_error`, and records each outcome as run
events; nothing here decides. :class:`~.memory_executor.InMemoryExecutor` is an
executor for tests and the demo.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..tasks.fields import finite_number
from .events import SubmitErrorClass, Trigger

JobStatus = str
"""``queued`` or ``running`` (live); ``completed``, ``failed``, ``canceled``,
``interrupted`` (terminal)."""
TERMINAL_JOB_STATUSES: frozenset[str] = frozenset(
    {"completed", "failed", "canceled", "interrupted"}
)
FAILED_JOB_STATUSES: frozenset[str] = frozenset({"failed", "canceled", "interrupted"})
GENERATION = 1
"""Every run submits generation 1 of its client job id."""


# ─── what passes between the ledger and an executor ─────────────────────────


@dataclass(frozen=True, slots=True)
class SubmitRequest:
    """What a run submits: its client job id (generation 1) and where it comes from."""

    client_job_id: str
    run_id: str
    task_id: str
    task_kind: str
    day: str
    attempt: int
    trigger: Trigger
    tz: str
    generation: int = GENERATION
    payload: Any = None
    """The host's per-run data recorded on the run (opaque JSON; read-only, as the run's
    :attr:`~.state.RunState.payload` is)."""


@dataclass(frozen=True, slots=True)
class JobSnapshot:
    """An executor's view of one job."""

    job_id: str
    client_job_id: str
    status: JobStatus
    completed_at: float | None = None
    error_code: str | None = None
    error_message: str | None = None
    response: str | None = None
    partial_text: str | None = None

    @property
    def live(self) -> bool:
        """Queued or running: not ended."""
        return self.status not in TERMINAL_JOB_STATUSES


@dataclass(frozen=True, slots=True)
class CancelResult:
    """What a cancel did: ``applied`` when it stopped the job, and the job afterwards."""

    applied: bool
    job: JobSnapshot


class Executor(Protocol):
    """What a host implements to run tasks handed off by the run ledger."""

    def submit(self, request: SubmitRequest) -> JobSnapshot:
        """Admit a job; raise a :class:`SubmitError` subclass (or anything: ``transient``)."""
        ...

    def find_by_client_job_id(self, client_job_id: str) -> JobSnapshot | None:
        """The job (generation 1) with this client job id, or ``None``. Errors count as none."""
        ...

    def snapshot(self, job_id: str) -> JobSnapshot | None:
        """The job's current snapshot, or ``None`` when gone. Errors count as none."""
        ...

    def cancel(self, job_id: str) -> CancelResult:
        """Cancel the job; may raise :class:`AnswerCommittingError`,
        :class:`JobNotFoundError` or :class:`ExecutorPersistenceError`."""
        ...

    def complete(self, job_id: str, text: str) -> JobSnapshot:
        """Complete a job whose answer was being committed, with ``text``."""
        ...


# ─── executor errors ────────────────────────────────────────────────────────


class ExecutorError(Exception):
    """Base of the errors an executor raises on purpose."""


class SubmitError(ExecutorError):
    """A submit was refused; the subclass says how the ledger treats it."""


class IdentityConflictError(SubmitError):
    """The client job id is taken by a different request: the run fails."""


class ActiveJobError(SubmitError):
    """A live job with this client job id and generation exists: adopt it."""


class GenerationOrderError(SubmitError):
    """The generation is out of order for this client job id: adopt what is there."""


class OrphanFenceError(SubmitError):
    """The executor fences this client id for ``retry_after_ms``: wait that long."""

    def __init__(self, message: str = "orphan fence", *, retry_after_ms: float) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class DrainError(SubmitError):
    """The executor is draining for maintenance: retry later, no attempt used up."""


class TransientError(SubmitError):
    """Anything else that may pass (a coordinator shutting down, say)."""


class AnswerCommittingError(ExecutorError):
    """A cancel came while the job's answer was being committed."""


class JobNotFoundError(ExecutorError):
    """The executor has no such job."""


class ExecutorPersistenceError(ExecutorError):
    """The executor could not read or write its own store."""


def classify_submit_error(error: BaseException) -> SubmitErrorClass:
    """The class of a submit error: what the ledger does about it."""
    if isinstance(error, IdentityConflictError):
        return "identity_conflict"
    if isinstance(error, ActiveJobError | GenerationOrderError):
        return "adopt"
    if isinstance(error, OrphanFenceError):
        return "fence"
    if isinstance(error, DrainError):
        return "drain"
    return "transient"


def submit_wait_ms(error: BaseException, spacing_ms: float) -> float:
    """How long a run waits after a failed submit before reconcile submits it again:
    a fence's own ``retry_after_ms``, anything else the submit spacing."""
    # runs.fence_wait (dispatcher): a fence waits its retry_after; one that gives no
    # finite number of ms waits the spacing like the other classes, so the run's
    # retry_after stays a time a replay reads back.
    given = getattr(error, "retry_after_ms", None) if isinstance(error, OrphanFenceError) else None
    wait = finite_number(given)
    return spacing_ms if wait is None else wait
