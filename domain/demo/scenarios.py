"""The demo's agent and dispatch scenarios (see :mod:`.demo` for the task workload).

* a crew: a Leader and two workers, as agent Turns. One delivery is not ready
  and is retried; a worker's completion and an exit observation meet in one
  pass and the completion wins; a late, stale completion is refused (and
  audited); two workers' "done" wakeup requests aggregate into one Leader
  wakeup, dispatched once the aggregation window has passed; the crew's roles
  get runtime-cleanup obligations once it completes, which a pass settles.
* nightly jobs handed to an executor: scheduled and manual runs with a failure
  of each class (adopt, fence, identity conflict, transient until exhausted,
  drain, a lost job, canceled, interrupted, orphaned, superseded, expired).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..app.scheduler import Scheduler
from ..clock import ManualClock
from ..runs.admission import AdmissionRefused
from ..runs.memory_executor import InMemoryExecutor
from ..runs.settings import RunSettings
from ..tasks.definitions import TaskDefinition
from ..tasks.describe import format_at
from ..tasks.invocation import Invocation
from ..turns.refusals import StaleCompletion
from ..turns.runtime import Runtime

MINUTE, HOUR = 60_000, 3_600_000
Log = Callable[[str], Any]


def _crew_wrap(inv: Invocation) -> None:
    inv.finish("completed")


def _crew_lead(inv: Invocation) -> None:
    inv.sleep(inv.now() + 3 * MINUTE, then="wrap")  # the crew lives while its agents work


def _nightly_idle(inv: Invocation) -> None:
    inv.sleep(inv.now() + 36 * HOUR, then="retire")


def _nightly_retire(inv: Invocation) -> None:
    inv.finish("completed")


DEFINITIONS = [
    TaskDefinition("crew", 1, {"lead": _crew_lead, "wrap": _crew_wrap}),
    TaskDefinition("nightly", 1, {"idle": _nightly_idle, "retire": _nightly_retire}),
]


class DemoRuntime(Runtime):
    """An agent runtime that delivers at once, except a first "not ready" for one role."""

    def __init__(self, flaky_role: str) -> None:
        self.flaky_role = flaky_role
        self.cleaned: list[str] = []

    def deliver(self, task_id: str, role: str, turn_id: str, attempt: int) -> Any:
        if role == self.flaky_role and attempt == 0:
            return "not-ready"
        return "delivered"

    def cleanup(self, task_id: str, role: str) -> bool:
        self.cleaned.append(role)
        return True


def crew_scenario(scheduler: Scheduler, clock: ManualClock, log: Log) -> str:
    """Run the leader-and-workers scenario; returns the crew's task id."""
    crew = scheduler.submit("crew", id="crew-0001")
    scheduler.run_pass()  # the crew task sleeps while its agents take Turns
    runtime = DemoRuntime(flaky_role="worker-2")
    first = scheduler.start_turn(crew, "worker-1", reasons=["draft the report"])
    second = scheduler.start_turn(crew, "worker-2", reasons=["check the sources"])
    scheduler.controller_pass(runtime=runtime)  # worker-2's delivery is not ready: retried
    clock.advance(1_000)
    scheduler.controller_pass(runtime=runtime)
    log(f"crew: {crew} started Turns {first}, {second}; worker-2 delivered on retry")

    scheduler.complete_turn(crew, "worker-1", first, summary="report drafted")
    requested = clock.now
    scheduler.request_wakeup(crew, "worker-1 finished")
    clock.advance(15_000)
    try:
        scheduler.complete_turn(crew, "worker-1", first)  # a late duplicate: stale
    except StaleCompletion as refusal:
        log(f"crew: stale completion refused and audited: {refusal.reason}")
    # worker-2 reports its completion and, in the same moment, its process exits.
    scheduler.complete_turn(crew, "worker-2", second, due_at=clock.now + 500, summary="ok")
    scheduler.observe_exit(crew, "worker-2", second)
    clock.advance(500)
    report = scheduler.controller_pass(runtime=runtime)
    ended = report.turns.get(crew, {}).get("worker-2")
    log(f"crew: worker-2's completion and exit met in one pass: it ended {ended}, exit dropped")
    scheduler.request_wakeup(crew, "worker-2 finished")
    wakeup = scheduler.pending_wakeup(crew)
    assert wakeup is not None
    log(
        f"crew: leader wakeup aggregated {wakeup.request_count} requests "
        f"({', '.join(wakeup.reasons)}), first at {format_at(wakeup.first_requested_at)}"
    )
    clock.set(requested + scheduler.turn_settings.aggregation_window_ms)
    report = scheduler.controller_pass(runtime=runtime)
    leader = scheduler.active_turn(crew, "leader")
    assert leader is not None
    log(
        f"crew: wakeup {report.wakeups.get(crew)} at {format_at(clock.now)} as Leader Turn "
        f"{leader.turn_id} with reasons {list(leader.reasons)}"
    )
    scheduler.complete_turn(crew, "leader", leader.turn_id, summary="report published")
    clock.advance(3 * MINUTE)
    scheduler.run_until_idle()  # the crew task wraps up: completed
    scheduler.controller_pass(runtime=runtime)  # its roles' runtimes are cleaned up
    log(f"crew: completed; runtime cleanup settled for {', '.join(sorted(runtime.cleaned))}")
    return crew


def dispatch_scenario(scheduler: Scheduler, clock: ManualClock, log: Log) -> list[str]:
    """Run scheduled and manual runs with a failure of each class; returns the ledger lines."""
    executor = InMemoryExecutor()
    scheduler.configure_runs(
        executor=executor, settings=RunSettings(tz="UTC", per_tick=3, reconcile_per_tick=20)
    )
    names = ["brief", "digest", "inbox", "weekly", "research", "triage", "backup", "cleanup"]
    names += ["report", "note"]
    ids = {n: scheduler.submit("nightly", id=f"nightly-{n}") for n in names}
    scheduler.run_pass()  # they sleep between their runs

    def job(run_id: str) -> str:
        job_id = scheduler.run(run_id).job_id
        assert job_id is not None
        return job_id

    def tick() -> None:
        clock.advance(3 * MINUTE)
        scheduler.reconcile()

    day = scheduler.today()
    for name in ("brief", "digest", "inbox"):
        scheduler.schedule_run(ids[name], clock.now - 5 * MINUTE)
    executor.fail_next_submit("adopt", task_id=ids["brief"])
    executor.fail_next_submit("fence", retry_after_ms=4 * MINUTE, task_id=ids["digest"])
    executor.fail_next_submit("identity_conflict", task_id=ids["inbox"])
    scheduler.dispatch_due()
    executor.fail_next_submit("transient", times=3, task_id=ids["research"])
    scheduler.mint_run(ids["research"])
    executor.fail_next_submit("drain", times=2, task_id=ids["triage"])
    triage = scheduler.mint_run(ids["triage"])
    backup = scheduler.mint_run(ids["backup"])
    executor.lose(job(backup))
    cleanup, report = scheduler.mint_run(ids["cleanup"]), scheduler.mint_run(ids["report"])
    scheduler.mint_run(ids["note"])
    scheduler.abort(ids["note"])  # its task ends while the run is live: orphaned
    scheduler.run_until_idle()
    executor.finish(job(cleanup), "canceled")
    executor.finish(job(report), "interrupted")
    executor.finish(job(f"{ids['brief']}|{day}|1"), "completed")
    for _ in range(3):
        tick()
    executor.finish(job(triage), "completed")
    executor.finish(job(f"{ids['digest']}|{day}|1"), "failed", error_code="model_overloaded")
    scheduler.schedule_run(ids["weekly"], clock.now - MINUTE)
    scheduler.dispatch_due()
    scheduler.schedule_run(ids["weekly"], clock.now + 2 * HOUR)  # rescheduled before it ran
    tick()
    executor.fail_next_submit("drain", times=9, task_id=ids["inbox"])
    scheduler.mint_run(ids["inbox"])
    try:
        scheduler.mint_run(ids["inbox"])
    except AdmissionRefused as refusal:
        log(f"dispatch: a second manual run of {ids['inbox']} refused: {refusal.code}")
    clock.advance(6 * HOUR + 1)
    tick()
    clock.advance(24 * HOUR)  # the day rolls over while inbox is still dispatching
    tick()
    for _ in range(4):
        tick()
    clock.advance(12 * HOUR)
    scheduler.run_until_idle()  # the nightly tasks retire
    return ledger_lines(scheduler)


def ledger_lines(scheduler: Scheduler) -> list[str]:
    """The run ledger as a table a person reads."""
    lines = [f"{'run':<34} {'trigger':<9} {'status':<10} {'code':<17} {'submits':>7} {'drains':>6}"]
    for run in scheduler.ledger.runs.values():
        code = run.error.code if run.error is not None else ""
        lines.append(
            f"{run.run_id:<34} {run.trigger:<9} {run.status:<10} {code:<17} "
            f"{run.submit_attempts:>7} {run.drains:>6}"
        )
    for day, counts in sorted(scheduler.ledger.per_day.items()):
        ended = ", ".join(f"{k} {v}" for k, v in sorted(counts.ended.items()))
        lines.append(
            f"day {day}: {counts.runs} runs ({counts.manual} manual, "
            f"{counts.scheduled} scheduled); ended: {ended}"
        )
    return lines
