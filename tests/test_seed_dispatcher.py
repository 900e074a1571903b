"""The dispatcher's behaviour where tasktrail once differed or had nothing (issue 16;
seed 003, glasses-server's task-dispatcher): each test names the behaviour and fails
when it breaks. The rules they hold are written down in docs/seed-fidelity.md."""

from __future__ import annotations

import time
from dataclasses import fields
from typing import Any

import orjson
import pytest
from helpers.probes import job_of, of_type

from tasktrail.domain import (
    InvalidArgument,
    ManualClock,
    Registry,
    RunSettings,
    Scheduler,
    TaskEvent,
)
from tasktrail.domain.runs.admission import AdmissionRefused
from tasktrail.domain.runs.events import RunMinted, RunSettingsChanged
from tasktrail.domain.runs.gate import SwitchedGate
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.outcomes import SubmitFailed
from tasktrail.domain.runs.settings import run_settings_of
from tasktrail.domain.store.transcoder import decode_event
from tasktrail.domain.tasks.events import ACT_FIELDS
from tasktrail.domain.turns.events import TurnSettingsChanged
from tasktrail.domain.turns.settings import TurnSettings
from tasktrail.replay import replay

# ─── defect 7: settings that decide are in the log ─────────────────────────────────


def test_dispatcher_run_settings_are_recorded_and_replayed(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    settings = RunSettings(tz="Europe/Berlin", runs_per_day=1, cap_per_day=5)
    s.configure_runs(settings=settings)
    s.configure_runs(settings=settings)
    assert len(of_type(s, RunSettingsChanged)) == 1
    s.close()
    assert run_settings_of(replay(sqlite_url).world) == settings
    reopened = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    assert reopened.run_settings == settings
    reopened.close()


def test_settings_events_carry_every_setting() -> None:
    base = {f.name for f in fields(TaskEvent)} | set(ACT_FIELDS)  # and who set them, why
    for event, settings in ((RunSettingsChanged, RunSettings), (TurnSettingsChanged, TurnSettings)):
        assert {f.name for f in fields(event)} - base == {f.name for f in fields(settings)}


# ─── the gate before minting ───────────────────────────────────────────────────────

T0 = 1_767_254_400_000
"""2026-01-01 08:00 UTC."""
DAY = "2026-01-01"
MINUTE = 60_000


@pytest.mark.parametrize(
    ("switch", "code"),
    [
        ({"durable_jobs": False}, "durable_jobs_off"),
        ({"admissions": False}, "admissions_closed"),
        ({"draining": True}, "admissions_closed"),  # runTaskNow's drain (round ten)
        ({"durable_jobs": False, "admissions": False, "draining": True}, "durable_jobs_off"),
        ({"admissions": False, "draining": True}, "admissions_closed"),
    ],
)
def test_dispatcher_gate_refuses_before_minting_with_its_code(
    runs: Scheduler,
    gate: SwitchedGate,
    executor: InMemoryExecutor,
    switch: dict[str, bool],
    code: str,
) -> None:
    task = runs.submit("job", id="t1")
    for name, value in switch.items():
        setattr(gate, name, value)
    head = runs.store.head()
    with pytest.raises(AdmissionRefused) as refused:
        runs.mint_run(task)
    assert refused.value.code == code
    assert runs.store.head() == head  # nothing minted
    assert runs.runs(task) == [] and runs.ledger.runs_on(DAY) == 0  # no attempt, no cap used
    assert executor.requests == [] and gate.leases == 0
    gate.durable_jobs, gate.admissions, gate.draining = True, True, False
    assert runs.mint_run(task) == f"t1|{DAY}|1"  # the first attempt is still there


def test_dispatcher_dispatch_lease_is_held_while_minting_and_submitting(
    runs: Scheduler, gate: SwitchedGate, executor: InMemoryExecutor
) -> None:
    held: list[int] = []
    executor.on_submit = lambda request: held.append(gate.leases)
    runs.mint_run(runs.submit("job", id="t1"))
    assert held == [1] and gate.leases == 0


def test_dispatcher_scheduled_dispatch_during_a_drain_mints_nothing(
    runs: Scheduler, gate: SwitchedGate, clock: ManualClock
) -> None:
    task = runs.submit("job", id="t1")
    runs.schedule_run(task, clock.now)
    clock.advance(MINUTE)
    gate.draining = True
    head = runs.store.head()
    for _ in range(3):  # tick after tick: no run stuck dispatching, none of the day used
        report = runs.dispatch_due()
        assert (report.reason, report.minted) == ("maintenance_drain_active", [])
    assert runs.store.head() == head
    gate.admissions = False
    assert runs.dispatch_due().reason == "admissions_closed"
    gate.durable_jobs = False
    assert runs.dispatch_due().reason == "durable_jobs_off"
    gate.durable_jobs, gate.admissions, gate.draining = True, True, False
    assert runs.dispatch_due().fired == [f"t1|{DAY}|1"]


def test_dispatcher_reconcile_skips_during_maintenance(
    runs: Scheduler, gate: SwitchedGate, executor: InMemoryExecutor
) -> None:
    run_id = runs.mint_run(runs.submit("job", id="t1"))
    executor.finish(job_of(runs, run_id), "completed")
    gate.draining = True
    head = runs.store.head()
    report = runs.reconcile()
    assert (report.reason, report.visited) == ("maintenance_drain_active", [])
    assert runs.store.head() == head and runs.run(run_id).status == "running"
    gate.durable_jobs = gate.admissions = False  # reconcile asks about a drain only
    gate.draining = False
    assert runs.reconcile().outcomes == {run_id: "done"}
    assert gate.leases == 0


# ─── the host's per-run payload, and live reservations listed by it ────────────────


def test_dispatcher_per_run_payload_is_recorded_submitted_and_replayed(
    runs: Scheduler, executor: InMemoryExecutor, sqlite_url: str
) -> None:
    task = runs.submit("job", id="t1")
    payload = {"session": "s-1", "era": "e7", "message": 41}
    run_id = runs.mint_run(task, payload=payload)
    assert runs.run(run_id).payload == payload
    assert executor.requests[-1].payload == payload  # the submit carries it
    (minted,) = of_type(runs, RunMinted)
    assert minted.payload == payload
    (row,) = replay(sqlite_url).ledger
    assert orjson.loads(row["payload"]) == payload


def test_dispatcher_payload_hook_gives_scheduled_runs_theirs(
    runs: Scheduler, executor: InMemoryExecutor, clock: ManualClock
) -> None:
    asked: list[tuple[str, str]] = []

    def payload(task_id: str, trigger: str) -> dict[str, Any]:
        asked.append((task_id, trigger))
        return {"era": "e1", "task": task_id}

    runs.configure_runs(payload=payload)
    task = runs.submit("job", id="t1")
    runs.schedule_run(task, clock.now)
    clock.advance(MINUTE)
    (fired,) = runs.dispatch_due().fired
    assert asked == [("t1", "scheduled")]
    assert runs.run(fired).payload == {"era": "e1", "task": "t1"}
    assert executor.requests[-1].payload == {"era": "e1", "task": "t1"}


def test_dispatcher_live_reservations_are_listed_by_payload(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    first = runs.mint_run(runs.submit("job", id="t1"), payload={"era": "e1", "n": 1})
    second = runs.mint_run(runs.submit("job", id="t2"), payload={"era": "e2", "n": 2})
    third = runs.mint_run(runs.submit("job", id="t3"))
    assert [r.run_id for r in runs.live_runs()] == [first, second, third]
    assert [r.run_id for r in runs.live_runs(where={"era": "e1"})] == [first]
    assert [r.run_id for r in runs.live_runs(where={"era": "e2", "n": 2})] == [second]
    assert runs.live_runs(where={"era": "e2", "n": 1}) == []
    executor.finish(job_of(runs, first), "completed")
    runs.reconcile()
    assert runs.live_runs(where={"era": "e1"}) == []  # ended: no longer a reservation


def test_dispatcher_payload_that_is_not_json_is_refused_and_appends_nothing(
    runs: Scheduler,
) -> None:
    task = runs.submit("job", id="t1")
    head = runs.store.head()
    for bad in ({"x": float("nan")}, {"x": object()}, "x" * 70_000):
        with pytest.raises(InvalidArgument):
            runs.mint_run(task, payload=bad)
    assert runs.store.head() == head


def test_dispatcher_run_minted_before_payloads_reads_as_none() -> None:
    old = orjson.dumps(
        {
            "at": T0,
            "task_id": "t1",
            "day": DAY,
            "attempt": 1,
            "tz": "UTC",
            "trigger": "manual",
            "client_job_id": "c",
            "retry_after": T0,
        }
    )
    event = decode_event("tasktrail.RunMinted", f"run:t1|{DAY}|1", old, 7)
    assert isinstance(event, RunMinted) and event.payload is None


# ─── scheduled runs fired late are flagged catch-up ────────────────────────────────


def test_dispatcher_scheduled_run_fired_late_is_flagged_catch_up(
    runs: Scheduler, clock: ManualClock, sqlite_url: str
) -> None:
    on_time = runs.submit("job", id="on-time")
    late = runs.submit("job", id="late")
    runs.schedule_run(on_time, clock.now)
    runs.schedule_run(late, clock.now - 30 * MINUTE)  # its time passed half an hour ago
    fired = runs.dispatch_due().fired
    # Round ten: the tick flags every run it fires, one fired on time too.
    assert [runs.run(r).catch_up for r in fired] == [True, True]
    manual = runs.mint_run(runs.submit("job", id="manual"))
    assert runs.run(manual).catch_up is False  # only scheduled runs catch up
    rows = {row["task_id"]: row["catch_up"] for row in replay(sqlite_url).ledger}
    assert rows == {"on-time": 1, "late": 1, "manual": 0}
    assert runs.run(fired[1]).to_dict()["catch_up"] is True


# ─── a dispatch tick has a wall-time budget ────────────────────────────────────────


def test_dispatcher_dispatch_tick_stops_once_its_wall_budget_is_spent(
    runs: Scheduler, executor: InMemoryExecutor, clock: ManualClock
) -> None:
    runs.configure_runs(settings=RunSettings(per_tick=5, dispatch_wall_s=0.01))
    executor.on_submit = lambda request: time.sleep(0.03)  # a slow executor
    for n in range(3):
        runs.schedule_run(runs.submit("job", id=f"t{n}"), clock.now)
    first = runs.dispatch_due()
    assert (len(first.minted), first.reason) == (1, "tick_budget")
    second = runs.dispatch_due()  # the next tick goes on where this one stopped
    assert second.minted == [f"t1|{DAY}|1"]
    runs.configure_runs(settings=RunSettings(per_tick=5, dispatch_wall_s=None))
    assert runs.dispatch_due().minted == [f"t2|{DAY}|1"]


def test_dispatcher_a_spent_wall_budget_still_dispatches_one_task_a_tick(
    runs: Scheduler, executor: InMemoryExecutor, clock: ManualClock
) -> None:
    # A budget of 0 is spent before the first due task is looked at, as a short one is
    # on a loaded machine: every tick still makes progress, one task at a time.
    runs.configure_runs(settings=RunSettings(per_tick=5, dispatch_wall_s=0.0))
    for n in range(2):
        runs.schedule_run(runs.submit("job", id=f"t{n}"), clock.now)
    first = runs.dispatch_due()
    assert (first.minted, first.reason) == ([f"t0|{DAY}|1"], "tick_budget")
    assert runs.dispatch_due().minted == [f"t1|{DAY}|1"]


# ─── mint_run(..., raise_on_submit_error=True): the seed's throw to the caller ─────


@pytest.mark.parametrize(
    ("fault", "code", "status", "attempts"),
    [
        ("identity_conflict", "identity_conflict", "failed", 0),
        ("drain", "admissions_closed", "dispatching", 0),
        ("transient", "submit_failed", "dispatching", 1),
        ("fence", "submit_failed", "dispatching", 1),
    ],
)
def test_dispatcher_submit_error_raised_to_the_caller_after_it_is_recorded(
    runs: Scheduler, executor: InMemoryExecutor, fault: str, code: str, status: str, attempts: int
) -> None:
    task = runs.submit("job", id="t1")
    executor.fail_next_submit(fault, adopt_finds_job=False)  # type: ignore[arg-type]
    with pytest.raises(SubmitFailed) as raised:
        runs.mint_run(task, raise_on_submit_error=True)
    assert (raised.value.code, raised.value.run_id) == (code, f"t1|{DAY}|1")
    run = runs.run(raised.value.run_id)  # recorded before it was raised
    assert (run.status, run.submit_attempts, run.last_submit_error) == (status, attempts, fault)


def test_dispatcher_submit_error_is_not_raised_by_default(
    runs: Scheduler, executor: InMemoryExecutor
) -> None:
    executor.fail_next_submit("transient")
    run_id = runs.mint_run(runs.submit("job", id="t1"))
    assert runs.run(run_id).last_submit_error == "transient"
    assert runs.mint_run(runs.submit("job", id="t2"), raise_on_submit_error=True) == f"t2|{DAY}|1"
