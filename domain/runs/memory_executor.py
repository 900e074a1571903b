"""An executor in memory, for tests and the demo, that fails when told to.

:class:`InMemoryExecutor` implements :class:`~.executor.Executor` with jobs in
a dict, and can be told to fail each of the ways a real executor does: submit
faults (an identity conflict, a live job to adopt, an orphan fence, a drain, a
transient error), cancel faults, jobs that end or vanish.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

from .executor import (
    TERMINAL_JOB_STATUSES,
    ActiveJobError,
    AnswerCommittingError,
    CancelResult,
    DrainError,
    ExecutorPersistenceError,
    IdentityConflictError,
    JobNotFoundError,
    JobSnapshot,
    OrphanFenceError,
    SubmitRequest,
    TransientError,
)

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
