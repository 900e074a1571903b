"""pi-durable's telemetry, seventh round (seed 004, `TaskScheduler`): its phase spans,
their attributes, status and events, and its two metrics, at the edges earlier rounds
left unpinned. Each test names the seed's code it follows; the fixes, and what is only
reported, are written down in docs/seed-fidelity.md ("Round seven (telemetry)")."""

from __future__ import annotations

from typing import Any

from conftest import finishing
from helpers.probes import metric_points
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition
from tasktrail.domain.telemetry import live as telemetry
from tasktrail.projections.trace import rebuild

DURATION = "tasktrail.phase.duration"


def _spans(exporter: InMemorySpanExporter, task_id: str) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.name == "tasktrail.phase" and s.attributes is not None
        if s.attributes["task.id"] == task_id
    ]


def _traced(
    sqlite_url: str,
    clock: ManualClock,
    registry: Registry,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
) -> Scheduler:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    s.configure_telemetry(tracer_provider, meter_provider)
    return s


# ─── the status of an error span ─────────────────────────────────────────────────
# pi-durable (`#phase`, `finally`): a `faulted`, `failed` or `orphaned` outcome sets an
# error status named `task_<status>` with the outcome's message (an orphan's reason),
# `message.slice(0, 500)`: the message's first 500 characters, whatever the name adds.


def test_pi_durable_an_error_status_keeps_500_characters_of_the_message(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """Seed 004, `TaskScheduler.#phase`: the error status carries `message.slice(0, 500)`."""
    message = "".join(chr(ord("a") + n % 26) for n in range(600))

    def give_up(inv: Any) -> None:
        inv.finish("failed", message)

    registry = Registry([TaskDefinition("job", 1, {"go": give_up})])
    s = _traced(sqlite_url, clock, registry, tracer_provider, meter_provider)
    task = s.submit("job")
    s.run_until_idle()
    (span,) = _spans(exporter, task)
    assert span.attributes is not None and span.attributes["error.type"] == "task_failed"
    assert span.status.status_code == StatusCode.ERROR
    assert span.status.description == f"task_failed: {message[:500]}"
    # History folds the same span.
    (rebuilt,) = [p for p in rebuild(s.store, task) if p.name == "tasktrail.phase"]
    assert rebuilt.status.description == span.status.description
    s.close()


# ─── the duration is recorded with its span ──────────────────────────────────────
# pi-durable (`#phase`: `#durationMetric.record(..., span)`): each duration is recorded
# with the phase span it measures, so a metrics backend can lead from a point (an
# exemplar) to its span, whether or not that span is current where the phase ends.


def test_pi_durable_phase_duration_is_recorded_in_its_span_context(
    sqlite_url: str,
    clock: ManualClock,
    registry: Registry,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """Seed 004, `TaskScheduler.#phase`: `#durationMetric.record(..., span)`."""
    reader = InMemoryMetricReader()
    s = _traced(sqlite_url, clock, registry, tracer_provider, MeterProvider([reader]))
    task = s.submit("job")  # start -> end, each phase its own span
    s.run_until_idle()
    spans = {str(span.attributes["phase"]): span for span in _spans(exporter, task)}  # type: ignore[index]
    points = metric_points(reader, DURATION)
    for phase, outcome in (("start", "next=end"), ("end", "done")):
        point = points[(("outcome", outcome), ("phase", phase), ("task.kind", "job"))]
        context = spans[phase].context
        assert context is not None
        assert [(e.trace_id, e.span_id) for e in point.exemplars] == [
            (context.trace_id, context.span_id)
        ], phase
    s.close()


# ─── held outcomes end a span as the outcome does ───────────────────────────────
# pi-durable (`#phase`): the outcome of a span whose task holds its outcome
# (`completing`) is that outcome's: `done` with no status for `completed`, `faulted`
# with an error status for `failed`; its duration is recorded under that outcome.


def test_pi_durable_a_held_outcome_ends_its_span_as_the_outcome(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    """Seed 004, `TaskScheduler.#phase`: a `completing` state's outcome decides the span's."""

    def holder(status: str) -> Any:
        def phase(inv: Any) -> None:
            inv.submit("child")  # owned work, still live: the outcome is held
            clock.advance(3)
            inv.finish(status, "no" if status == "failed" else None)

        return phase

    registry = Registry(
        [
            TaskDefinition("child", 1, {"go": finishing()}),
            TaskDefinition("ok", 1, {"go": holder("completed")}),
            TaskDefinition("bad", 1, {"go": holder("failed")}),
        ]
    )
    s = _traced(sqlite_url, clock, registry, tracer_provider, meter_provider)
    ok, bad = s.submit("ok"), s.submit("bad")
    s.run_pass()
    assert s.task(ok).status == s.task(bad).status == "completing"
    (done,) = _spans(exporter, ok)
    (faulted,) = _spans(exporter, bad)
    assert done.attributes is not None and faulted.attributes is not None
    assert (done.attributes["outcome"], done.status.status_code) == ("done", StatusCode.UNSET)
    assert (faulted.attributes["outcome"], faulted.status.status_code) == (
        "faulted",
        StatusCode.ERROR,
    )
    assert faulted.attributes["error.type"] == "task_failed"
    points = metric_points(reader, DURATION)
    for kind, outcome in (("ok", "done"), ("bad", "faulted")):
        point = points[(("outcome", outcome), ("phase", "go"), ("task.kind", kind))]
        assert (point.count, point.sum) == (1, 3)
    s.close()


# ─── an abort mark ends a run span `aborted` ────────────────────────────────────
# pi-durable (`#phase`: `invocation.ended` gives `aborted`, status OK; the duration is
# recorded under it): a run invocation that an abort mark ends mid-phase ends its span
# `aborted` with an OK status; the abort handler then has a span of its own (`kind`:
# the invocation's mode), at the phase the task was at.


def test_pi_durable_an_abort_mark_ends_a_running_phase_aborted_ok(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    """Seed 004, `TaskScheduler.#phase` and `#runAbort`: `invocation.ended` gives `aborted`, OK."""
    schedulers: list[Scheduler] = []

    def go(inv: Any) -> str:
        clock.advance(4)
        schedulers[0].abort(inv.task_id)  # an operator's abort arrives mid-phase
        return "done"  # refused (rule 3): the run invocation ends

    registry = Registry(
        [TaskDefinition("job", 1, {"go": go, "done": finishing()}, abort=finishing("aborted"))]
    )
    s = _traced(sqlite_url, clock, registry, tracer_provider, meter_provider)
    schedulers.append(s)
    task = s.submit("job")
    s.run_until_idle()
    assert s.task(task).outcome is not None and s.task(task).outcome.status == "aborted"
    run, abort = _spans(exporter, task)
    assert run.attributes is not None and abort.attributes is not None
    assert (run.attributes["mode"], run.attributes["outcome"]) == ("run", "aborted")
    assert run.status.status_code == StatusCode.OK
    assert (abort.attributes["mode"], abort.attributes["phase"]) == ("abort", "go")
    assert (abort.attributes["outcome"], abort.status.status_code) == ("aborted", StatusCode.OK)
    points = metric_points(reader, DURATION)
    point = points[(("outcome", "aborted"), ("phase", "go"), ("task.kind", "job"))]
    assert (point.count, point.sum) == (2, 4)  # the run's 4 ms, the abort handler's 0
    s.close()


# ─── `resumed` holds for an abort invocation too ─────────────────────────────────
# pi-durable (`#phase` runs for `#runAbort` as for a run; `resumed =
# #resumed.delete(task.id)`): the first span of a loaded task is `resumed` whatever the
# invocation's mode, so an abort handler's first span after a reopen is.


def test_pi_durable_an_abort_handlers_first_span_after_an_open_is_resumed(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """Seed 004, `TaskScheduler.open` (`#resumed.add`) and `#phase` for `#runAbort`."""
    registry = Registry([TaskDefinition("job", 1, {"go": finishing()}, abort=finishing("aborted"))])
    with telemetry.default_providers(tracer_provider):
        s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
        task = s.submit("job")
        s.abort(task)  # marked while pending: the abort handler runs at the next pass
        s.close()
        s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
        s.run_until_idle()
        s.close()
    (span,) = _spans(exporter, task)
    assert span.attributes is not None
    assert (span.attributes["mode"], span.attributes["resumed"]) == ("abort", True)


# ─── waits and sleeps: no status, a duration each ────────────────────────────────
# pi-durable (`#phase`): a span that ends at a wait or a sleep has outcome `waiting` /
# `sleeping`, no status, and its duration recorded under that outcome.


def test_pi_durable_waiting_and_sleeping_spans_have_no_status_and_a_duration(
    scheduler: Scheduler,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    """Seed 004, `TaskScheduler.#phase`: outcome `waiting` / `sleeping`, no status set."""
    scheduler.configure_telemetry(tracer_provider, meter_provider)
    waiter, sleeper = scheduler.submit("job"), scheduler.submit("job")
    other = scheduler.submit("leaf")
    scheduler.reserve(waiter)
    scheduler.reserve(sleeper)
    clock.advance(2)
    scheduler.wait(waiter, [other], phase="end")
    scheduler.sleep(sleeper, until=clock.now + 10, phase="end")
    for task, outcome in ((waiter, "waiting"), (sleeper, "sleeping")):
        (span,) = _spans(exporter, task)
        assert span.attributes is not None and span.attributes["outcome"] == outcome
        assert span.status.status_code == StatusCode.UNSET
        point = metric_points(reader, DURATION)[
            (("outcome", outcome), ("phase", "start"), ("task.kind", "job"))
        ]
        assert (point.count, point.sum) == (1, 2)
