"""The dispatcher's behaviour, seventh round (seed 003, glasses-server's task-dispatcher):
minting a run. Attempts per task and day and the daily cap, deterministic client job ids,
and the host's per-run data, asked only for a run that is minted. Each test names the
behaviour and the seed function it comes from; the fixes are written down in
docs/seed-fidelity.md, "Round seven"."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from helpers.probes import job_of, refused_with, settle
from helpers.seed_dispatcher_7 import DAY, DAY_MS, HOUR, MINUTE, SPACING, T0

from tasktrail.domain import ManualClock, Registry, RunSettings, Scheduler, Worker
from tasktrail.domain.runs.executor import SubmitRequest
from tasktrail.domain.runs.gate import SwitchedGate
from tasktrail.domain.runs.identity import client_job_id
from tasktrail.domain.runs.memory_executor import InMemoryExecutor


def failed_and_settled(runs: Scheduler, executor: InMemoryExecutor, run_id: str) -> None:
    """End the run's job failed and reconcile it, so the task may run again."""
    executor.finish(job_of(runs, run_id), "failed")
    assert settle(runs, run_id) == "failed:failed"


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
