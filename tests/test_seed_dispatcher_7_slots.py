"""The dispatcher's behaviour, seventh round (seed 003, glasses-server's task-dispatcher):
dispatch slots. A slot is given back whatever its submit came to, reconcile redrives
without one, and a tick fires while a background slot is free. Each test names the
behaviour and the seed function it comes from; the fixes are written down in
docs/seed-fidelity.md, "Round seven"."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.probes import refused_with
from helpers.seed_dispatcher_7 import SPACING, T0

from tasktrail.domain import ManualClock, RunSettings, Scheduler
from tasktrail.domain.runs.executor import JobSnapshot, SubmitRequest
from tasktrail.domain.runs.gate import SwitchedGate
from tasktrail.domain.runs.memory_executor import InMemoryExecutor
from tasktrail.domain.runs.outcomes import SubmitFailed

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
