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

DAY = "2026-01-01"


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
