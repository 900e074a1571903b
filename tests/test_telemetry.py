"""Telemetry (SPEC.md section 6): live spans and metrics, and the same spans from history."""

from __future__ import annotations

import json
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
from tasktrail.domain.demo.workload import run_demo
from tasktrail.domain.tasks.events import TaskSubmitted
from tasktrail.domain.telemetry import live as telemetry
from tasktrail.projections.trace import phase_spans, rebuild, to_otlp_json
from tasktrail.replay import replay
from tasktrail.replay.cli import main

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


def _shape(span: ReadableSpan) -> tuple[Any, ...]:
    """What must agree between a live span and the one rebuilt from history."""
    assert span.context is not None
    return (
        span.context.trace_id,
        span.context.span_id,
        span.parent.span_id if span.parent is not None else None,
        span.name,
        tuple(sorted(span.attributes.items())),
        span.start_time,
        span.end_time,
        span.status.status_code,
        span.status.description,
        tuple((e.name, e.timestamp, tuple(sorted(e.attributes.items()))) for e in span.events),
    )


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


# ─── from history ───────────────────────────────────────────────────────────


def test_spans_rebuilt_from_history_equal_the_live_ones(
    tmp_path: Path, tracer_provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    store = tmp_path / "demo.db"
    with telemetry.default_providers(tracer_provider):
        run_demo(store, 200, log=lambda line: None)
    live = {_shape(span) for span in exporter.get_finished_spans()}
    rebuilt = rebuild(store)
    assert len(live) == len(exporter.get_finished_spans()) > 300
    in_history = {_shape(span) for span in rebuilt}
    assert live <= in_history
    # History adds only the two phases the demo's crashes cut off.
    extra = [dict(shape[4]) for shape in in_history - live]
    assert [(e["task.id"], e["outcome"]) for e in extra] == [("fragile-0001", "interrupted")] * 2
    # Parent-child across tasks is kept: owned work nests under its owner's phase.
    assert sum(1 for span in rebuilt if span.parent is not None) > 100


def test_a_log_recorded_without_telemetry_rebuilds_deterministic_traces(tmp_path: Path) -> None:
    store = tmp_path / "demo.db"
    run_demo(store, 200, log=lambda line: None)
    # No provider configured here, but the demo is a host that traces (demo/timing.py):
    # owned work keeps the carrier of the phase that submitted it; roots have none.
    # (With no tracer at all nothing is stored: test_without_a_provider_* below.)
    submitted = _submitted(store)
    assert all((e.trace is not None) == (e.owner_id is not None) for e in submitted)
    first = [_shape(span) for span in rebuild(store)]
    again = [_shape(span) for span in rebuild(store)]
    assert first == again and len(first) > 300
    # One trace per tree of owned work.
    spans = phase_spans(store)
    by_task = {s.task_id: s.trace_id for s in spans}
    research, search = _owner_and_owned(store)
    assert by_task[search] == by_task[research]
    assert len({by_task[research], by_task["fragile-0001"]}) == 2


def _owner_and_owned(store: Path) -> tuple[str, str]:
    """A research task of the demo and a search it owns."""
    tasks = replay(store).tasks
    search = next(t for t in tasks.values() if t.kind == "search" and t.owner_id is not None)
    assert search.owner_id is not None
    return search.owner_id, search.id


def _submitted(store: Path) -> list[TaskSubmitted]:
    from tasktrail.domain import open_store

    with open_store(store) as opened:
        return [r.event for r in opened.read() if isinstance(r.event, TaskSubmitted)]


def test_trace_of_one_task_and_its_otlp_json(tmp_path: Path) -> None:
    store = tmp_path / "demo.db"
    run_demo(store, 200, log=lambda line: None)
    research, search = _owner_and_owned(store)
    spans = rebuild(store, research)
    tasks = {span.attributes["task.id"] for span in spans}
    assert research in tasks and search in tasks and "fragile-0001" not in tasks
    document = to_otlp_json(spans)
    (resource,) = document["resourceSpans"]
    assert resource["resource"]["attributes"] == [
        {"key": "service.name", "value": {"stringValue": "tasktrail"}}
    ]
    (scope,) = resource["scopeSpans"]
    assert scope["scope"]["name"] == "tasktrail"
    row = scope["spans"][0]
    assert set(row) >= {
        "traceId",
        "spanId",
        "parentSpanId",
        "name",
        "startTimeUnixNano",
        "endTimeUnixNano",
        "attributes",
        "events",
        "status",
    }
    assert len(row["traceId"]) == 32 and len(row["spanId"]) == 16
    assert int(row["startTimeUnixNano"]) == spans[0].start_time
    assert {"key": "resumed", "value": {"boolValue": False}} in row["attributes"]


def test_rebuild_sends_spans_to_a_configured_exporter(tmp_path: Path) -> None:
    store = tmp_path / "demo.db"
    run_demo(store, 200, log=lambda line: None)
    exporter = InMemorySpanExporter()
    spans = rebuild(store, "fragile-0001", exporter=exporter)
    assert [_shape(s) for s in exporter.get_finished_spans()] == [_shape(s) for s in spans]
    errors = [s for s in spans if s.status.status_code == StatusCode.ERROR]
    assert [s.attributes["outcome"] for s in errors] == ["interrupted", "interrupted"]


def test_cli_trace_writes_otlp_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "demo.db"
    run_demo(store, 200, log=lambda line: None)
    out = tmp_path / "fragile.json"
    assert main(["trace", str(store), "fragile-0001", "--out", str(out)]) == 0
    assert "wrote 4 spans (1 traces)" in capsys.readouterr().out
    document = json.loads(out.read_text())
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [s["name"] for s in spans] == ["tasktrail.phase"] * 4
    assert main(["trace", str(store)]) == 0
    everything = json.loads(capsys.readouterr().out)
    assert len(everything["resourceSpans"][0]["scopeSpans"][0]["spans"]) > 300
    assert main(["trace", str(store), "no-such-task"]) == 2
    assert "no-such-task" in capsys.readouterr().err
    assert main(["trace", str(tmp_path / "missing.db")]) == 2


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
