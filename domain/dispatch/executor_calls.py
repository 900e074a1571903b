"""The application's calls to a host's executor, with what they raise turned into data.

Executor calls are the only side effects of dispatch. A read whose errors count
as "none" (as :class:`~..runs.executor.Executor` allows) goes through
:func:`quietly`; :func:`cancel` cancels a job and reports what came of it as a
:class:`~..runs.reconcile.CancelObservation`, for the rules to record.
"""

from __future__ import annotations

from collections.abc import Callable

from ..runs.executor import AnswerCommittingError, Executor, JobNotFoundError, JobSnapshot
from ..runs.reconcile import CancelObservation


def quietly(read: Callable[[], JobSnapshot | None]) -> JobSnapshot | None:
    """An executor read whose errors count as "none"."""
    try:
        return read()
    except Exception:
        return None


def cancel(executor: Executor, job_id: str) -> CancelObservation:
    """Cancel a rescheduled run's job; what that came to, any error included."""
    try:
        result = executor.cancel(job_id)
    except AnswerCommittingError:
        # Its answer is being committed: complete it with what it has, then done.
        snapshot = quietly(lambda: executor.snapshot(job_id))
        text = _answer_text(snapshot)
        try:
            completed = executor.complete(job_id, text)
        except Exception:
            return CancelObservation("error")
        return CancelObservation("committed", completed)
    except JobNotFoundError:
        return CancelObservation("not_found")
    except Exception:
        return CancelObservation("error")
    return CancelObservation("applied" if result.applied else "not_applied", result.job)


def _answer_text(snapshot: JobSnapshot | None) -> str:
    """What a committing job is completed with: its response, else its partial text."""
    # runs.committing_text (dispatcher: the job's response whenever it has one, else its
    # partial text): an empty response is still a response; only a missing one falls back.
    if snapshot is None:
        return ""
    for text in (snapshot.response, snapshot.partial_text):
        if text is not None:
            return text
    return ""
