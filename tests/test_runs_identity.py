"""The dispatch run ledger (SPEC.md section 3): a run's identity and its attempts.

A run's client_job_id, run id, day and zone; attempts counted per task and day; the
ledger as a reopen folds it back from the store, two writers minting the same attempt,
and the property: one in-flight run per task and day, attempts without gaps, drains
free, replay equal to live.
"""

from __future__ import annotations

import hashlib
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers.probes import job_of
from helpers.runs_ledger import DAY, DAY_MS, HOUR, MINUTE, T0
from helpers.runs_ledger import executor as executor
from helpers.runs_ledger import runs as runs
from hypothesis import given
from hypothesis import strategies as st

from tasktrail.domain import ConflictError, ManualClock, Registry, Scheduler, World
from tasktrail.domain.runs.admission import AdmissionRefused, mint
from tasktrail.domain.runs.events import RunSubmitFailed
from tasktrail.domain.runs.identity import client_job_id, local_day
from tasktrail.domain.runs.ledger import ledger_of
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.settings import RunSettings


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
