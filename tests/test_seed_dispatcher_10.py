"""The dispatcher's behaviour, round ten (seed 003, glasses-server's task-dispatcher): two
corners where tasktrail answered otherwise than the seed. A manual run refused by a
maintenance drain answers ``admissions_closed``, as ``runTaskNow``'s lease throws it;
and every run ``dispatchDueTasks`` fires is flagged catch-up. Each test names the
behaviour and the seed function it comes from; docs/seed-fidelity.md, "Round ten", says
what changed."""

from __future__ import annotations

import pytest
from helpers.probes import refused_with

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.domain.runs.admission import AdmissionRefused
from tasktrail.domain.runs.gate import SwitchedGate
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.replay import replay

DAY = "2026-01-01"
MINUTE = 60_000


# ─── a drain: the manual path's code, the tick's and reconcile's ──────────────────


def test_dispatcher_manual_run_refused_by_a_drain_answers_admissions_closed(
    runs: Scheduler, gate: SwitchedGate, executor: InMemoryExecutor, clock: ManualClock
) -> None:
    """runTaskNow takes its maintenance lease in withLease, which throws a drain to the
    caller as ``admissions_closed``; only dispatchDueTasks (which catches it) and
    reconcileDispatch answer ``maintenance_drain_active``. A ``mint_run`` is
    runTaskNow's path whatever trigger it records. Nothing is minted either way."""
    task = runs.submit("job", id="t1")
    runs.schedule_run(task, clock.now)  # due: the tick has a run to fire
    gate.draining = True
    head = runs.store.head()
    with pytest.raises(AdmissionRefused) as refused:
        runs.mint_run(task)
    assert refused.value.code == "admissions_closed"
    assert "maintenance drain" in str(refused.value)  # the reason still says why
    assert refused_with(runs, task, trigger="scheduled") == "admissions_closed"
    assert runs.dispatch_due().reason == "maintenance_drain_active"
    assert runs.reconcile().reason == "maintenance_drain_active"
    assert runs.store.head() == head and gate.leases == 0 and executor.requests == []
    gate.draining = False
    assert runs.mint_run(task) == f"t1|{DAY}|1"  # no attempt was used


# ─── catch-up: every run the tick fires ───────────────────────────────────────────


def test_dispatcher_every_run_the_tick_fires_is_flagged_catch_up(
    runs: Scheduler, clock: ManualClock, sqlite_url: str
) -> None:
    """dispatchDueTasks mints each run it fires with ``catchUp: true`` (mintRun's
    argument), a run fired exactly at its scheduled time too; runTaskNow mints with
    ``false``, for a scheduled task as well. The flag is on the run, in its dict and
    in the ledger read model."""
    on_time, late, manual = (runs.submit("job", id=n) for n in ("on-time", "late", "manual"))
    runs.schedule_run(on_time, clock.now)
    runs.schedule_run(late, clock.now - 30 * MINUTE)
    runs.schedule_run(manual, clock.now + MINUTE)
    fired = runs.dispatch_due().fired
    assert {runs.run(r).task_id: runs.run(r).catch_up for r in fired} == {
        "on-time": True,
        "late": True,
    }
    by_hand = runs.mint_run(manual)
    assert runs.run(by_hand).catch_up is False
    assert [runs.run(r).to_dict().get("catch_up") for r in (*fired, by_hand)] == [
        True,
        True,
        None,
    ]
    rows = {row["task_id"]: row["catch_up"] for row in replay(sqlite_url).ledger}
    assert rows == {"on-time": 1, "late": 1, "manual": 0}
