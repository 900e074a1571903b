"""The executor a host hands runs to, the errors it raises, and the run ledger's settings.

The host implements :class:`Executor` (submit, find by client job id,
snapshot, cancel, complete). The application layer calls it, classifies what
it raised with :func:`classify_submit_error`, and records each outcome as run
events; nothing here decides. :class:`InMemoryExecutor` is an executor for
tests and the demo that can be told to fail in each of the ways a real one
does.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import InvalidArgument
from .state import SubmitErrorClass, Trigger

JobStatus = str
"""``queued`` or ``running`` (live); ``completed``, ``failed``, ``canceled``,
``interrupted`` (terminal)."""
TERMINAL_JOB_STATUSES: frozenset[str] = frozenset(
    {"completed", "failed", "canceled", "interrupted"}
)
FAILED_JOB_STATUSES: frozenset[str] = frozenset({"failed", "canceled", "interrupted"})
GENERATION = 1
"""Every run submits generation 1 of its client job id."""


# ─── settings ───────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How the run ledger admits, submits and reconciles. Times are ms of the scheduler clock.

    Defaults are the upstream dispatcher's; ``catch_up_ms`` (how late a
    scheduled task may still fire) is the value of its own test config, 3 h.
    """

    tz: str = "UTC"
    """IANA zone whose calendar date is a run's ``day``; part of the client job id."""
    runs_per_day: int = 3
    submit_attempts: int = 3
    """Submits a run may use up before reconcile fails it ``submit_exhausted``."""
    submit_spacing_ms: float = 120_000
    """Wait after a ``transient`` (or ``drain``) submit failure."""
    run_spacing_ms: float = 600_000
    """Scheduled runs of one task fire at least this far apart (manual runs ignore it)."""
    per_tick: int = 2
    """Background slots, and scheduled runs fired per :meth:`dispatch_due`."""
    reconcile_per_tick: int = 2
    cap_per_day: int = 20
    """Scheduled runs a day, every task; 0 turns scheduled dispatch off (``cap_off``)."""
    dispatch_wall_ms: float = 25_000
    """A fresh run is first redriven this long after it was minted."""
    job_lost_ms: float = 21_600_000
    """A running run with no job this long after it fired is ``failed job_lost``."""
    catch_up_ms: float = 10_800_000
    reconcile_wall_s: float | None = 40.0
    """Wall-time budget of one :meth:`reconcile` (application layer only); ``None``: none."""

    def __post_init__(self) -> None:
        try:
            ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            raise InvalidArgument(f"tz must be an IANA time zone name, not {self.tz!r}") from None
        for name in ("runs_per_day", "submit_attempts", "per_tick", "reconcile_per_tick"):
            _check_int(name, getattr(self, name), minimum=1)
        _check_int("cap_per_day", self.cap_per_day, minimum=0)
        for name in (
            "submit_spacing_ms",
            "run_spacing_ms",
            "dispatch_wall_ms",
            "job_lost_ms",
            "catch_up_ms",
        ):
            _check_ms(name, getattr(self, name))
        if self.reconcile_wall_s is not None:
            _check_ms("reconcile_wall_s", self.reconcile_wall_s)


def _check_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgument(f"{name} must be an int >= {minimum}, not {value!r}")


def _check_ms(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise InvalidArgument(f"{name} must be a finite number >= 0, not {value!r}")


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


# ─── slots (process-local) ──────────────────────────────────────────────────


class DispatchSlots:
    """The process's dispatch slots: one reserved manual slot, ``per_tick`` background ones."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.manual = 0
        self.background = 0

    def try_acquire(self, kind: Literal["manual", "background"], limit: int) -> bool:
        """Take a slot of ``kind`` if fewer than ``limit`` are in use."""
        with self._lock:
            if kind == "manual":
                if self.manual >= limit:
                    return False
                self.manual += 1
            else:
                if self.background >= limit:
                    return False
                self.background += 1
            return True

    def release(self, kind: Literal["manual", "background"]) -> None:
        """Give a slot of ``kind`` back (never below zero)."""
        with self._lock:
            if kind == "manual":
                self.manual = max(0, self.manual - 1)
            else:
                self.background = max(0, self.background - 1)


# ─── an executor in memory ──────────────────────────────────────────────────

FaultKind = Literal["identity_conflict", "adopt", "fence", "drain", "transient"]
CancelFault = Literal["answer_committing", "not_found", "persistence"]


@dataclass
class _SubmitFault:
    kind: FaultKind
    retry_after_ms: float
    adopt_finds_job: bool
    message: str
    task_id: str | None = None


@dataclass
class InMemoryExecutor:
    """An executor in memory, for tests and the demo, that fails when told to.

    Jobs get ids ``job-1``, ``job-2``, ... and start ``queued``. Submit faults
    queue up with :meth:`fail_next_submit`; cancel faults with
    :meth:`fail_next_cancel`; :meth:`finish` ends a job (completed, failed,
    canceled, interrupted) and :meth:`lose` makes it vanish. ``on_submit``, if
    set, is called with each request before it is admitted (a test uses it to
    act while a submit is in flight).
    """

    jobs: dict[str, JobSnapshot] = field(default_factory=dict)
    requests: list[SubmitRequest] = field(default_factory=list)
    """Every submit request seen, admitted or not."""
    on_submit: Callable[[SubmitRequest], None] | None = None
    _by_client: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _submit_faults: deque[_SubmitFault] = field(default_factory=deque, init=False, repr=False)
    _cancel_faults: deque[CancelFault] = field(default_factory=deque, init=False, repr=False)
    _lost: set[str] = field(default_factory=set, init=False, repr=False)

    # ── telling it to fail ──

    def fail_next_submit(
        self,
        kind: FaultKind,
        *,
        times: int = 1,
        retry_after_ms: float = 60_000,
        adopt_finds_job: bool = True,
        message: str | None = None,
        task_id: str | None = None,
    ) -> None:
        """Make the next ``times`` submits (of ``task_id`` only, if given) fail as ``kind``.

        ``fence`` carries ``retry_after_ms``. ``adopt`` first admits the job (as
        though an earlier answer was lost) so the ledger finds a live job to
        take, unless ``adopt_finds_job`` is false.
        """
        for _ in range(times):
            self._submit_faults.append(
                _SubmitFault(
                    kind,
                    retry_after_ms,
                    adopt_finds_job,
                    message or f"injected {kind}",
                    task_id,
                )
            )

    def fail_next_cancel(self, kind: CancelFault) -> None:
        """Make the next cancel raise ``kind``."""
        self._cancel_faults.append(kind)

    def start(self, job_id: str) -> JobSnapshot:
        """Move a queued job to ``running``."""
        return self._set(job_id, status="running")

    def finish(
        self,
        job_id: str,
        status: str = "completed",
        *,
        error_code: str | None = None,
        response: str | None = None,
        completed_at: float | None = None,
    ) -> JobSnapshot:
        """End a job as ``completed``, ``failed``, ``canceled`` or ``interrupted``."""
        if status not in TERMINAL_JOB_STATUSES:
            raise ValueError(f"finish() takes a terminal job status, not {status!r}")
        return self._set(
            job_id,
            status=status,
            error_code=error_code,
            error_message=None if status == "completed" else f"job {status}",
            response=response,
            completed_at=completed_at,
        )

    def lose(self, job_id: str) -> None:
        """Make a job vanish: snapshots and lookups answer none, cancels not-found."""
        self._lost.add(job_id)

    def job_of(self, client_job_id: str) -> JobSnapshot | None:
        """The job with this client job id, lost or not."""
        job_id = self._by_client.get(client_job_id)
        return self.jobs.get(job_id) if job_id is not None else None

    # ── the Executor protocol ──

    def submit(self, request: SubmitRequest) -> JobSnapshot:
        """Admit a job, or raise the next queued fault."""
        self.requests.append(request)
        if self.on_submit is not None:
            self.on_submit(request)
        fault = self._next_fault(request)
        if fault is not None:
            if fault.kind == "identity_conflict":
                raise IdentityConflictError(fault.message)
            if fault.kind == "adopt":
                if fault.adopt_finds_job and request.client_job_id not in self._by_client:
                    self.admit(request)
                raise ActiveJobError(fault.message)
            if fault.kind == "fence":
                raise OrphanFenceError(fault.message, retry_after_ms=fault.retry_after_ms)
            if fault.kind == "drain":
                raise DrainError(fault.message)
            raise TransientError(fault.message)
        existing = self.job_of(request.client_job_id)
        if existing is not None:
            if existing.live:
                raise ActiveJobError(f"job {existing.job_id} is live for this client id")
            raise IdentityConflictError(f"client id {request.client_job_id} was used")
        return self.admit(request)

    def _next_fault(self, request: SubmitRequest) -> _SubmitFault | None:
        for fault in self._submit_faults:
            if fault.task_id is None or fault.task_id == request.task_id:
                self._submit_faults.remove(fault)
                return fault
        return None

    def find_by_client_job_id(self, client_job_id: str) -> JobSnapshot | None:
        """The job with this client job id, unless lost."""
        job = self.job_of(client_job_id)
        return None if job is None or job.job_id in self._lost else job

    def snapshot(self, job_id: str) -> JobSnapshot | None:
        """The job, unless lost."""
        return None if job_id in self._lost else self.jobs.get(job_id)

    def cancel(self, job_id: str) -> CancelResult:
        """Cancel a live job (applied) or report an ended one (not applied)."""
        if self._cancel_faults:
            fault = self._cancel_faults.popleft()
            if fault == "answer_committing":
                raise AnswerCommittingError(f"job {job_id} is committing its answer")
            if fault == "not_found":
                raise JobNotFoundError(job_id)
            raise ExecutorPersistenceError(f"cannot cancel {job_id}")
        job = self.snapshot(job_id)
        if job is None:
            raise JobNotFoundError(job_id)
        if not job.live:
            return CancelResult(applied=False, job=job)
        return CancelResult(applied=True, job=self._set(job_id, status="canceled"))

    def complete(self, job_id: str, text: str) -> JobSnapshot:
        """Complete a job with ``text`` as its answer."""
        if self.snapshot(job_id) is None:
            raise JobNotFoundError(job_id)
        return self._set(job_id, status="completed", response=text)

    def admit(self, request: SubmitRequest) -> JobSnapshot:
        """Admit a job for ``request`` without any fault: as though a submit landed but
        its answer was lost (a redrive then adopts it)."""
        job = JobSnapshot(
            job_id=f"job-{len(self.jobs) + 1}",
            client_job_id=request.client_job_id,
            status="queued",
        )
        self.jobs[job.job_id] = job
        self._by_client[request.client_job_id] = job.job_id
        return job

    def _set(
        self,
        job_id: str,
        *,
        status: str,
        error_code: str | None = None,
        error_message: str | None = None,
        response: str | None = None,
        completed_at: float | None = None,
    ) -> JobSnapshot:
        job = self.jobs.get(job_id)
        if job is None:
            raise JobNotFoundError(job_id)
        updated = replace(
            job,
            status=status,
            error_code=error_code,
            error_message=error_message,
            response=response if response is not None else job.response,
            completed_at=completed_at,
        )
        self.jobs[job_id] = updated
        return updated
