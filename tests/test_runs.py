"""The dispatch run ledger (SPEC.md section 3): identity, admission rules, submit errors.

Each admission rule and each submit error class has a test named for it; every
refusal is checked to append nothing. Reconcile outcomes are in
``test_reconcile.py``.
"""

from __future__ import annotations

import hashlib
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import event_count
from helpers.probes import job_of
from hypothesis import given
from hypothesis import strategies as st

from tasktrail.domain import ConflictError, ManualClock, Registry, RuleViolation, Scheduler, World
from tasktrail.domain.runs.admission import AdmissionRefused, mint
from tasktrail.domain.runs.events import RunSubmitFailed
from tasktrail.domain.runs.identity import client_job_id, local_day
from tasktrail.domain.runs.ledger import ledger_of
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.settings import RunSettings

T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC."""
DAY = "2026-01-01"
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY_MS = 24 * HOUR


@pytest.fixture
def executor() -> InMemoryExecutor:
    """An executor in memory that fails only when told to."""
    return InMemoryExecutor()


@pytest.fixture
def runs(scheduler: Scheduler, clock: ManualClock, executor: InMemoryExecutor) -> Scheduler:
    """A scheduler at 2026-01-01 08:00 UTC handing runs to ``executor``, default settings."""
    clock.set(T0)
    scheduler.configure_runs(executor=executor, settings=RunSettings())
    return scheduler


def refused(scheduler: Scheduler, code: str, command: Callable[..., Any], *args: Any, **kw: Any):
    """Run a command that must be refused with ``code``; check it appended nothing."""
    before = scheduler.store.head()
    with pytest.raises(AdmissionRefused) as caught:
        command(*args, **kw)
    assert caught.value.code == code, caught.value
    assert scheduler.store.head() == before, "a refused command appended events"
    return caught.value


def expected_client_job_id(task: str, tz: str, day: str, attempt: int) -> str:
    """The formula, written out here independently of the code under test."""
    digest = hashlib.sha256(f"task|{task}|{tz}|{day}|{attempt}".encode()).digest()
    raw = list(digest[:16])
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(raw)))


# ─── identity ────────────────────────────────────────────────────────────────


def test_client_job_id_vector() -> None:
    vector = expected_client_job_id("t1", "UTC", "2026-01-01", 1)
    assert client_job_id("t1", "UTC", "2026-01-01", 1) == vector
    # The same value the digest worked out by hand (and node's crypto agreed).
    assert vector == "703fe006-bc0f-4aaf-a608-0af7571c4556"
    parsed = uuid.UUID(vector)
    assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    for task, tz, day, attempt in [
        ("t1", "UTC", "2026-01-01", 2),
        ("t1", "Europe/Berlin", "2026-01-01", 1),
        ("research-7", "America/New_York", "2025-03-09", 3),
    ]:
        assert client_job_id(task, tz, day, attempt) == expected_client_job_id(
            task, tz, day, attempt
        )
    assert client_job_id("t1", "UTC", "2026-01-01", 2) != vector


@given(
    task=st.text(min_size=1, max_size=20),
    tz=st.sampled_from(["UTC", "Europe/Berlin", "Asia/Kolkata"]),
    day=st.dates().map(lambda d: d.isoformat()),
    attempt=st.integers(min_value=1, max_value=50),
)
def test_client_job_id_is_the_uuid4_of_the_digest(task: str, tz: str, day: str, attempt: int):
    """Formatted by the uuid module, the id is the same value as the bits set by hand."""
    value = client_job_id(task, tz, day, attempt)
    assert value == expected_client_job_id(task, tz, day, attempt)
    assert uuid.UUID(value).version == 4 and str(uuid.UUID(value)) == value


def test_run_identity_and_client_job_id_of_a_minted_run(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job", id="t1")
    run_id = runs.mint_run(task)
    run = runs.run(run_id)
    assert run_id == f"t1|{DAY}|1" == run.run_id
    assert (run.task_id, run.day, run.attempt, run.tz, run.trigger) == (
        "t1",
        DAY,
        1,
        "UTC",
        "manual",
    )
    assert run.client_job_id == expected_client_job_id("t1", "UTC", DAY, 1)
    assert executor.requests[0].client_job_id == run.client_job_id
    assert executor.requests[0].generation == 1


def test_ledger_attempts_count_every_run_of_the_day(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("identity_conflict")
    first = runs.mint_run(task)  # failed: still counts
    second = runs.mint_run(task)
    executor.finish(job_of(runs, second), "failed")
    runs.reconcile()
    third = runs.mint_run(task)
    assert [runs.run(r).attempt for r in (first, second, third)] == [1, 2, 3]
    executor.finish(job_of(runs, third))
    runs.reconcile()
    clock.advance(DAY_MS)
    fourth = runs.mint_run(task)
    assert runs.run(fourth).attempt == 1 and runs.run(fourth).day == "2026-01-02"
    assert len(runs.runs(task)) == 4 and len(runs.runs(task, DAY)) == 3


def test_day_and_zone_come_from_the_clock_and_the_configured_zone(
    runs: Scheduler, clock: ManualClock
) -> None:
    runs.configure_runs(settings=RunSettings(tz="Europe/Berlin"))
    clock.set(T0 + 15 * HOUR + 30 * MINUTE)  # 23:30 UTC, 00:30 in Berlin the next day
    assert local_day(clock.now, "UTC") == DAY
    assert runs.today() == "2026-01-02"
    task = runs.submit("job", id="t1")
    run = runs.run(runs.mint_run(task))
    assert run.day == "2026-01-02" and run.tz == "Europe/Berlin"
    assert run.client_job_id == expected_client_job_id("t1", "Europe/Berlin", "2026-01-02", 1)


def test_mint_run_day_must_be_today(runs: Scheduler) -> None:
    task = runs.submit("job")
    before = runs.store.head()
    with pytest.raises(ValueError, match="today"):
        runs.mint_run(task, day="2026-01-05")
    assert runs.store.head() == before
    assert runs.run(runs.mint_run(task, day=DAY)).day == DAY


# ─── admission rules ─────────────────────────────────────────────────────────


def test_ledger_one_in_flight_run_per_task_day(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("transient")
    dispatching = runs.mint_run(task)
    assert runs.run(dispatching).status == "dispatching"
    refused(runs, "task_running", runs.mint_run, task)
    clock.advance(3 * MINUTE)
    runs.reconcile()  # redriven: running
    assert runs.run(dispatching).status == "running"
    refused(runs, "task_running", runs.mint_run, task)
    refused(runs, "task_running", runs.mint_run, task, trigger="scheduled")
    other = runs.submit("job")
    assert runs.run(runs.mint_run(other)).attempt == 1  # other tasks are not held up


def test_ledger_task_running_across_days_while_its_job_runs(
    runs: Scheduler, clock: ManualClock
) -> None:
    task = runs.submit("job")
    yesterday = runs.mint_run(task)
    clock.advance(DAY_MS)
    assert runs.run(yesterday).status == "running"
    refused(runs, "task_running", runs.mint_run, task)


def test_ledger_runs_exhausted_after_runs_per_day(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    for status in ("failed", "canceled", "completed"):
        run_id = runs.mint_run(task)
        executor.finish(job_of(runs, run_id), status)
        runs.reconcile()
    refusal = refused(runs, "runs_exhausted", runs.mint_run, task)
    assert "3 runs today" in str(refusal) and refusal.task_id == task


def test_ledger_run_spacing_applies_to_scheduled_runs(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    first = runs.mint_run(task, trigger="scheduled")
    executor.finish(job_of(runs, first), "failed")
    runs.reconcile()
    clock.advance(9 * MINUTE)
    refused(runs, "run_spacing", runs.mint_run, task, trigger="scheduled")
    # Manual runs ignore the spacing.
    manual = runs.mint_run(task)
    executor.finish(job_of(runs, manual), "failed")
    runs.reconcile()
    clock.advance(10 * MINUTE)
    assert runs.run(runs.mint_run(task, trigger="scheduled")).attempt == 3


def test_ledger_cap_off_at_zero(runs: Scheduler, clock: ManualClock) -> None:
    runs.configure_runs(settings=RunSettings(cap_per_day=0))
    task = runs.submit("job")
    runs.schedule_run(task, clock.now)
    head = runs.store.head()
    report = runs.dispatch_due()
    assert report.reason == "cap_off" and report.fired == [] and runs.store.head() == head
    refused(runs, "cap_off", runs.mint_run, task, trigger="scheduled")
    assert runs.run(runs.mint_run(task)).trigger == "manual"  # manual runs ignore the cap


def test_ledger_cap_reached_counts_every_run_of_the_day(
    runs: Scheduler, clock: ManualClock
) -> None:
    runs.configure_runs(settings=RunSettings(cap_per_day=2))
    a, b, c = (runs.submit("job") for _ in range(3))
    runs.mint_run(a)  # a manual run counts towards the cap too
    runs.mint_run(b, trigger="scheduled")
    refused(runs, "cap_reached", runs.mint_run, c, trigger="scheduled")
    runs.schedule_run(c, clock.now)
    assert runs.dispatch_due().reason == "cap_reached"
    clock.advance(DAY_MS)
    assert runs.run(runs.mint_run(c, trigger="scheduled")).day == "2026-01-02"


def test_ledger_one_reserved_manual_slot(runs: Scheduler, executor: InMemoryExecutor) -> None:
    first, second = runs.submit("job"), runs.submit("job")
    seen: list[AdmissionRefused] = []

    def concurrent_manual_run(request: Any) -> None:
        # While the first manual submit is in flight, a second manual run is asked for.
        executor.on_submit = None
        head = runs.store.head()
        with pytest.raises(AdmissionRefused) as caught:
            runs.mint_run(second)
        assert runs.store.head() == head
        seen.append(caught.value)

    executor.on_submit = concurrent_manual_run
    runs.mint_run(first)
    assert [r.code for r in seen] == ["dispatch_slots_busy"]
    assert runs.run(runs.mint_run(second)).status == "running"  # the slot was released


def test_ledger_background_slots_per_tick(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    runs.configure_runs(settings=RunSettings(per_tick=1))
    tasks = [runs.submit("job") for _ in range(3)]
    seen: list[str] = []

    def concurrent_scheduled_run(request: Any) -> None:
        executor.on_submit = None
        with pytest.raises(AdmissionRefused) as caught:
            runs.mint_run(tasks[2], trigger="scheduled")
        seen.append(caught.value.code)

    executor.on_submit = concurrent_scheduled_run
    runs.mint_run(tasks[1], trigger="scheduled")
    assert seen == ["dispatch_slots_busy"]
    # dispatch_due fires at most per_tick runs a call.
    for task in tasks:
        runs.schedule_run(task, clock.now)
    clock.advance(11 * MINUTE)
    assert len(runs.dispatch_due().fired) == 1
    assert len(runs.dispatch_due().fired) == 1


def test_ledger_scheduled_future_cannot_run_now(runs: Scheduler, clock: ManualClock) -> None:
    task = runs.submit("job")
    runs.schedule_run(task, clock.now + DAY_MS)
    refusal = refused(runs, "scheduled_future", runs.mint_run, task)
    assert "2026-01-02" in str(refusal)
    runs.schedule_run(task, clock.now + 2 * HOUR)  # later today is fine
    assert runs.run(runs.mint_run(task)).scheduled_for == clock.now + 2 * HOUR


def test_ledger_submit_exhausted_stops_scheduled_runs_for_the_day(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("transient", times=3)
    run_id = runs.mint_run(task, trigger="scheduled")
    for _ in range(2):
        clock.advance(3 * MINUTE)
        runs.reconcile()
    runs.reconcile()
    assert runs.run(run_id).error.code == "submit_exhausted"  # type: ignore[union-attr]
    clock.advance(11 * MINUTE)
    refused(runs, "submit_exhausted", runs.mint_run, task, trigger="scheduled")
    assert runs.run(runs.mint_run(task)).attempt == 2  # a manual run may still try


def test_ledger_task_ended_cannot_run(runs: Scheduler) -> None:
    task = runs.submit("leaf")
    runs.run_until_idle()
    assert runs.task(task).status == "terminal"
    refused(runs, "task_ended", runs.mint_run, task)


def test_every_refusal_appends_nothing(runs: Scheduler, clock: ManualClock) -> None:
    ended = runs.submit("leaf")
    runs.run_until_idle()
    busy, future = runs.submit("job"), runs.submit("job")
    runs.mint_run(busy)
    runs.schedule_run(future, clock.now + 2 * DAY_MS)
    head, count = runs.store.head(), event_count(runs.store)
    for code, task, trigger in [
        ("task_running", busy, "manual"),
        ("task_running", busy, "scheduled"),
        ("scheduled_future", future, "manual"),
        ("task_ended", ended, "manual"),
    ]:
        refused(runs, code, runs.mint_run, task, trigger=trigger)
    assert runs.store.head() == head and event_count(runs.store) == count


def test_no_executor_refuses_to_mint(scheduler: Scheduler) -> None:
    task = scheduler.submit("job")
    head = scheduler.store.head()
    with pytest.raises(Exception, match="configure_runs"):
        scheduler.mint_run(task)
    assert scheduler.store.head() == head


def test_a_closed_scheduler_mints_nothing(runs: Scheduler) -> None:
    task = runs.submit("job")
    runs.close()
    with pytest.raises(RuleViolation) as caught:
        runs.mint_run(task)
    assert caught.value.rule == 2


# ─── submit error classes ────────────────────────────────────────────────────


def test_submit_identity_conflict_fails_the_run(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("identity_conflict")
    run = runs.run(runs.mint_run(task))
    assert run.status == "failed" and run.error is not None
    assert run.error.code == "identity_conflict" and run.submit_attempts == 0
    assert runs.run(runs.mint_run(task)).attempt == 2  # a new attempt, a new client id


def test_submit_adopt_takes_the_live_job(runs: Scheduler, executor: InMemoryExecutor) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("adopt")  # the job landed, but the answer says "already active"
    run = runs.run(runs.mint_run(task))
    assert run.status == "running" and run.submit_attempts == 0
    assert run.job_id == executor.job_of(run.client_job_id).job_id  # type: ignore[union-attr]
    assert [type(e).__name__ for e in runs.run_history(run.run_id)] == ["RunMinted", "RunAdopted"]


def test_submit_adopt_with_no_live_job_retries_like_transient(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("adopt", adopt_finds_job=False)
    run = runs.run(runs.mint_run(task))
    assert run.status == "dispatching" and run.submit_attempts == 1
    assert run.last_submit_error == "adopt" and run.retry_after == clock.now + 2 * MINUTE


def test_submit_adopt_on_redrive_never_submits_twice(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """A submit whose answer was lost leaves a live job; the redrive finds it first."""
    task = runs.submit("job")
    executor.fail_next_submit("transient")
    run_id = runs.mint_run(task)
    executor.admit(executor.requests[-1])  # the job landed after all
    clock.advance(3 * MINUTE)
    runs.reconcile()
    assert runs.run(run_id).status == "running"
    assert len(executor.requests) == 1


def test_submit_fence_waits_its_retry_after(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("fence", retry_after_ms=5 * MINUTE)
    run_id = runs.mint_run(task)
    run = runs.run(run_id)
    assert run.status == "dispatching" and run.submit_attempts == 1
    assert run.retry_after == clock.now + 5 * MINUTE
    clock.advance(4 * MINUTE)
    assert runs.reconcile().outcomes[run_id] == "unchanged"
    clock.advance(MINUTE)
    assert runs.reconcile().outcomes[run_id] == "running"


def test_submit_drain_does_not_consume_an_attempt(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("drain", times=5)
    run_id = runs.mint_run(task)
    for _ in range(4):
        clock.advance(2 * MINUTE)
        runs.reconcile()
    run = runs.run(run_id)
    assert run.status == "dispatching" and run.submit_attempts == 0 and run.drains == 5
    clock.advance(2 * MINUTE)
    runs.reconcile()
    assert runs.run(run_id).status == "running" and runs.run(run_id).attempt == 1


def test_submit_transient_retries_after_the_spacing(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    task = runs.submit("job")
    executor.fail_next_submit("transient")
    run_id = runs.mint_run(task)
    assert runs.run(run_id).retry_after == clock.now + 2 * MINUTE
    assert runs.run(run_id).submit_attempts == 1
    clock.advance(MINUTE)
    assert runs.reconcile().outcomes[run_id] == "unchanged"
    clock.advance(MINUTE)
    assert runs.reconcile().outcomes[run_id] == "running"
    assert runs.run(run_id).client_job_id == executor.requests[0].client_job_id


# ─── scheduled dispatch ──────────────────────────────────────────────────────


def test_dispatch_due_fires_due_schedules_once(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    early, late, far = (runs.submit("job") for _ in range(3))
    runs.schedule_run(early, clock.now - HOUR)
    runs.schedule_run(late, clock.now + HOUR)
    runs.schedule_run(far, clock.now - 4 * HOUR)  # beyond the 3 h catch-up window
    report = runs.dispatch_due()
    assert [runs.run(r).task_id for r in report.fired] == [early]
    assert runs.run(report.fired[0]).trigger == "scheduled"
    executor.finish(job_of(runs, report.fired[0]))
    runs.reconcile()
    clock.advance(HOUR + 11 * MINUTE)
    fired = runs.dispatch_due().fired
    assert [runs.run(r).task_id for r in fired] == [late]  # early is done: not again
    runs.schedule_run(early, clock.now)  # rescheduled: due again
    assert [runs.run(r).task_id for r in runs.dispatch_due().fired] == [early]


def test_dispatch_due_goes_on_after_a_failed_submit_and_stops_at_a_drain(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    runs.configure_runs(settings=RunSettings(per_tick=5))
    tasks = [runs.submit("job") for _ in range(4)]
    for task in tasks:
        runs.schedule_run(task, clock.now)
    executor.fail_next_submit("identity_conflict")
    executor.fail_next_submit("transient")
    executor.fail_next_submit("drain")
    report = runs.dispatch_due()
    assert report.reason == "admissions_closed" and report.fired == []
    assert list(report.submit_errors.values()) == ["identity_conflict", "transient", "drain"]
    assert len(report.minted) == 3


# ─── stores, writers, replay ─────────────────────────────────────────────────


def test_ledger_folds_back_from_the_store(store_url: str, clock: ManualClock) -> None:
    """On SQLite and PostgreSQL: a scenario's ledger equals the ledger a reopen folds."""
    clock.set(T0)
    executor = InMemoryExecutor()
    with Scheduler.open(store_url, clock=clock) as live:
        live.configure_runs(executor=executor)
        a, b = live.submit("job", phase="start"), live.submit("job", phase="start")
        live.schedule_run(b, clock.now)
        manual = live.mint_run(a)
        executor.fail_next_submit("fence", retry_after_ms=MINUTE)
        (scheduled,) = live.dispatch_due().minted
        executor.finish(job_of(live, manual), "interrupted")
        clock.advance(2 * MINUTE)
        live.reconcile()
        rows = live.ledger.rows()
        assert [r["status"] for r in rows] == ["failed", "running"]
        assert live.ledger.per_day[DAY].runs == 2
    with Scheduler.open(store_url, clock=clock) as replayed:
        assert replayed.ledger.rows() == rows
        assert replayed.run(scheduled).submit_attempts == 1


def test_two_writers_minting_the_same_attempt_conflict(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    clock.set(T0)
    one = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    two = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    try:
        for writer in (one, two):
            writer.configure_runs(executor=InMemoryExecutor())
        task = one.submit("job")
        two.refresh()
        one.mint_run(task)
        # two has not seen one's run: it mints attempt 1 too, loses on version 1 of
        # the run's stream, refreshes, and deciding again finds the run in flight.
        head = two.store.head()
        with pytest.raises(AdmissionRefused) as caught:
            two.mint_run(task)
        assert caught.value.code == "task_running" and two.store.head() == head
        assert two.run(f"{task}|{DAY}|1").status == "running"
        assert len(two.runs(task)) == 1
    finally:
        one.close()
        two.close()


def test_a_stale_mint_loses_on_version_1_of_the_run_stream(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    clock.set(T0)
    one = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    two = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    try:
        task = one.submit("job")
        two.refresh()
        one.configure_runs(executor=InMemoryExecutor())
        one.mint_run(task)
        settings = RunSettings()
        with pytest.raises(ConflictError):
            two._decide_once(mint, task, trigger="manual", settings=settings, slot_free=True)
    finally:
        one.close()
        two.close()


# ─── the property ────────────────────────────────────────────────────────────

TASKS = 3
steps = st.one_of(
    st.tuples(st.just("mint"), st.integers(0, TASKS - 1), st.sampled_from(["manual", "scheduled"])),
    st.tuples(st.just("dispatch")),
    st.tuples(st.just("reconcile")),
    st.tuples(
        st.just("fail_submit"),
        st.sampled_from(["identity_conflict", "adopt", "fence", "drain", "transient"]),
    ),
    st.tuples(
        st.just("finish_job"),
        st.integers(0, TASKS - 1),
        st.sampled_from(["completed", "failed", "canceled", "interrupted"]),
    ),
    st.tuples(st.just("lose_job"), st.integers(0, TASKS - 1)),
    st.tuples(st.just("schedule"), st.integers(0, TASKS - 1), st.integers(-3, 3)),
    st.tuples(
        st.just("advance"),
        st.sampled_from([1_000, 30_000, 2 * MINUTE + 1, 11 * MINUTE, 6 * HOUR + 1, DAY_MS]),
    ),
)


def check_ledger(scheduler: Scheduler) -> None:
    """One in-flight run per task and day; attempts 1, 2, 3 without gaps."""
    ledger = scheduler.ledger
    for (task, day), run_ids in ledger.by_task_day.items():
        day_runs = [ledger.runs[r] for r in run_ids]
        assert sum(r.live for r in day_runs) <= 1, (task, day)
        assert [r.attempt for r in day_runs] == list(range(1, len(day_runs) + 1))
        assert len(day_runs) <= scheduler.run_settings.runs_per_day


@given(st.lists(steps, max_size=30))
def test_property_one_in_flight_attempts_without_gaps_drain_free(
    script: list[tuple[Any, ...]],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        clock = ManualClock(T0)
        executor = InMemoryExecutor()
        location = str(Path(directory) / "trail.db")
        scheduler = Scheduler.open(location, clock=clock, durability="normal")
        scheduler.configure_runs(executor=executor)
        tasks = [scheduler.submit("job", phase="start", id=f"t{n}") for n in range(TASKS)]
        for step in script:
            name = step[0]
            if name == "mint":
                head = scheduler.store.head()
                try:
                    scheduler.mint_run(tasks[step[1]], trigger=step[2])
                except AdmissionRefused:
                    assert scheduler.store.head() == head
            elif name == "dispatch":
                scheduler.dispatch_due()
            elif name == "reconcile":
                scheduler.reconcile()
            elif name == "fail_submit":
                executor.fail_next_submit(step[1], retry_after_ms=MINUTE)
            elif name in ("finish_job", "lose_job"):
                live = [r for r in scheduler.runs(tasks[step[1]]) if r.job_id and r.live]
                for run in live:
                    assert run.job_id is not None
                    if name == "lose_job":
                        executor.lose(run.job_id)
                    elif executor.jobs[run.job_id].live:
                        executor.finish(run.job_id, step[2])
            elif name == "schedule":
                scheduler.schedule_run(tasks[step[1]], clock.now + step[2] * HOUR)
            else:
                clock.advance(step[1])
            check_ledger(scheduler)
        # A drain never consumes an attempt: submit_attempts counts the other failures.
        for run in scheduler.ledger.runs.values():
            failures = [
                e for e in scheduler.run_history(run.run_id) if isinstance(e, RunSubmitFailed)
            ]
            drains = [e for e in failures if e.error_class == "drain"]
            assert not any(e.consumed for e in drains)
            assert run.drains == len(drains)
            assert run.submit_attempts == sum(
                e.error_class not in ("drain", "identity_conflict") for e in failures
            )
            if run.error is not None and run.error.code == "submit_exhausted":
                used = [e for e in failures if e.error_class not in ("drain", "identity_conflict")]
                assert len(used) >= scheduler.run_settings.submit_attempts
        rows = scheduler.ledger.rows()
        scheduler.close()
        # Replay equals live: folding the store again gives the same ledger.
        world = World()
        with Scheduler.open(location, clock=clock) as reopened:
            for recorded in reopened.store.read():
                world.apply(recorded.event)
        assert ledger_of(world).rows() == rows
