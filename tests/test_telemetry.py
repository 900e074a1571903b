"""Telemetry (SPEC.md section 6): live spans and metrics, and that without a provider, or
with a failing one, nothing about scheduling changes. The same spans from history are in
test_telemetry_history.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.probes import metric_points
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition
from tasktrail.domain.telemetry import live as telemetry
from tasktrail.projections.trace import phase_spans

MS = 1_000_000  # ns


def _registry(clock: ManualClock) -> Registry:
    def start(inv: Any) -> str:
        clock.advance(5)  # the phase takes 5 ms on the scheduler clock
        return "end"

    def plan(inv: Any) -> None:
        children = [inv.submit("leaf", id=f"{inv.task_id}.leaf-{n}") for n in range(2)]
        inv.wait(children, "all", then="done")

    def nap(inv: Any) -> None:
        inv.sleep(inv.now() + 100, then="done")

    def retrying(inv: Any) -> None:
        attempt = inv.task.checkpoint.attempt or 0
        if attempt < 2:
            inv.checkpoint("try", attempt + 1)
        else:
            inv.finish("completed")

    def boom(inv: Any) -> None:
        raise RuntimeError("disk on fire")

    def cleanup(inv: Any) -> None:
        inv.finish("aborted", reason="asked to")

    finish = {"end": lambda inv: inv.finish("completed")}
    return Registry(
        [
            TaskDefinition("job", 1, {"start": start, **finish}),
            TaskDefinition("leaf", 1, {"go": lambda inv: inv.finish("completed")}),
            TaskDefinition("tree", 1, {"plan": plan, "done": lambda inv: inv.finish("completed")}),
            TaskDefinition(
                "napper", 1, {"nap": nap, "done": lambda inv: inv.finish("failed", "no")}
            ),
            TaskDefinition("retry", 1, {"try": retrying}),
            TaskDefinition("broken", 1, {"go": boom}),
            TaskDefinition(
                "sleepy", 1, {"zz": lambda inv: inv.sleep(inv.now() + 10**9)}, abort=cleanup
            ),
        ]
    )


@pytest.fixture
def scheduler(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
) -> Iterator[Scheduler]:
    """A scheduler on SQLite sending spans and metrics to in-memory SDK providers."""
    s = Scheduler.open(sqlite_url, clock=clock, registry=_registry(clock))
    s.configure_telemetry(tracer_provider, meter_provider)
    yield s
    s.close()


def _spans(exporter: InMemorySpanExporter, task_id: str | None = None) -> list[ReadableSpan]:
    spans = [s for s in exporter.get_finished_spans() if s.name == "tasktrail.phase"]
    return [s for s in spans if task_id is None or s.attributes["task.id"] == task_id]


# ─── live spans ─────────────────────────────────────────────────────────────


def test_a_span_per_phase_with_its_attributes_and_clock_times(
    scheduler: Scheduler, exporter: InMemorySpanExporter, clock: ManualClock
) -> None:
    started = clock.now
    tid = scheduler.submit("job")
    scheduler.run_until_idle()
    first, second = _spans(exporter, tid)
    assert first.name == second.name == "tasktrail.phase"
    assert dict(first.attributes) == {
        "task.id": tid,
        "task.kind": "job",
        "phase": "start",
        "mode": "run",
        "resumed": False,
        "outcome": "next=end",
    }
    assert dict(second.attributes)["phase"] == "end"
    assert dict(second.attributes)["outcome"] == "done"
    # Scheduler-clock times: the phase took 5 ms, the next one none.
    assert (first.start_time, first.end_time) == (started * MS, (started + 5) * MS)
    assert second.start_time == second.end_time == (started + 5) * MS
    assert [(e.name, dict(e.attributes), e.timestamp) for e in first.events] == [
        ("tasktrail.checkpoint", {"phase": "end"}, (started + 5) * MS)
    ]
    assert first.status.status_code == second.status.status_code == StatusCode.UNSET
    # One task, one trace; a task with no carrier and no owner has root spans.
    assert first.context.trace_id == second.context.trace_id
    assert first.parent is None and second.parent is None


def test_waiting_sleeping_and_attempt_outcomes(
    scheduler: Scheduler, exporter: InMemorySpanExporter, clock: ManualClock
) -> None:
    napper = scheduler.submit("napper")
    retry = scheduler.submit("retry")
    scheduler.run_until_idle()
    clock.advance(100)
    scheduler.run_until_idle()
    assert [s.attributes["outcome"] for s in _spans(exporter, napper)] == ["sleeping", "faulted"]
    tries = _spans(exporter, retry)
    assert [(s.attributes.get("attempt"), s.attributes["outcome"]) for s in tries] == [
        (None, "next=try"),
        (1, "next=try"),
        (2, "done"),
    ]
    # The phase did not change: no checkpoint span event (pi-durable).
    assert [list(s.events) for s in tries] == [[], [], []]


def test_error_status_for_failed_and_faulted_outcomes(
    scheduler: Scheduler, exporter: InMemorySpanExporter, clock: ManualClock
) -> None:
    broken = scheduler.submit("broken")
    napper = scheduler.submit("napper")
    scheduler.run_until_idle()
    clock.advance(100)
    scheduler.run_until_idle()
    (faulted,) = _spans(exporter, broken)
    assert faulted.attributes["outcome"] == "faulted"
    assert faulted.attributes["error.type"] == "task_faulted"
    assert faulted.status.status_code == StatusCode.ERROR
    assert "disk on fire" in (faulted.status.description or "")
    failed = _spans(exporter, napper)[-1]
    assert failed.attributes["error.type"] == "task_failed"
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.status.description == "task_failed: no"


def test_an_abort_ends_the_run_span_and_the_abort_handler_has_its_own(
    scheduler: Scheduler, exporter: InMemorySpanExporter
) -> None:
    tid = scheduler.submit("sleepy")
    scheduler.run_until_idle()
    scheduler.abort(tid)
    scheduler.run_until_idle()
    run, abort = _spans(exporter, tid)
    assert (run.attributes["mode"], run.attributes["outcome"]) == ("run", "sleeping")
    assert (abort.attributes["mode"], abort.attributes["outcome"]) == ("abort", "aborted")
    assert abort.status.status_code == StatusCode.OK


def test_owned_tasks_are_children_of_the_phase_that_submitted_them(
    scheduler: Scheduler, exporter: InMemorySpanExporter
) -> None:
    tree = scheduler.submit("tree")
    scheduler.run_until_idle()
    plan = _spans(exporter, tree)[0]
    assert plan.attributes["phase"] == "plan"
    children = [t for t in scheduler.tasks() if t.owner_id == tree]
    assert len(children) == 2
    for child in children:
        # The carrier stored on the task names the phase span that submitted it.
        assert child.trace is not None and "traceparent" in child.trace
        (span,) = _spans(exporter, child.id)
        assert span.parent is not None
        assert span.parent.span_id == plan.context.span_id
        assert span.context.trace_id == plan.context.trace_id


def test_a_task_submitted_under_a_current_span_joins_its_trace(
    scheduler: Scheduler, exporter: InMemorySpanExporter, tracer_provider: TracerProvider
) -> None:
    tracer = tracer_provider.get_tracer("the caller")
    with tracer.start_as_current_span("request") as request:
        tid = scheduler.submit("job")
    assert scheduler.task(tid).trace == {
        "traceparent": f"00-{request.get_span_context().trace_id:032x}-"
        f"{request.get_span_context().span_id:016x}-{int(request.get_span_context().trace_flags):02x}"
    }
    scheduler.run_until_idle()
    for span in _spans(exporter, tid):
        assert span.parent is not None
        assert span.parent.span_id == request.get_span_context().span_id
        assert span.context.trace_id == request.get_span_context().trace_id


def test_a_phase_resumed_after_a_crash_continues_the_same_trace(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    registry = _registry(clock)
    with telemetry.default_providers(tracer_provider):
        first = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w")
        tid = first.submit("job", trace=carrier)
        first.reserve(tid)  # running when the process dies
        first.store.close()  # a crash: no close()
        crashed_at = clock.now
        recovered_at = clock.advance(1_000)
        second = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w")
        second.run_until_idle()
        second.close()
    spans = _spans(exporter, tid)
    assert [s.attributes["resumed"] for s in spans] == [True, False]
    for span in spans:
        assert span.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
        assert span.parent is not None and span.parent.span_id == 0xB7AD6B7169203331
    # History also has the phase the crash cut off, ended where recovery found it.
    interrupted = [s for s in phase_spans(sqlite_url) if s.outcome == "interrupted"]
    assert [(s.task_id, s.start_at, s.end_at) for s in interrupted] == [
        (tid, crashed_at, recovered_at)
    ]
    assert interrupted[0].trace_id == spans[0].context.trace_id


def test_a_close_ends_the_running_phase(
    sqlite_url: str, clock: ManualClock, tracer_provider: TracerProvider, exporter: Any
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=_registry(clock))
    s.configure_telemetry(tracer_provider)
    tid = s.submit("job")
    s.reserve(tid)  # a worker is mid-phase when the scheduler closes
    s.close()
    (span,) = _spans(exporter, tid)
    assert span.attributes["outcome"] == "aborted"


# ─── live metrics ───────────────────────────────────────────────────────────


def test_active_tasks_counter_and_phase_duration_histogram(
    scheduler: Scheduler, reader: InMemoryMetricReader
) -> None:
    scheduler.submit("job")
    scheduler.submit("job")
    scheduler.submit("leaf")
    active = metric_points(reader, "tasktrail.tasks.active")
    assert {k: p.value for k, p in active.items()} == {
        (("task.kind", "job"),): 2,
        (("task.kind", "leaf"),): 1,
    }
    scheduler.run_until_idle()
    active = metric_points(reader, "tasktrail.tasks.active")
    assert {p.value for p in active.values()} == {0}
    durations = metric_points(reader, "tasktrail.phase.duration")
    start = durations[(("outcome", "next=end"), ("phase", "start"), ("task.kind", "job"))]
    assert (start.count, start.sum) == (2, 10)  # two phases of 5 ms each
    end = durations[(("outcome", "done"), ("phase", "end"), ("task.kind", "job"))]
    assert (end.count, end.sum) == (2, 0)
    assert durations[(("outcome", "done"), ("phase", "go"), ("task.kind", "leaf"))].count == 1


# ─── no provider, and failures ──────────────────────────────────────────────


def test_without_a_provider_nothing_is_recorded_and_nothing_fails(
    sqlite_url: str, clock: ManualClock
) -> None:
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider), (
        "this test needs OpenTelemetry's global tracer provider unset"
    )
    s = Scheduler.open(sqlite_url, clock=clock, registry=_registry(clock))
    tree = s.submit("tree")
    s.run_until_idle()
    assert s.task(tree).outcome is not None
    assert all(t.trace is None for t in s.tasks()), "no span current: no carrier stored"
    state = telemetry.telemetry_of(s)
    assert state.tracer() is None and state.instruments() is None
    assert state.fold.open == {}  # the fold never ran
    s.close()


class _BrokenProvider(TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the tracing backend is down")


def test_a_telemetry_failure_never_changes_scheduling(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    def record(path: Path, provider: TracerProvider | None) -> list[Any]:
        run_clock = ManualClock(clock.now)
        s = Scheduler.open(path, clock=run_clock, registry=_registry(run_clock), worker="w")
        if provider is not None:
            s.configure_telemetry(provider)
        for kind in ("tree", "job", "broken", "retry"):
            s.submit(kind, id=f"{kind}-1")
        s.run_until_idle()
        events = [r.event for r in s.store.read()]
        s.close()
        return events

    assert record(tmp_path / "a.db", None) == record(tmp_path / "b.db", _BrokenProvider())
    assert "tasktrail telemetry" in caplog.text
