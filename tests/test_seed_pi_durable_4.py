"""pi-durable's behaviour, fourth round (seed 004, `TaskScheduler`): telemetry, waits,
sleeps and `wake()` at their edges. Each test names the behaviour and the seed's code it
comes from; the fix it holds, and what is only reported, are written down in
docs/seed-fidelity.md ("Round four (telemetry, waits, sleeps)")."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from conftest import finishing
from helpers.probes import metric_points, refused, running
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tasktrail.domain import (
    ManualClock,
    Registry,
    Scheduler,
    TaskDefinition,
    Worker,
)
from tasktrail.domain.tasks.events import SleepStarted
from tasktrail.domain.telemetry import live as telemetry


def _spans(exporter: InMemorySpanExporter, task_id: str) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.name == "tasktrail.phase" and s.attributes is not None
        if s.attributes["task.id"] == task_id
    ]


def _nap(inv: Any) -> None:
    inv.sleep(inv.now() + 100, then="up")


NAPS = TaskDefinition("nap", 1, {"z": _nap, "up": finishing()}, abort=finishing("aborted"))

# ─── telemetry: what `resumed` says ──────────────────────────────────────────────
# pi-durable (`open`: `#resumed.add(record.id)` for every record it loads, whatever its
# status; `#phase`: `resumed = #resumed.delete(task.id)`): the first phase span of each
# task the process loaded is `resumed`, a pending or sleeping one too; a task submitted
# after the open is not, nor a later span of a loaded one.


def test_pi_durable_first_span_of_every_loaded_task_is_resumed(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    registry = Registry([TaskDefinition("leaf", 1, {"go": finishing()}), NAPS])
    with telemetry.default_providers(tracer_provider):
        s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
        pending = s.submit("leaf")
        napper = s.submit("nap")
        s.reserve(napper)
        s.sleep(napper, until=clock.now + 100, phase="up")
        s.close()  # a clean close: nothing was running
        exporter.clear()
        s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
        fresh = s.submit("leaf")
        clock.advance(100)
        s.run_until_idle()
        s.close()
    assert [span.attributes["resumed"] for span in _spans(exporter, pending)] == [True]  # type: ignore[index]
    assert [span.attributes["resumed"] for span in _spans(exporter, napper)] == [True]  # type: ignore[index]
    assert [span.attributes["resumed"] for span in _spans(exporter, fresh)] == [False]  # type: ignore[index]


# ─── telemetry: what a close does to a running phase ───────────────────────────
# pi-durable (`#seal`, then `join`): the invocation a close stops ends its span with
# outcome `aborted` and an OK status, and still records its duration under that
# outcome; the active-tasks counter takes back every task the process counted.


def test_pi_durable_a_close_ends_the_phase_ok_and_records_its_duration(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    registry = Registry([NAPS])
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    s.configure_telemetry(tracer_provider, meter_provider)
    napper = s.submit("nap")
    s.reserve(napper)  # mid-phase when the scheduler closes
    clock.advance(7)
    s.close()
    (span,) = _spans(exporter, napper)
    assert span.attributes is not None and span.attributes["outcome"] == "aborted"
    assert span.status.status_code == StatusCode.OK
    durations = metric_points(reader, "tasktrail.phase.duration")
    point = durations[(("outcome", "aborted"), ("phase", "z"), ("task.kind", "nap"))]
    assert (point.count, point.sum) == (1, 7)
    active = metric_points(reader, "tasktrail.tasks.active")
    assert {p.value for p in active.values()} == {0}


# ─── telemetry: a held outcome is still an active task ─────────────────────────
# pi-durable (`#track`): `tasks.active` is taken back when a task turns terminal, not
# when it holds its outcome (`completing` is a live status); the holder leaves the count
# with its last owned task.


def test_pi_durable_a_holder_stays_active_until_its_last_owned_task_ends(
    scheduler: Scheduler, meter_provider: MeterProvider, reader: InMemoryMetricReader
) -> None:
    scheduler.configure_telemetry(meter_provider=meter_provider)
    holder = running(scheduler)
    below = running(scheduler, "leaf", owner=holder)

    def active() -> dict[str, int]:
        points = metric_points(reader, "tasktrail.tasks.active")
        return {dict(k)["task.kind"]: p.value for k, p in points.items()}

    scheduler.finish(holder, "completed")
    assert scheduler.task(holder).status == "completing"
    assert active() == {"job": 1, "leaf": 1}
    scheduler.finish(below, "completed")
    assert scheduler.task(holder).status == "terminal"
    assert active() == {"job": 0, "leaf": 0}


# ─── telemetry: no span without an invocation ──────────────────────────────────
# pi-durable (`#reserve`): a cut-off abort handler is ended `faulted` by the reservation
# itself (`#terminate`, before any `#phase`), and an abort-marked task no definition
# takes is orphaned without an invocation: neither has a phase span.


def test_pi_durable_a_task_ended_by_its_reservation_has_no_phase_span(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    registry = Registry([TaskDefinition("nap", 1, {"z": _nap}, abort=lambda inv: None)])
    with telemetry.default_providers(tracer_provider):
        s = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w")
        cut_off = s.submit("nap")
        s.abort(cut_off)
        s.reserve(cut_off)  # its abort handler is running when the process dies
        s.store.close()
        s = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w", restart_limit=1)
        exporter.clear()
        ghost = s.submit("ghost", phase="x")
        s.abort(ghost)
        report = s.run_pass()
        s.close()
    assert report.faulted == {cut_off: "restart_limit"}
    assert s.task(cut_off).outcome.status == "faulted"  # type: ignore[union-attr]
    assert s.task(ghost).outcome.status == "orphaned"  # type: ignore[union-attr]
    assert _spans(exporter, cut_off) == [] and _spans(exporter, ghost) == []


# ─── sleeps: an abort invocation cannot sleep, whatever its until ──────────────
# pi-durable (`validateSleep`): "an abort handler cannot sleep" is checked before the
# `until` is looked at, so an abort handler's sleep is refused as such even with a
# time that is no time.


@pytest.mark.parametrize("until", [math.nan, -1, 1e300])
def test_pi_durable_abort_invocation_sleep_is_refused_before_its_until(
    scheduler: Scheduler, until: float
) -> None:
    task_id = scheduler.submit("job")
    scheduler.abort(task_id)
    assert scheduler.reserve(task_id) == "abort"
    error = refused(scheduler, 8, scheduler.sleep, task_id, until)
    assert "abort handler cannot sleep" in str(error)


# pi-durable (`#runAbort`): the sleep throws inside the abort handler, and the step after
# it faults the task with that error (reported `threw`); no sleep is recorded.


def test_pi_durable_abort_handler_that_sleeps_ends_faulted(
    sqlite_url: str, clock: ManualClock
) -> None:
    def drowsy(inv: Any) -> None:
        inv.sleep(inv.now() + 1_000)

    registry = Registry([TaskDefinition("job", 1, {"go": finishing()}, abort=drowsy)])
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task_id = s.submit("job")
    s.abort(task_id)
    report = s.run_pass()
    outcome = s.task(task_id).outcome
    assert report.faulted == {task_id: "threw"}
    assert outcome is not None and outcome.status == "faulted"
    assert "abort handler cannot sleep" in (outcome.message or "")
    assert not any(isinstance(e, SleepStarted) for e in s.history(task_id))
    s.close()


# ─── wake(): `at` over several sleepers and their marks ─────────────────────────
# pi-durable (`wake`): a sleeper counts toward `at` while it is not due and not
# abort-marked, before its definition is looked at (one no definition takes still
# counts); an abort mark ends the sleep: a request-marked sleeper is work now, and a
# `restart`-marked one whose definition is missing is neither work nor in `at`. A due
# sleeper no definition takes is no work.


def test_pi_durable_wake_at_over_sleepers_with_marks_and_missing_definitions(
    sqlite_url: str, clock: ManualClock
) -> None:
    ghost = TaskDefinition("ghost", 1, {"z": _nap, "up": finishing()})
    full = Registry([NAPS, ghost])
    s = Scheduler.open(sqlite_url, clock=clock, registry=full, worker="w")
    start = clock.now

    def sleeper(kind: str, after: int, **options: Any) -> str:
        task_id = running(s, kind, **options)
        s.sleep(task_id, until=start + after, phase="up")
        return task_id

    latest = sleeper("nap", 1_000)
    undefined = sleeper("ghost", 300)  # its definition is gone at the reopen
    abandoned = sleeper("ghost", 100, abandon_on_restart=True)  # a restart mark at reopen
    requested = sleeper("nap", 200)
    s.close()
    s = Scheduler.open(sqlite_url, clock=clock, registry=Registry([NAPS]), worker="w")
    assert s.task(abandoned).abort_requested and s.task(abandoned).abort_reason == "restart"
    assert s.wake() == {"active": False, "at": start + 200}
    s.abort(requested)  # its sleep is over: work now, out of `at`
    assert s.wake() == {"active": True, "at": start + 300}
    s.run_until_idle()  # the request-marked sleeper aborts at once
    assert s.task(requested).outcome.status == "aborted"  # type: ignore[union-attr]
    assert s.wake() == {"active": False, "at": start + 300}
    clock.advance(300)  # due, but no definition takes it: no work
    assert s.wake() == {"active": False, "at": start + 1_000}
    assert s.blocked_reason(undefined) == "missing_definition"
    assert s.task(latest).status == "sleeping"
    s.close()


# ─── waits: held outcomes at the edges of `all` and `failFast` ──────────────────
# pi-durable (`wake`: a waiter is held back while one of its awaited tasks is live, and
# a holder is live; `#anyFailed`: "holds or ended with an outcome other than
# `completed`"): an `all` waiter waits for a held failure to end; a `failFast` waiter
# waits for a held `completed` to end, and wakes at a held `aborted`.


def test_pi_durable_held_outcomes_at_the_edges_of_all_and_fail_fast(
    scheduler: Scheduler,
) -> None:
    def holder(owner: str, status: str) -> tuple[str, str]:
        held = running(scheduler, owner=owner)
        below = scheduler.submit("leaf", owner=held)
        scheduler.finish(held, status)  # type: ignore[arg-type]
        assert scheduler.task(held).status == "completing"
        return held, below

    patient = running(scheduler)
    fast = running(scheduler)
    failing, _ = holder(fast, "failed")
    scheduler.wait(patient, [failing], "all", phase="end")
    fast_done = running(scheduler)
    completed, completed_below = holder(fast_done, "completed")
    scheduler.wait(fast_done, [completed], "failFast", phase="end")
    fast_aborted = running(scheduler)
    aborted, _ = holder(fast_aborted, "aborted")
    scheduler.wait(fast_aborted, [aborted], "failFast", phase="end")

    refused(scheduler, 7, scheduler.reserve, patient)  # a held failure has not ended
    refused(scheduler, 7, scheduler.reserve, fast_done)  # a held completion is no failure
    assert scheduler.reserve(fast_aborted) == "run"  # a held abort is one
    assert scheduler.reserve(completed_below) == "run"
    scheduler.finish(completed_below, "completed")
    assert scheduler.task(completed).status == "terminal"
    assert scheduler.reserve(fast_done) == "run"


# ─── waits: the order of a wait's checks ──────────────────────────────────────
# pi-durable (`#validateWait`: "A wait names existing tasks, and `failFast` only tasks
# the waiter owns. It may not close a cycle"): a wait naming a task that does not exist
# is refused for that, whatever else it names; a `failFast` wait on a task the waiter
# does not own is refused for that before its cycle is looked at.


def test_pi_durable_wait_checks_existence_then_ownership_then_the_cycle(
    scheduler: Scheduler,
) -> None:
    waiter = running(scheduler)
    stranger = running(scheduler, "leaf")
    error = refused(scheduler, 7, scheduler.wait, waiter, [stranger, "nope"], "failFast")
    assert "no such task" in str(error) and "'nope'" in str(error)
    scheduler.wait(stranger, [waiter], "all")  # waiter -> stranger would close a cycle
    error = refused(scheduler, 7, scheduler.wait, waiter, [stranger], "failFast")
    assert "owns" in str(error) and "cycle" not in str(error)
    error = refused(scheduler, 7, scheduler.wait, waiter, [stranger], "all")
    assert "cycle" in str(error)


# ─── waits: an abort mark ends a wait; an awaited task dropped from memory ──────
# pi-durable (`wake`: only a waiter *without* an abort mark is held back by its live
# awaited tasks): an abort-marked waiter with no owned live work runs its abort handler
# while the task it waits on still runs.


def test_pi_durable_abort_mark_ends_a_wait_on_a_running_task(scheduler: Scheduler) -> None:
    waiter = running(scheduler)
    stranger = running(scheduler, "leaf")
    scheduler.wait(waiter, [stranger], "all")
    assert scheduler.wake()["active"] is True  # the stranger runs
    scheduler.abort(waiter)
    assert scheduler.task(stranger).status == "running"
    assert scheduler.reserve(waiter) == "abort"


# pi-durable (`readiness`, `#waitingOn`): a waiter is held back only by awaited tasks
# that are live; an ended one, even one no longer in the scheduler's memory, does not
# hold it. tasktrail reads a dropped task back from the store, so a wait on it is
# accepted and over at once.


def test_pi_durable_wait_on_a_task_dropped_from_memory_is_over_at_once(
    tmp_path: Path, clock: ManualClock, registry: Registry
) -> None:
    url = str(tmp_path / "dropped.db")
    s = Scheduler.open(url, clock=clock, registry=registry, worker="w")
    old = running(s, "leaf")
    s.finish(old, "failed")
    waiter = s.submit("job")
    s.close()
    s = Scheduler.open(url, clock=clock, registry=registry, worker="w")
    assert old not in s.world.tasks  # ended and dropped: only the store has it
    s.reserve(waiter)
    s.wait(waiter, [old], "all", phase="end")
    assert s.wake() == {"active": True, "at": None}
    assert s.reserve(waiter) == "run"
    assert s.task(waiter).checkpoint.phase == "end"  # type: ignore[union-attr]
    s.close()


# ─── wake(): only a delivered wake counts ───────────────────────────────────────
# pi-durable (`#scheduleWake`): an unchanged wake is not given to `onWake` again, but
# `#lastWake` is set only once `onWake` returned: "after a throw, the next change or kick
# offers it again". The Worker's `on_wake` is offered the same wake at its next tick.


def test_pi_durable_wake_the_host_raised_on_is_offered_again(
    sqlite_url: str, clock: ManualClock
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=Registry([NAPS]), worker="w")
    offered: list[dict[str, Any]] = []

    def on_wake(wake: dict[str, Any]) -> None:
        offered.append(wake)
        if len(offered) == 1:
            raise RuntimeError("the host's alarm could not be set")

    worker = Worker(s, on_wake=on_wake)
    s.submit("nap")
    worker.tick()  # the nap sleeps; the host raised on its wake
    sleeping = {"active": False, "at": clock.now + 100}
    assert offered == [sleeping]
    worker.tick()  # nothing changed, but the wake was never delivered
    assert offered == [sleeping, sleeping]
    worker.tick()  # delivered now: not offered again while unchanged
    assert offered == [sleeping, sleeping]
    s.close()
