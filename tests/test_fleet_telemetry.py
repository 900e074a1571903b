"""Telemetry in a fleet (no seed counterpart; docs/seed-fidelity.md, "Round seven
(telemetry)"): a worker that lost its lease on a task ends the phase span it had open for
it, once, with an error status saying why, and forgets it; it appends nothing for the task.
A task another worker ended is taken back from the counts of the process that counted it.
Two schedulers share one store (SQLite, then PostgreSQL when a server answers) and one
ManualClock; only the first (``a``) has providers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from helpers.probes import metric_points
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tasktrail.domain import LeaseLost, ManualClock, Registry, Scheduler
from tasktrail.domain.telemetry.live import telemetry_of
from tasktrail.projections.trace import phase_spans

LEASE = 10_000


@pytest.fixture
def fleet(
    store_url: str,
    clock: ManualClock,
    registry: Registry,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
) -> Iterator[tuple[Scheduler, Scheduler]]:
    """Workers ``a`` (traced and metered) and ``b`` (neither) on one store."""
    a = Scheduler.open(store_url, clock=clock, registry=registry, worker="a", lease=LEASE)
    a.configure_telemetry(tracer_provider, meter_provider)
    b = Scheduler.open(store_url, clock=clock, registry=registry, worker="b", lease=LEASE)
    yield a, b
    b.close()
    a.close()


def _spans(exporter: InMemorySpanExporter, task_id: str) -> list[ReadableSpan]:
    return [
        span
        for span in exporter.get_finished_spans()
        if span.attributes is not None and span.attributes.get("task.id") == task_id
    ]


def _taken_over(a: Scheduler, b: Scheduler, clock: ManualClock, kind: str = "job") -> str:
    """A task ``a`` runs, recovered and reserved by ``b`` once ``a``'s lease expired."""
    task_id = a.submit(kind)
    a.reserve(task_id)  # a's phase span opens
    clock.advance(LEASE + 1)  # a pauses past its lease
    b.heartbeat()  # b recovers the task ...
    b.reserve(task_id)  # ... and takes it
    return task_id


def test_a_span_whose_task_another_worker_took_ends_lease_lost_at_the_next_heartbeat(
    fleet: tuple[Scheduler, Scheduler],
    clock: ManualClock,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    """Fleet only, no seed counterpart (docs/fleet.md; round four reported it)."""
    a, b = fleet
    started = clock.now
    task_id = _taken_over(a, b, clock)
    assert _spans(exporter, task_id) == []  # a has not folded b's events yet
    head = a.store.head()
    a.heartbeat()  # what a's Worker does every tick
    (span,) = _spans(exporter, task_id)
    assert span.attributes is not None
    assert span.attributes["outcome"] == "interrupted"
    assert span.attributes["error.type"] == "lease_lost"
    assert span.attributes["lease.taken_by"] == "b"
    assert span.status.status_code == StatusCode.ERROR
    assert "lease" in (span.status.description or "")
    # It ends where b recovered it, as history has it (there: `interrupted`).
    (interrupted,) = [s for s in phase_spans(a.store) if s.outcome == "interrupted"]
    assert span.end_time == interrupted.end_ns and span.start_time == interrupted.start_ns
    assert span.start_time == started * 1_000_000
    assert span.context is not None and span.context.span_id == interrupted.span_id
    durations = metric_points(reader, "tasktrail.phase.duration")
    point = durations[(("outcome", "interrupted"), ("phase", "start"), ("task.kind", "job"))]
    assert (point.count, point.sum) == (1, LEASE + 1)
    # Once, and nothing appended by a; b owns the task.
    a.heartbeat()
    assert a.task(task_id).worker == "b"
    assert len(_spans(exporter, task_id)) == 1
    assert a.store.head() == head
    assert task_id not in telemetry_of(a).fold.open


def test_a_refused_append_ends_the_lost_span_and_appends_nothing(
    fleet: tuple[Scheduler, Scheduler], clock: ManualClock, exporter: InMemorySpanExporter
) -> None:
    """Fleet only, no seed counterpart (docs/fleet.md; round four reported it)."""
    a, b = fleet
    task_id = _taken_over(a, b, clock)
    head = a.store.head()
    with pytest.raises(LeaseLost):
        a.checkpoint(task_id, "end")  # a's handler, not knowing yet
    assert a.store.head() == head
    (span,) = _spans(exporter, task_id)
    assert span.attributes is not None and span.attributes["error.type"] == "lease_lost"
    with pytest.raises(LeaseLost):
        a.checkpoint(task_id, "end")
    assert len(_spans(exporter, task_id)) == 1


def test_a_span_lost_before_the_task_was_taken_names_no_taker(
    fleet: tuple[Scheduler, Scheduler], clock: ManualClock, exporter: InMemorySpanExporter
) -> None:
    """Fleet only, no seed counterpart (docs/fleet.md; round four reported it)."""
    a, b = fleet
    task_id = a.submit("job")
    a.reserve(task_id)
    clock.advance(LEASE + 1)
    b.heartbeat()  # recovered, not reserved yet
    a.heartbeat()
    (span,) = _spans(exporter, task_id)
    assert span.attributes is not None and span.attributes["error.type"] == "lease_lost"
    assert "lease.taken_by" not in span.attributes
    b.reserve(task_id)
    a.heartbeat()
    assert len(_spans(exporter, task_id)) == 1


def test_lost_spans_leave_nothing_behind_in_the_fold(
    fleet: tuple[Scheduler, Scheduler], clock: ManualClock, exporter: InMemorySpanExporter
) -> None:
    """Fleet only, no seed counterpart (docs/fleet.md; round four reported it)."""
    a, b = fleet
    lost = []
    for _ in range(12):
        task_id = _taken_over(a, b, clock)
        a.heartbeat()  # a learns it, and renews its lease for the next round
        lost.append(task_id)
        b.checkpoint(task_id, "end")
        b.finish(task_id)
    fold = telemetry_of(a).fold
    assert fold.open == {}
    assert fold._traces == {}
    outcomes = [
        (span.attributes or {}).get("error.type")
        for task_id in lost
        for span in _spans(exporter, task_id)
    ]
    assert outcomes == ["lease_lost"] * len(lost)


def test_a_task_handed_over_at_a_sleep_and_ended_elsewhere_leaves_nothing_in_the_fold(
    fleet: tuple[Scheduler, Scheduler], clock: ManualClock, exporter: InMemorySpanExporter
) -> None:
    """Fleet only, no seed counterpart (docs/fleet.md; round four reported it)."""
    a, b = fleet
    task_id = a.submit("job")
    a.reserve(task_id)
    a.sleep(task_id, until=clock.now + 5, phase="end")  # a's span ends `sleeping`
    clock.advance(5)
    b.reserve(task_id)  # due: b runs the rest
    b.finish(task_id)
    a.heartbeat()
    assert not telemetry_of(a).fold.holding()
    assert [(s.attributes or {}).get("outcome") for s in _spans(exporter, task_id)] == ["sleeping"]


def test_a_task_another_worker_ended_is_taken_back_from_the_active_count(
    fleet: tuple[Scheduler, Scheduler], reader: InMemoryMetricReader
) -> None:
    """Seed 004, `TaskScheduler.#track`: a tracked record turning terminal is taken
    back, read for a fleet."""
    a, b = fleet

    def active() -> dict[Any, int]:
        return {k: p.value for k, p in metric_points(reader, "tasktrail.tasks.active").items()}

    task_id = a.submit("leaf")
    assert active() == {(("task.kind", "leaf"),): 1}
    b.run_until_idle()  # b runs and ends it; b never counted it
    assert b.task(task_id).status == "terminal"
    a.heartbeat()
    assert active() == {(("task.kind", "leaf"),): 0}
    a.close()
    assert active() == {(("task.kind", "leaf"),): 0}  # never below zero


def test_an_abort_mark_another_writer_appended_ends_the_run_span_where_history_does(
    fleet: tuple[Scheduler, Scheduler], clock: ManualClock, exporter: InMemorySpanExporter
) -> None:
    """Fleet only, no seed counterpart (docs/fleet.md; round four reported it)."""
    a, b = fleet
    task_id = a.submit("job")
    a.reserve(task_id)
    clock.advance(3)
    b.abort(task_id)  # an operator's abort, from another process
    marked_at = clock.now
    clock.advance(4)
    a.heartbeat()
    (span,) = _spans(exporter, task_id)
    assert span.attributes is not None and span.attributes["outcome"] == "aborted"
    assert span.status.status_code == StatusCode.OK
    (rebuilt,) = [s for s in phase_spans(a.store) if s.task_id == task_id]
    assert (rebuilt.outcome, rebuilt.end_at) == ("aborted", marked_at)
    assert (span.start_time, span.end_time) == (rebuilt.start_ns, rebuilt.end_ns)
