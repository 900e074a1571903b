"""Helpers of pi-durable's ninth telemetry round (seed 004, `TaskScheduler`;
tests/test_seed_telemetry_9_*.py): the instrument names, a trace carrier, and the phase
spans, their attributes and the active counts as those tests read them."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from helpers.probes import metric_points
from tasktrail.domain import Scheduler
from tasktrail.projections.trace import rebuild

ACTIVE, DURATION = "tasktrail.tasks.active", "tasktrail.phase.duration"
CARRIER = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}


def _spans(exporter: InMemorySpanExporter, task_id: str | None = None) -> list[ReadableSpan]:
    return [
        s
        for s in exporter.get_finished_spans()
        if s.name == "tasktrail.phase" and s.attributes is not None
        if task_id is None or s.attributes["task.id"] == task_id
    ]


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    assert span.attributes is not None
    return dict(span.attributes)


def _active(reader: InMemoryMetricReader) -> dict[str, int]:
    return {dict(k)["task.kind"]: p.value for k, p in metric_points(reader, ACTIVE).items()}


def _shape(span: ReadableSpan) -> tuple[Any, ...]:
    """What a live span and the one history rebuilds must agree on."""
    assert span.context is not None
    return (
        span.context.span_id,
        span.parent.span_id if span.parent is not None else None,
        tuple(sorted(_attrs(span).items())),
        (span.start_time, span.end_time, span.status.status_code, span.status.description),
        tuple((e.name, e.timestamp, tuple(sorted(e.attributes.items()))) for e in span.events),
    )


def _same_as_history(s: Scheduler, live: list[ReadableSpan]) -> None:
    rebuilt = [span for span in rebuild(s.store) if span.name == "tasktrail.phase"]
    assert sorted(map(_shape, rebuilt)) == sorted(map(_shape, live))
