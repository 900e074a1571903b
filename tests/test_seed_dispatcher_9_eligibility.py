"""The dispatcher's behaviour, ninth round (seed 003, glasses-server's task-dispatcher): the
corners earlier rounds touched least, in what a mint or a tick may fire. Day boundaries
to the last instant, catch-up windows at their edges, and which refusal wins when several
apply to a mint or a tick. Each test names the behaviour and the seed function it comes
from; the fixes are written down in docs/seed-fidelity.md, "Round nine (dispatcher)"."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.probes import job_of, refused_with, settle
from helpers.seed_dispatcher_9 import CATCH_UP, DAY, HOUR, LAST_INSTANT, MIDNIGHT, MINUTE, NEXT_DAY

from tasktrail.domain import ManualClock, RunSettings, Scheduler
from tasktrail.domain.runs.executor import SubmitRequest
from tasktrail.domain.runs.gate import SwitchedGate
from tasktrail.domain.runs.identity import client_job_id
from tasktrail.domain.runs.memory_executor import InMemoryExecutor


def failed_and_settled(runs: Scheduler, executor: InMemoryExecutor, run_id: str) -> None:
    """End the run's job failed and reconcile it, so the task may run again."""
    executor.finish(job_of(runs, run_id), "failed")
    assert settle(runs, run_id) == "failed:failed"


# ─── day boundaries ───────────────────────────────────────────────────────────────


def test_dispatcher_run_minted_in_the_last_instant_of_a_day_belongs_to_that_day(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """mintRun and decideDispatchingAction read the day of ``now`` as a date of whole
    milliseconds (a JavaScript date drops a fraction of a ms): a run minted at the last
    ms of a day, or in the last fraction of it, is that day's, with that day's attempt
    and client job id, and is not expired until the next day begins."""
    clock.set(MIDNIGHT - 1)
    whole = runs.run(runs.mint_run(runs.submit("job", id="whole"), day=DAY))
    clock.set(LAST_INSTANT)
    executor.fail_next_submit("drain")
    fraction = runs.run(runs.mint_run(runs.submit("job", id="fraction"), day=DAY))
    assert (whole.day, fraction.day) == (DAY, DAY)
    assert fraction.client_job_id == client_job_id("fraction", "UTC", DAY, 1)
    assert runs.today() == DAY
    assert settle(runs, fraction.run_id) == "unchanged"  # still its day: it waits
    clock.set(MIDNIGHT)
    assert runs.today() == NEXT_DAY
    assert settle(runs, fraction.run_id) == "failed:expired"


def test_dispatcher_task_scheduled_for_the_first_instant_of_tomorrow_is_scheduled_future(
    runs: Scheduler, clock: ManualClock
) -> None:
    """runTaskNow refuses a task whose scheduled day is after today: a schedule at the
    next midnight is tomorrow's, one in the last fraction of a ms before it is today's
    (its day read as a date of whole milliseconds)."""
    tomorrow, tonight = runs.submit("job", id="tomorrow"), runs.submit("job", id="tonight")
    runs.schedule_run(tomorrow, MIDNIGHT)
    runs.schedule_run(tonight, LAST_INSTANT)
    assert refused_with(runs, tomorrow) == "scheduled_future"
    assert runs.run(runs.mint_run(tonight)).scheduled_for == LAST_INSTANT


def test_dispatcher_catch_up_after_midnight_is_a_run_of_the_day_it_fired(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """pickEligible and mintRun count a run on the day it was minted, not the day it was
    scheduled for: a schedule of 23:50 caught up at 00:05 fires as attempt 1 of the new
    day (with that day's client job id), beside yesterday's run of it still dispatching
    (today's runs only are looked at), counts toward the new day's cap, not the old one's,
    and yesterday's run is then expired."""
    runs.configure_runs(settings=RunSettings(cap_per_day=2))
    task = runs.submit("job", id="late")
    runs.schedule_run(task, MIDNIGHT - 10 * MINUTE)
    clock.set(MIDNIGHT - 5 * MINUTE)
    executor.fail_next_submit("transient")
    (stuck,) = runs.dispatch_due().minted
    assert runs.run(stuck).day == DAY
    clock.set(MIDNIGHT + 5 * MINUTE)
    (fired,) = runs.dispatch_due().fired
    run = runs.run(fired)
    assert (run.day, run.attempt, run.catch_up) == (NEXT_DAY, 1, True)
    assert run.client_job_id == client_job_id("late", "UTC", NEXT_DAY, 1)
    assert (runs.ledger.runs_on(DAY), runs.ledger.runs_on(NEXT_DAY)) == (1, 1)
    assert settle(runs, stuck) == "failed:expired"
    # One more run of the new day reaches its cap of 2; yesterday's run is not counted.
    other = runs.submit("job", id="other")
    runs.schedule_run(other, MIDNIGHT - 1)
    assert runs.run(runs.dispatch_due().fired[0]).day == NEXT_DAY
    third = runs.submit("job", id="third")
    runs.schedule_run(third, MIDNIGHT - 1)
    assert runs.dispatch_due().reason == "cap_reached"


# ─── catch-up windows ─────────────────────────────────────────────────────────────


def test_dispatcher_catch_up_window_holds_both_of_its_edges(
    runs: Scheduler, clock: ManualClock
) -> None:
    """dispatchDueTasks fires a task found due within its catch-up window (the seed's test
    of the window is not in the diff; this pins tasktrail's reading of it): due at its
    time exactly, due at the window's end exactly, not a ms later nor a ms before its
    time. Each run the tick fires is flagged catch-up (round ten), on time too."""
    runs.configure_runs(settings=RunSettings(per_tick=4))
    at, edge, past, early = (runs.submit("job", id=n) for n in ("at", "edge", "past", "early"))
    runs.schedule_run(at, clock.now)
    runs.schedule_run(edge, clock.now - CATCH_UP)
    runs.schedule_run(past, clock.now - CATCH_UP - 1)
    runs.schedule_run(early, clock.now + 1)
    fired = {runs.run(r).task_id: runs.run(r).catch_up for r in runs.dispatch_due().fired}
    assert fired == {"at": True, "edge": True}
    clock.advance(1)
    assert [runs.run(r).task_id for r in runs.dispatch_due().fired] == ["early"]


# ─── which refusal wins ───────────────────────────────────────────────────────────


def test_dispatcher_scheduled_tick_answers_durable_jobs_off_before_everything(
    runs: Scheduler, gate: SwitchedGate, clock: ManualClock
) -> None:
    """dispatchDueTasks asks durable jobs first, then admissions, then the cap of 0, then
    the maintenance lease: with every one of them refusing, the tick says durable jobs
    are off, and asks for no lease."""
    runs.configure_runs(settings=RunSettings(cap_per_day=0))
    runs.schedule_run(runs.submit("job", id="t1"), clock.now)
    gate.durable_jobs, gate.admissions, gate.draining = False, False, True
    head = runs.store.head()
    assert runs.dispatch_due().reason == "durable_jobs_off"
    assert runs.store.head() == head and gate.leases == 0


def test_dispatcher_manual_run_asks_the_gate_before_it_looks_the_task_up(
    runs: Scheduler, gate: SwitchedGate
) -> None:
    """runTaskNow asks durable jobs and admissions before it reads the ledger or the
    task's row: a task that does not exist is refused by the gate first."""
    gate.durable_jobs = False
    assert refused_with(runs, "no-such-task") == "durable_jobs_off"
    gate.durable_jobs, gate.admissions = True, False
    assert refused_with(runs, "no-such-task") == "admissions_closed"


def test_dispatcher_busy_reserved_slot_is_answered_after_the_tasks_own_refusals(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor
) -> None:
    """runTaskNow checks the task (its live run of the day, its row, its marker, a later
    day's schedule, its runs of the day) before it takes the reserved manual slot: while
    another manual run holds the slot, each of those refusals wins over
    ``dispatch_slots_busy``, which only a task with none of them gets."""
    runs.configure_runs(settings=RunSettings(runs_per_day=1))
    ended = runs.submit("leaf", id="ended")
    runs.run_until_idle()
    executor.fail_next_submit("drain")
    live = runs.submit("job", id="live")
    runs.mint_run(live)  # dispatching: its run of the day is in flight
    future = runs.submit("job", id="future")
    runs.schedule_run(future, MIDNIGHT)
    spent = runs.submit("job", id="spent")
    failed_and_settled(runs, executor, runs.mint_run(spent))
    free, holder = runs.submit("job", id="free"), runs.submit("job", id="holder")
    seen: dict[str, str] = {}

    def while_the_manual_slot_is_held(request: SubmitRequest) -> None:
        executor.on_submit = None
        for task in (ended, live, future, spent, free):
            seen[task] = refused_with(runs, task)

    executor.on_submit = while_the_manual_slot_is_held
    runs.mint_run(holder)
    assert seen == {
        "ended": "task_ended",
        "live": "task_running",
        "future": "scheduled_future",
        "spent": "runs_exhausted",
        "free": "dispatch_slots_busy",
    }
    assert runs.run(runs.mint_run(free)).status == "running"  # the slot was given back


def test_dispatcher_running_marker_is_answered_before_a_later_days_schedule(
    runs: Scheduler, clock: ManualClock
) -> None:
    """runTaskNow checks the row's running marker before its scheduled day: a task whose
    job of yesterday still runs, since scheduled for a later day, is ``task_running``."""
    task = runs.submit("job", id="t1")
    runs.mint_run(task)
    clock.set(MIDNIGHT + HOUR)
    runs.schedule_run(task, MIDNIGHT + 2 * 24 * HOUR)
    assert refused_with(runs, task) == "task_running"


@pytest.mark.parametrize("kind", ["identity_conflict", "adopt", "fence", "transient"])
def test_dispatcher_tick_goes_on_past_every_submit_error_but_a_drain(
    runs: Scheduler, clock: ManualClock, executor: InMemoryExecutor, kind: Any
) -> None:
    """dispatchDueTasks breaks its loop only for ``task_running``, ``dispatch_slots_busy``
    and ``admissions_closed`` (a drain): a submit that failed any other way (an identity
    conflict, an adopt that found no live job, a fence, a transient error) leaves the
    next due task to fire in the same tick."""
    first, second = runs.submit("job", id="t0"), runs.submit("job", id="t1")
    for task in (first, second):
        runs.schedule_run(task, clock.now)
    executor.fail_next_submit(kind, task_id="t0", adopt_finds_job=False)
    report = runs.dispatch_due()
    assert [runs.run(r).task_id for r in report.fired] == ["t1"]
    assert report.submit_errors == {f"t0|{DAY}|1": kind} and report.reason is None
