"""The dispatcher's behaviour, seventh round (seed 003, glasses-server's task-dispatcher):
minting attempts per task and day, deterministic client job ids, dispatch caps and
slots, submit error classes and adopt-or-submit. Each test names the behaviour and the
seed function it comes from; the fixes are written down in docs/seed-fidelity.md,
"Round seven"."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from helpers.probes import job_of, refused_with, settle

from tasktrail.domain import ManualClock, Registry, RunSettings, Scheduler, Worker
from tasktrail.domain.runs.executor import (
    ActiveJobError,
    GenerationOrderError,
    JobNotFoundError,
    JobSnapshot,
    SubmitRequest,
    TransientError,
)
from tasktrail.domain.runs.gate import SwitchedGate
from tasktrail.domain.runs.identity import client_job_id
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.outcomes import SubmitFailed

T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC."""
DAY = "2026-01-01"
SECOND = 1_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY_MS = 24 * HOUR
SPACING = 2 * MINUTE
"""The default submit spacing."""


def failed_and_settled(runs: Scheduler, executor: InMemoryExecutor, run_id: str) -> None:
    """End the run's job failed and reconcile it, so the task may run again."""
    executor.finish(job_of(runs, run_id), "failed")
    assert settle(runs, run_id) == "failed:failed"


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


# ─── attempts per task and day, and the daily cap ──────────────────────────────


def test_dispatcher_attempts_count_the_days_runs_whatever_zone_minted_them(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    """mintRun: ``attempt = 1 +`` the task's runs whose ``day`` is today's date, compared
    as dates; the client job id takes the zone in force when the run is minted."""
    task = runs.submit("job", id="t1")
    first = runs.mint_run(task)
    failed_and_settled(runs, executor, first)
    # 03:00 in New York: still 2026-01-01 there, so the day's runs go on counting.
    runs.configure_runs(settings=RunSettings(tz="America/New_York"))
    second = runs.run(runs.mint_run(task))
    assert (second.run_id, second.attempt, second.tz) == (f"t1|{DAY}|2", 2, "America/New_York")
    assert second.client_job_id == client_job_id("t1", "America/New_York", DAY, 2)
    assert runs.run(first).client_job_id == client_job_id("t1", "UTC", DAY, 1)


def test_dispatcher_a_day_starts_at_local_midnight_for_the_cap_attempts_and_spacing(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """pickEligible and runTaskNow count the runs of ``localClock(now, tz).day``: at local
    midnight of the configured zone the daily cap, the task's attempts and its run
    spacing start over (a run five minutes before midnight spaces nothing after it)."""
    runs.configure_runs(settings=RunSettings(tz="Asia/Kolkata", cap_per_day=2, runs_per_day=1))
    midnight = T0 + 10 * HOUR + 30 * MINUTE  # 18:30 UTC: 2026-01-02 00:00 in Kolkata
    a, b, c = (runs.submit("job", id=name) for name in ("a", "b", "c"))
    clock.set(midnight - 5 * MINUTE)
    failed_and_settled(runs, executor, runs.mint_run(a, trigger="scheduled"))
    runs.mint_run(c)
    clock.set(midnight - 1)
    assert refused_with(runs, b, trigger="scheduled") == "cap_reached"
    assert refused_with(runs, a) == "runs_exhausted"
    clock.set(midnight)
    again = runs.run(runs.mint_run(a, trigger="scheduled"))
    assert (again.day, again.attempt) == ("2026-01-02", 1)
    assert again.client_job_id == client_job_id("a", "Asia/Kolkata", "2026-01-02", 1)
    assert runs.run(runs.mint_run(b, trigger="scheduled")).day == "2026-01-02"


def test_dispatcher_daily_cap_counts_every_run_minted_that_day(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """pickEligible stops at ``capPerDay`` runs whose ``day`` is today: every run minted
    today counts, a manual one, one failed by an identity conflict, one still
    dispatching after a drain; a refused mint mints nothing and counts nothing, and a
    run of yesterday still running counts toward yesterday only."""
    yesterday = runs.mint_run(runs.submit("job", id="y"))
    clock.advance(DAY_MS)
    runs.configure_runs(settings=RunSettings(cap_per_day=3))
    conflicted, drained, fired, over = (runs.submit("job", id=n) for n in ("m", "d", "f", "o"))
    executor.fail_next_submit("identity_conflict")
    assert runs.run(runs.mint_run(conflicted)).status == "failed"
    executor.fail_next_submit("drain")
    assert runs.run(runs.mint_run(drained, trigger="scheduled")).status == "dispatching"
    assert refused_with(runs, drained, trigger="scheduled") == "task_running"
    assert runs.run(yesterday).status == "running"
    assert runs.run(runs.mint_run(fired, trigger="scheduled")).status == "running"
    assert refused_with(runs, over, trigger="scheduled") == "cap_reached"
    assert runs.ledger.runs_on("2026-01-02") == 3 and runs.ledger.runs_on(DAY) == 1


def test_dispatcher_yesterdays_dispatching_run_does_not_hold_up_todays_first_run(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """runTaskNow and mintRun look for a run in flight on today's date only (and for the
    task's ``running`` marker, which only a taken job sets): a run of yesterday still
    dispatching lets today's attempt 1 start; reconcile then expires yesterday's."""
    executor.fail_next_submit("transient")
    stuck = runs.mint_run(runs.submit("job", id="t1"))
    clock.advance(DAY_MS)
    today = runs.run(runs.mint_run("t1"))
    assert (today.day, today.attempt, today.status) == ("2026-01-02", 1, "running")
    assert today.client_job_id != runs.run(stuck).client_job_id
    assert settle(runs, stuck) == "failed:expired"
    assert len(executor.requests) == 2


# ─── client job ids ──────────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("task", "tz", "day", "attempt", "expected"),
    [
        # Worked out with node's crypto (the seed's runtime hashes the text as UTF-8).
        ("récolte/日報", "UTC", DAY, 1, "cf1a34b1-59dd-4b42-908e-e44666b051b0"),
        ("t1", "America/New_York", DAY, 2, "30e16f97-e845-4ad9-b29b-6b75ab00a96a"),
        ("t1", "Pacific/Kiritimati", "2026-01-02", 1, "86ba58bd-4c5e-4209-a6cd-3fb911a038fe"),
    ],
)
def test_dispatcher_client_job_id_is_the_seeds_digest_of_its_text(
    task: str, tz: str, day: str, attempt: int, expected: str
) -> None:
    """taskClientJobId: sha256 of ``task|{task}|{tz}|{day}|{attempt}`` as UTF-8, its first
    16 bytes with the version nibble 4 and the variant bits 10, lowercase 8-4-4-4-12."""
    assert client_job_id(task, tz, day, attempt) == expected


def test_dispatcher_client_job_id_depends_only_on_task_zone_day_and_attempt(
    tmp_path: Any, clock: ManualClock, registry: Registry
) -> None:
    """mintRun derives the client job id from the task, the zone, the day and the attempt
    alone: two stores minting the same attempt of the same task id, one manual with a
    payload and one scheduled for another time, submit the same id."""
    ids = []
    for name, trigger in (("one", "manual"), ("two", "scheduled")):
        clock.set(T0 + (HOUR if name == "two" else 0))
        with Scheduler.open(str(tmp_path / f"{name}.db"), clock=clock, registry=registry) as s:
            executor = InMemoryExecutor()
            s.configure_runs(executor=executor)
            task = s.submit("leaf" if name == "two" else "job", id="t1")
            if trigger == "scheduled":
                s.schedule_run(task, clock.now)
            run_id = s.mint_run(task, trigger=trigger, payload={"session": name})
            ids.append(executor.requests[0].client_job_id)
            assert s.run(run_id).client_job_id == ids[-1]
    assert ids[0] == ids[1] == client_job_id("t1", "UTC", DAY, 1)


def test_dispatcher_redrive_submits_the_id_minted_even_after_the_zone_changed(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    """adoptOrSubmit resubmits ``run.clientJobId``, the id recorded when the run was
    minted: after a reopen and a change of zone, the same attempt keeps its id."""
    clock.set(T0)
    executor = InMemoryExecutor()
    with Scheduler.open(sqlite_url, clock=clock, registry=registry) as first:
        first.configure_runs(executor=executor)
        executor.fail_next_submit("transient")
        run_id = first.mint_run(first.submit("job", id="t1"))
    minted = client_job_id("t1", "UTC", DAY, 1)
    with Scheduler.open(sqlite_url, clock=clock, registry=registry) as second:
        second.configure_runs(executor=executor, settings=RunSettings(tz="Asia/Tokyo"))
        clock.advance(SPACING)
        assert settle(second, run_id) == "running"
        assert [r.client_job_id for r in executor.requests] == [minted, minted]
        assert second.run(run_id).client_job_id == minted


# ─── slots ───────────────────────────────────────────────────────────────────────


class CutOff(InMemoryExecutor):
    """Its next submit raises ``error`` before any job is admitted, once."""

    error: BaseException | None = None

    def submit(self, request: SubmitRequest) -> JobSnapshot:
        error, self.error = self.error, None
        if error is not None:
            self.requests.append(request)
            raise error
        return super().submit(request)


def test_dispatcher_a_slot_is_freed_when_its_submit_ends_whatever_it_came_to(
    scheduler: Scheduler, clock: ManualClock, gate: SwitchedGate
) -> None:
    """runTaskNow and dispatchDueTasks give their slot back in a ``finally``: after a
    refusal, a failed submit thrown to the caller, or an error that escapes the submit
    altogether, the one manual slot (and a single background slot) is free again and
    the dispatch lease released."""
    clock.set(T0)
    executor = CutOff()
    scheduler.configure_runs(executor=executor, gate=gate, settings=RunSettings(per_tick=1))
    busy, thrown, cut, after, later = (
        scheduler.submit("job", id=n) for n in ("b", "t", "c", "a", "l")
    )
    scheduler.mint_run(busy)
    assert refused_with(scheduler, busy) == "task_running"
    executor.fail_next_submit("transient")
    with pytest.raises(SubmitFailed):
        scheduler.mint_run(thrown, raise_on_submit_error=True)
    executor.error = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        scheduler.mint_run(cut, trigger="scheduled")
    assert gate.leases == 0
    assert scheduler.run(scheduler.mint_run(after)).status == "running"
    assert scheduler.run(scheduler.mint_run(later, trigger="scheduled")).status == "running"


def test_dispatcher_reconcile_redrives_without_taking_a_slot(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """reconcileOne redrives a dispatching run straight through adoptOrSubmit, with no
    slot: while the manual slot and every background slot are held by submits in
    flight, a due redrive still submits."""
    runs.configure_runs(settings=RunSettings(per_tick=1))
    executor.fail_next_submit("transient")
    waiting = runs.mint_run(runs.submit("job", id="w"))
    clock.advance(SPACING)
    runs.submit("job", id="m")
    seen: dict[str, Any] = {}

    def nested(request: SubmitRequest) -> None:
        if request.task_id == "s":  # the background slot is held: take the manual one
            seen["manual"] = runs.run(runs.mint_run("m")).status
        elif request.task_id == "m":  # both slots are held now
            seen["reconcile"] = runs.reconcile().outcomes

    executor.on_submit = nested
    runs.mint_run(runs.submit("job", id="s"), trigger="scheduled")
    assert seen["manual"] == "running" and seen["reconcile"][waiting] == "running"


def test_dispatcher_tick_fires_while_a_background_slot_is_free_at_each_fire(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """dispatchDueTasks stops once ``backgroundSlots >= perTick`` and otherwise takes and
    gives back one slot a fire: with one slot held by a scheduled submit in flight, a
    tick fires nothing when there is one slot and ``perTick`` runs when there are two;
    the reserved manual slot is no background slot."""
    due = [runs.submit("job", id=f"d{n}") for n in range(2)]
    for task in due:
        runs.schedule_run(task, clock.now)
    fired: dict[int, list[str]] = {}

    def tick_meanwhile(per_tick: int) -> None:
        runs.configure_runs(settings=RunSettings(per_tick=per_tick))

        def tick(request: SubmitRequest) -> None:
            executor.on_submit = None
            fired[per_tick] = [runs.run(r).task_id for r in runs.dispatch_due().fired]

        executor.on_submit = tick
        runs.mint_run(runs.submit("job", id=f"held{per_tick}"), trigger="scheduled")

    tick_meanwhile(1)
    tick_meanwhile(2)
    assert fired == {1: [], 2: due}
    # A manual run in flight holds no background slot.
    runs.configure_runs(settings=RunSettings(per_tick=1))
    late = runs.submit("job", id="late")
    runs.schedule_run(late, clock.now)

    def tick_during_manual(request: SubmitRequest) -> None:
        executor.on_submit = None
        fired[0] = [runs.run(r).task_id for r in runs.dispatch_due().fired]

    executor.on_submit = tick_during_manual
    runs.mint_run(runs.submit("job", id="manual"))
    assert fired[0] == [late]


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


# ─── the host's per-run data ─────────────────────────────────────────────────────


def test_dispatcher_host_payload_is_asked_only_for_a_run_that_is_minted(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor, gate: SwitchedGate
) -> None:
    """runTaskNow asks mintRun for a run only once its checks passed, and mintRun asks
    the host for the run's session, message era and number: a refused run
    (``task_running``, ``runs_exhausted``, ``scheduled_future``, ``cap_reached``,
    ``dispatch_slots_busy``, a drain) asks the host nothing."""
    asked: list[tuple[str, str]] = []
    runs.configure_runs(
        payload=lambda task, trigger: asked.append((task, trigger)) or {"n": len(asked)},
        settings=RunSettings(runs_per_day=1, cap_per_day=1),
    )
    busy, future, spare, other = (runs.submit("job", id=n) for n in ("b", "f", "s", "o"))
    runs.mint_run(busy)
    runs.schedule_run(future, clock.now + DAY_MS)
    assert asked == [("b", "manual")]
    assert refused_with(runs, busy) == "task_running"
    assert refused_with(runs, future) == "scheduled_future"
    assert refused_with(runs, spare, trigger="scheduled") == "cap_reached"
    executor.finish(job_of(runs, f"b|{DAY}|1"), "failed")
    settle(runs, f"b|{DAY}|1")
    assert refused_with(runs, busy) == "runs_exhausted"
    seen: list[str] = []

    def while_the_slot_is_held(request: SubmitRequest) -> None:
        executor.on_submit = None
        seen.append(refused_with(runs, other))

    executor.on_submit = while_the_slot_is_held
    runs.mint_run(spare)
    gate.draining = True
    assert refused_with(runs, other) == "admissions_closed"  # a drain
    assert seen == ["dispatch_slots_busy"]
    assert asked == [("b", "manual"), ("s", "manual")]
    assert runs.run(f"s|{DAY}|1").payload == {"n": 2}


def test_dispatcher_tick_goes_on_past_a_task_whose_host_payload_failed(
    runs: Scheduler, clock: ManualClock
) -> None:
    """dispatchDueTasks catches what mintRun throws for one row (the host's session or
    message number unavailable) and goes on with the next: that task mints nothing (no
    attempt, no place under the cap) and is due again at the next tick."""
    broken = {"a": "raise", "b": "not json"}

    def payload(task: str, trigger: str) -> Any:
        if broken.get(task) == "raise":
            raise RuntimeError("no session")
        return {1, 2} if broken.get(task) == "not json" else {"session": task}

    runs.configure_runs(payload=payload, settings=RunSettings(per_tick=5))
    for name in ("a", "b", "c"):
        runs.schedule_run(runs.submit("job", id=name), clock.now)
    head = runs.store.head()
    report = runs.dispatch_due()
    assert report.fired == [f"c|{DAY}|1"] and report.reason is None
    assert set(report.payload_errors) == {"a", "b"}
    assert "no session" in report.payload_errors["a"]
    assert runs.runs("a") == runs.runs("b") == [] and runs.ledger.runs_on(DAY) == 1
    assert runs.store.head() == head + 2  # c's RunMinted and RunSubmitted
    broken.clear()
    assert runs.dispatch_due().fired == [f"a|{DAY}|1", f"b|{DAY}|1"]


def test_dispatcher_worker_tick_survives_a_failed_host_payload(
    runs: Scheduler, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """dispatchDueTasks never throws what one row's mint threw: a worker's tick (its
    dispatch and reconcile) goes on, and says which task minted nothing."""

    def payload(task: str, trigger: str) -> Any:
        if task == "a":
            raise RuntimeError("no session")
        return None

    runs.configure_runs(payload=payload)
    for name in ("a", "b"):  # a kind no definition runs here: a host's remote work
        runs.schedule_run(runs.submit("remote", id=name, phase="start"), clock.now)
    with caplog.at_level(logging.WARNING, logger="tasktrail"):
        report = Worker(runs).tick()
    assert report.dispatched == 1 and report.reconciled == 1
    assert any("a" in r.getMessage() and "no session" in r.getMessage() for r in caplog.records)
