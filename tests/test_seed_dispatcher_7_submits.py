"""The dispatcher's behaviour, seventh round (seed 003, glasses-server's task-dispatcher):
what a submit's answer leads to. Submit error classes, and adopt-or-submit: a live job
under the run's id adopted, a submit cut off adopted after the dispatch wall, an adopted
run counted as fired, a tick stopped by a manual run. Each test names the behaviour and
the seed function it comes from; the fixes are written down in docs/seed-fidelity.md,
"Round seven"."""

from __future__ import annotations

import pytest
from helpers.probes import settle
from helpers.seed_dispatcher_7 import DAY, SECOND, SPACING, T0

from tasktrail.domain import ManualClock, Registry, RunSettings, Scheduler
from tasktrail.domain.runs.executor import (
    ActiveJobError,
    GenerationOrderError,
    JobNotFoundError,
    JobSnapshot,
    SubmitRequest,
    TransientError,
)
from tasktrail.domain.runs.identity import client_job_id
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.outcomes import SubmitFailed


def request_for(task: str, tz: str, day: str, attempt: int) -> SubmitRequest:
    """A submit request with the client job id a run of these inputs carries."""
    return SubmitRequest(
        client_job_id=client_job_id(task, tz, day, attempt),
        run_id=f"{task}|{day}|{attempt}",
        task_id=task,
        task_kind="job",
        day=day,
        attempt=attempt,
        trigger="manual",
        tz=tz,
    )


# ─── submit error classes ────────────────────────────────────────────────────────


class Raising(InMemoryExecutor):
    """Its first submit raises ``error``; with ``admit``, after admitting the job (and
    ending it ``ended``, if given)."""

    def __init__(self, error: BaseException, *, admit: bool = False, ended: str = "") -> None:
        super().__init__()
        self.error: BaseException | None = error
        self.admit_first, self.ended = admit, ended

    def submit(self, request: SubmitRequest) -> JobSnapshot:
        error, self.error = self.error, None
        if error is None:
            return super().submit(request)
        self.requests.append(request)
        if self.admit_first:
            job = self.admit(request)
            if self.ended:
                self.finish(job.job_id, self.ended)
        raise error


@pytest.mark.parametrize(
    "error",
    [
        OSError("connection reset"),
        ValueError("bad answer"),
        JobNotFoundError("j"),
        TransientError(),
    ],
    ids=["os", "value", "executor", "transient"],
)
def test_dispatcher_any_other_submit_error_is_transient(
    scheduler: Scheduler, clock: ManualClock, error: Exception
) -> None:
    """classifySubmitError: anything that is not an identity conflict, an active or
    out-of-order generation, an orphan fence or a maintenance drain is ``transient``:
    it uses a submit attempt, waits the submit spacing and is thrown as
    ``submit_failed``; the redrive submits the same id again."""
    clock.set(T0)
    executor = Raising(error)
    scheduler.configure_runs(executor=executor)
    with pytest.raises(SubmitFailed) as caught:
        scheduler.mint_run(scheduler.submit("job", id="t1"), raise_on_submit_error=True)
    assert caught.value.code == "submit_failed"
    run = scheduler.run(caught.value.run_id)
    assert (run.status, run.last_submit_error, run.submit_attempts) == (
        "dispatching",
        "transient",
        1,
    )
    assert run.retry_after == T0 + SPACING
    clock.advance(SPACING)
    assert settle(scheduler, run.run_id) == "running"
    assert executor.requests[0].client_job_id == executor.requests[1].client_job_id


def test_dispatcher_generation_order_error_adopts_the_live_job(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """classifySubmitError puts an out-of-order generation with an active one (``adopt``):
    the job found by the client job id is taken, no attempt used, nothing submitted
    again."""
    clock.set(T0)
    executor = Raising(GenerationOrderError("generation 1 is behind"), admit=True)
    scheduler.configure_runs(executor=executor)
    run = scheduler.run(scheduler.mint_run(scheduler.submit("job", id="t1")))
    assert (run.status, run.submit_attempts, run.job_id) == ("running", 0, "job-1")
    assert [type(e).__name__ for e in scheduler.run_history(run.run_id)] == [
        "RunMinted",
        "RunAdopted",
    ]
    assert len(executor.requests) == 1


def test_dispatcher_adopt_that_finds_the_job_ended_waits_like_a_transient_error(
    scheduler: Scheduler, clock: ManualClock
) -> None:
    """adoptOrSubmit adopts on an ``adopt`` error only a job that is not terminal; one
    that ended is left: the error uses an attempt and waits the submit spacing, and
    the redrive submits again instead of adopting it."""
    clock.set(T0)
    executor = Raising(ActiveJobError("already there"), admit=True, ended="completed")
    scheduler.configure_runs(executor=executor)
    run = scheduler.run(scheduler.mint_run(scheduler.submit("job", id="t1")))
    assert (run.status, run.last_submit_error, run.submit_attempts) == ("dispatching", "adopt", 1)
    assert run.job_id is None and run.retry_after == T0 + SPACING
    clock.advance(SPACING)
    settle(scheduler, run.run_id)
    assert len(executor.requests) == 2 and scheduler.run(run.run_id).job_id is None


# ─── adopt-or-submit ─────────────────────────────────────────────────────────────


class LookupFails(InMemoryExecutor):
    """Its lookups by client job id raise."""

    def find_by_client_job_id(self, client_job_id: str) -> JobSnapshot | None:
        raise OSError("lookup timed out")


def test_dispatcher_new_run_adopts_a_live_job_its_id_names_without_submitting(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    """adoptOrSubmit looks the client job id up before every submit, the first one of a
    run too: a live job already under the id a new run derives is taken (nothing
    submitted); a lookup that fails counts as none, and the run submits."""
    existing = executor.admit(request_for("t1", "UTC", DAY, 1))
    run = runs.run(runs.mint_run(runs.submit("job", id="t1")))
    assert (run.status, run.job_id, executor.requests) == ("running", existing.job_id, [])
    looked_up = LookupFails()
    runs.configure_runs(executor=looked_up)
    other = runs.run(runs.mint_run(runs.submit("job", id="t2")))
    assert other.status == "running" and len(looked_up.requests) == 1


def test_dispatcher_run_whose_submit_was_cut_off_is_adopted_after_the_dispatch_wall(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    """mintRun sets ``retryAfter = firedAt + TASK_DISPATCH_WALL_MS``; adoptOrSubmit finds
    the job first. A process that stopped after the executor admitted the job but
    before the answer was recorded leaves the run dispatching; a new process's
    reconcile leaves it alone until 25 s after it was minted, then adopts the job:
    one submit in all."""
    clock.set(T0)
    executor = Raising(KeyboardInterrupt(), admit=True)
    first = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    first.configure_runs(executor=executor)
    with pytest.raises(KeyboardInterrupt):
        first.mint_run(first.submit("job", id="t1"))
    first.close()
    run_id = f"t1|{DAY}|1"
    with Scheduler.open(sqlite_url, clock=clock, registry=registry) as second:
        second.configure_runs(executor=executor)
        assert second.run(run_id).retry_after == T0 + 25 * SECOND
        clock.advance(25 * SECOND - 1)
        assert settle(second, run_id) == "unchanged"
        clock.advance(1)
        assert settle(second, run_id) == "running"
        assert [type(e).__name__ for e in second.run_history(run_id)] == [
            "RunMinted",
            "RunAdopted",
        ]
    assert len(executor.requests) == 1


def test_dispatcher_tick_counts_an_adopted_run_as_fired(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """dispatchDueTasks counts a run toward ``perTick`` once adoptOrSubmit returned it
    running, adopted or submitted: an adopted run fills the tick."""
    runs.configure_runs(settings=RunSettings(per_tick=1))
    first, second = runs.submit("job", id="a"), runs.submit("job", id="b")
    for task in (first, second):
        runs.schedule_run(task, clock.now)
    executor.fail_next_submit("adopt", task_id="a")
    report = runs.dispatch_due()
    assert report.fired == report.minted == [f"a|{DAY}|1"]
    assert runs.run_history(report.fired[0])[-1].__class__.__name__ == "RunAdopted"
    assert runs.dispatch_due().fired == [f"b|{DAY}|1"]


def test_dispatcher_tick_stops_when_a_manual_run_took_a_due_task_first(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """dispatchDueTasks breaks its loop when mintRun answers ``task_running``: a manual
    run started on a due task after the tick picked it ends the tick, and the tasks
    after it wait for the next one."""
    runs.configure_runs(settings=RunSettings(per_tick=5))
    tasks = [runs.submit("job", id=n) for n in ("a", "b", "c")]
    for task in tasks:
        runs.schedule_run(task, clock.now)

    def manual_meanwhile(request: SubmitRequest) -> None:
        executor.on_submit = None
        runs.mint_run("b")

    executor.on_submit = manual_meanwhile
    report = runs.dispatch_due()
    assert report.fired == [f"a|{DAY}|1"] and report.reason == "task_running"
    assert runs.runs("c") == []
    assert runs.dispatch_due().fired == [f"c|{DAY}|1"]
