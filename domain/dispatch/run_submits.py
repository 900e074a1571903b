"""Adopt-or-submit: handing a minted run to the executor (SPEC.md section 3).

:class:`RunSubmits` is the part of :class:`~.run_commands.RunCommands` that calls
the executor for a run still ``dispatching``, at its mint and at each redrive:
it takes a live job its deterministic client job id already names, else submits,
classifies a failed submit and records what came of it as run events. It never
raises what the executor raised; what it came to is a :data:`SubmitOutcome`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..errors import ConflictError
from ..runs.executor import JobSnapshot, SubmitRequest, classify_submit_error, submit_wait_ms
from ..runs.outcomes import record_submit_failed, record_taken
from ..runs.state import RunState
from .executor_calls import quietly

if TYPE_CHECKING:
    from ..runs.executor import Executor
    from ..runs.settings import RunSettings
    from ..world import World
    from .run_runtime import RunRuntime

T = TypeVar("T")
SubmitOutcome = Literal[
    "submitted", "adopted", "identity_conflict", "adopt", "fence", "drain", "transient", "stale"
]
"""What one adopt-or-submit came to: taken (``submitted``, ``adopted``), a submit
error class, or ``stale`` (the run had ended meanwhile)."""


class RunSubmits:
    """Adopt-or-submit, mixed into :class:`~.run_commands.RunCommands`."""

    if TYPE_CHECKING:
        world: World

        def _decide(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...
        def _runs_runtime(self) -> RunRuntime: ...
        def _require_executor(self) -> Executor: ...
        def run(self, run_id: str) -> RunState: ...
        @property
        def run_settings(self) -> RunSettings: ...

    def _adopt_or_submit(self, run_id: str) -> SubmitOutcome:
        """Take a live job with the run's client job id, or submit; record what came of it."""
        executor = self._require_executor()
        runtime = self._runs_runtime()
        run = self.run(run_id)
        found = quietly(lambda: executor.find_by_client_job_id(run.client_job_id))
        if found is not None and found.live:
            return self._record_taken(run_id, found, adopted=True)
        runtime.submit_live.add(run_id)
        try:
            try:
                job = executor.submit(self._request(run))
            except Exception as error:  # every submit error is classified and recorded
                error_class = classify_submit_error(error)
                if error_class == "adopt":
                    existing = quietly(lambda: executor.find_by_client_job_id(run.client_job_id))
                    if existing is not None and existing.live:
                        return self._record_taken(run_id, existing, adopted=True)
                wait_ms = submit_wait_ms(error, self.run_settings.submit_spacing_ms)
                try:
                    recorded = self._decide(
                        record_submit_failed,
                        run_id,
                        error_class,
                        error_text(error),
                        retry_after_ms=wait_ms,
                    )
                except ConflictError:
                    return "stale"  # another writer moved the run on first
                return error_class if recorded is not None else "stale"
            return self._record_taken(run_id, job, adopted=False)
        finally:
            runtime.submit_live.discard(run_id)

    def _record_taken(self, run_id: str, job: JobSnapshot, *, adopted: bool) -> SubmitOutcome:
        try:
            recorded = self._decide(record_taken, run_id, job, adopted=adopted)
        except ConflictError:
            # Another writer moved the run on first; a redrive adopts this job if it
            # is still dispatching.
            return "stale"
        if recorded is None:
            return "stale"
        return "adopted" if adopted else "submitted"

    def _request(self, run: RunState) -> SubmitRequest:
        task = self.world.get(run.task_id)
        return SubmitRequest(
            client_job_id=run.client_job_id,
            run_id=run.run_id,
            task_id=run.task_id,
            task_kind=task.kind if task is not None else "",
            day=run.day,
            attempt=run.attempt,
            trigger=run.trigger,
            tz=run.tz,
            payload=run.payload,
        )


def error_text(error: BaseException) -> str:
    """An error as recorded or reported: its class, and its message if it has one."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
