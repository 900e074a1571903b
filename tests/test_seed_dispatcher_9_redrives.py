"""The dispatcher's behaviour, ninth round (seed 003, glasses-server's task-dispatcher): the
corners earlier rounds touched least, in redrives: what a redrive's wait counts from, and
what adopt does with a job in each state. Each test names the behaviour and the seed
function it comes from; the fixes are written down in docs/seed-fidelity.md, "Round nine
(dispatcher)"."""

from __future__ import annotations

import pytest
from helpers.probes import settle
from helpers.seed_dispatcher_9 import MINUTE, SECOND, SPACING, T0

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.runs.executor import ActiveJobError, JobSnapshot, SubmitRequest
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.replay import replay

# ─── a redrive's wait ─────────────────────────────────────────────────────────────


def test_dispatcher_failed_redrive_waits_from_its_own_submit(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """adoptOrSubmit sets ``retryAfter = now + wait`` at each failed submit: a redrive made
    late (three minutes after the run's retry time) that fails again waits the spacing
    from the redrive, to the ms, and a fence met by the next redrive waits its own time
    from then."""
    executor.fail_next_submit("transient", times=2)
    run_id = runs.mint_run(runs.submit("job", id="t1"))
    assert runs.run(run_id).retry_after == T0 + SPACING
    clock.set(T0 + SPACING + 3 * MINUTE)
    assert settle(runs, run_id) == "dispatching:transient"
    redriven = clock.now
    assert runs.run(run_id).retry_after == redriven + SPACING
    clock.set(redriven + SPACING - 1)
    assert settle(runs, run_id) == "unchanged"
    clock.set(redriven + SPACING)
    executor.fail_next_submit("fence", retry_after_ms=7 * SECOND)
    assert settle(runs, run_id) == "dispatching:fence"
    assert runs.run(run_id).retry_after == clock.now + 7 * SECOND
    assert runs.run(run_id).submit_attempts == 3


@pytest.mark.parametrize("fence_ms", [0, -5 * SECOND])
def test_dispatcher_fence_of_no_time_is_redriven_at_the_next_visit(
    runs: Scheduler,
    clock: ManualClock,
    executor: InMemoryExecutor,
    sqlite_url: str,
    fence_ms: int,
) -> None:
    """adoptOrSubmit takes a fence's ``retryAfterMs`` as it is: a fence of zero or less
    puts the run's retry time at or before now, so the next visit redrives it at once (an
    attempt used), and the log replays."""
    executor.fail_next_submit("fence", retry_after_ms=fence_ms)
    run_id = runs.mint_run(runs.submit("job", id="t1"))
    assert runs.run(run_id).retry_after == clock.now + fence_ms
    assert settle(runs, run_id) == "running"
    assert runs.run(run_id).submit_attempts == 1
    (row,) = replay(sqlite_url, snapshots=False).ledger
    assert (row["status"], row["submit_attempts"]) == ("running", 1)


# ─── adopt-or-submit and the job's state ──────────────────────────────────────────


def _job_in(executor: InMemoryExecutor, request: SubmitRequest, status: str) -> JobSnapshot:
    """A job for ``request`` that the executor admitted and moved to ``status``."""
    job = executor.admit(request)
    if status == "running":
        return executor.start(job.job_id)
    if status != "queued":
        return executor.finish(job.job_id, status)
    return job


@pytest.mark.parametrize(
    "status", ["queued", "running", "completed", "failed", "canceled", "interrupted"]
)
def test_dispatcher_redrive_looks_up_a_job_and_adopts_it_only_while_it_is_live(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor, status: str
) -> None:
    """adoptOrSubmit looks the client job id up first: a job there that is queued or
    running is adopted in that status, without a submit; one that ended, however it
    ended, is never adopted: the run submits again."""
    executor.fail_next_submit("transient")
    run_id = runs.mint_run(runs.submit("job", id="t1"))
    job = _job_in(executor, executor.requests[0], status)  # the submit landed after all
    clock.advance(SPACING)
    settle(runs, run_id)
    run = runs.run(run_id)
    if status in ("queued", "running"):
        assert (run.status, run.job_id, run.last_known_status) == ("running", job.job_id, status)
        assert len(executor.requests) == 1
    else:
        assert run.job_id != job.job_id
        assert [r.run_id for r in executor.requests] == [run_id, run_id]


class AdmitsThenRefuses(InMemoryExecutor):
    """Admits each submit's job in ``status`` and then answers that a live job is there
    (an answer lost while the job moved on)."""

    status: str = "queued"

    def submit(self, request: SubmitRequest) -> JobSnapshot:
        self.requests.append(request)
        _job_in(self, request, self.status)
        raise ActiveJobError("a job with this client id is live")


@pytest.mark.parametrize(
    "status", ["queued", "running", "completed", "failed", "canceled", "interrupted"]
)
def test_dispatcher_adopt_error_takes_the_job_only_while_it_is_live(
    scheduler: Scheduler, clock: ManualClock, status: str
) -> None:
    """adoptOrSubmit, on an active-job error, looks the client job id up again: a job that
    is queued or running is adopted in that status (no attempt used); one that ended is
    not, and the run waits the submit spacing with an attempt used."""
    clock.set(T0)
    executor = AdmitsThenRefuses()
    executor.status = status
    scheduler.configure_runs(executor=executor)
    run = scheduler.run(scheduler.mint_run(scheduler.submit("job", id="t1")))
    if status in ("queued", "running"):
        assert (run.status, run.last_known_status, run.submit_attempts) == ("running", status, 0)
    else:
        assert (run.status, run.job_id, run.last_submit_error) == ("dispatching", None, "adopt")
        assert (run.submit_attempts, run.retry_after) == (1, T0 + SPACING)
