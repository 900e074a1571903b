"""Emitting a phase span through an OpenTelemetry tracer, with the ids and the
scheduler-clock times the fold derived (:func:`emit`); :func:`planned_ids` is the SDK
id generator that gives a span its planned ids.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode

from .spans import SPAN_NAME, PhaseSpan, to_ns


class _PlannedIds:
    """Hands the SDK the ids a span was planned to have (thread by thread), else
    falls back to the generator it replaced."""

    def __init__(self, fallback: Any) -> None:
        self.fallback = fallback
        self.planned = threading.local()

    def generate_span_id(self) -> int:
        span_id: int | None = getattr(self.planned, "span_id", None)
        return span_id if span_id is not None else int(self.fallback.generate_span_id())

    def generate_trace_id(self) -> int:
        trace_id: int | None = getattr(self.planned, "trace_id", None)
        return trace_id if trace_id is not None else int(self.fallback.generate_trace_id())

    def is_trace_id_random(self) -> bool:
        if getattr(self.planned, "trace_id", None) is not None:
            return True  # a SHA-256 prefix: its low 56 bits are uniform
        return bool(getattr(self.fallback, "is_trace_id_random", lambda: False)())

    @contextlib.contextmanager
    def plan(self, trace_id: int | None, span_id: int) -> Iterator[None]:
        self.planned.trace_id, self.planned.span_id = trace_id, span_id
        try:
            yield
        finally:
            self.planned.trace_id = self.planned.span_id = None


def planned_ids(fallback: Any = None) -> Any:
    """An SDK ``IdGenerator`` that gives spans emitted here their derived ids."""
    from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

    class PlannedIds(_PlannedIds, IdGenerator):
        pass

    return PlannedIds(fallback if fallback is not None else RandomIdGenerator())


def _ids_of(tracer: Any) -> _PlannedIds | None:
    generator = getattr(tracer, "id_generator", None)
    if generator is None:
        return None  # not the SDK's tracer: its own ids, documented as differing
    if not isinstance(generator, _PlannedIds):
        generator = planned_ids(generator)
        tracer.id_generator = generator
    return generator


def emit(tracer: trace.Tracer, span: PhaseSpan) -> SpanContext:
    """Record ``span`` through ``tracer`` with its ids and scheduler-clock times; returns
    the context it was recorded with."""
    parent = otel_context.Context()  # never the caller's current span
    if span.parent is not None:
        parent = trace.set_span_in_context(NonRecordingSpan(span.parent), parent)
    ids = _ids_of(tracer)
    planned = (
        ids.plan(None if span.parent is not None else span.trace_id, span.span_id)
        if ids is not None
        else contextlib.nullcontext()
    )
    with planned:
        recorded = tracer.start_span(
            SPAN_NAME,
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=span.attributes,
            links=[trace.Link(context) for context in span.links],
            start_time=span.start_ns,
        )
    for point in span.events:
        recorded.add_event(point.name, point.attributes, timestamp=to_ns(point.at))
    if span.error is not None:
        recorded.set_status(Status(StatusCode.ERROR, span.error))
    elif span.ok:
        recorded.set_status(Status(StatusCode.OK))
    recorded.end(end_time=span.end_ns)
    return recorded.get_span_context()
