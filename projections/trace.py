"""Traces from history: the phase spans of a log, rebuilt with their original times.

:func:`phase_spans` folds a log (a SQLite or PostgreSQL store, or a JSONL
export) through the same :class:`~tasktrail.domain.telemetry.live.PhaseFold` the
live scheduler runs, so each rebuilt span has the live span's name,
attributes, ids, parent and scheduler-clock start and end. History adds what no
live exporter could see: a phase a crash cut off ends, with outcome
``interrupted`` and an error status, where recovery found it.

:func:`rebuild` records those spans through the OpenTelemetry SDK (into
memory, and into a :class:`SpanExporter` if given) and :func:`to_otlp_json`
writes them in the OTLP/JSON shape a tracing UI or collector reads::

    tasktrail trace tasktrail-demo.db fragile-0001 --out fragile.json
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from tasktrail.domain import CorruptEvent, Store, UnknownTask, World
from tasktrail.domain.store.files import atomic_output
from tasktrail.domain.tasks.events import TaskRecovered, TaskReserved, TaskStopped
from tasktrail.domain.telemetry.live import SCOPE, emit, planned_ids
from tasktrail.domain.telemetry.spans import PhaseFold, PhaseSpan

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter

    from tasktrail.domain.store.store import Recorded

Source = str | os.PathLike[str] | Store
SERVICE_NAME = "tasktrail"
_SPAN_KIND = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}
_STATUS_CODE = {"UNSET": 0, "OK": 1, "ERROR": 2}


def fold_spans(
    records: Iterable[Recorded], reopened: Sequence[int] = ()
) -> tuple[list[PhaseSpan], World, PhaseFold]:
    """Fold records into phase spans; also returns the world and the fold they left.

    ``resumed`` is derived from the log: a task's first reservation after a
    recovery or a close (the events a store's reopening leaves) is resumed.
    ``reopened`` names the positions of those events outside ``records`` (when
    only one tree's streams are folded): each marks the tasks live then too.
    """
    world = World()
    fold = PhaseFold(interrupted_spans=True)
    marked: set[str] = set()
    spans: list[PhaseSpan] = []
    pending = list(reversed(reopened))
    for recorded in records:
        while pending and pending[-1] < recorded.position:
            pending.pop()
            marked.update(world.live)
        event = recorded.event
        if not type(event).task_stream:
            _apply(world, recorded)
            continue
        task_id = event.task_id
        after = _apply(world, recorded)
        spans.extend(
            fold.apply(
                event,
                after,
                recorded.originator_version,
                resumed=task_id in marked,
                lookup=world.get,
            )
        )
        if isinstance(event, TaskReserved):
            marked.discard(task_id)
        elif isinstance(event, TaskRecovered | TaskStopped):
            marked.update(world.live)  # the store is (re)opened after these
    return spans, world, fold


def _apply(world: World, recorded: Recorded) -> Any:
    try:
        return world.apply(recorded.event)
    except ValueError as error:
        raise CorruptEvent(recorded.position, str(error)) from None


def phase_spans(
    source: Source,
    task: str | None = None,
    *,
    archive: str | os.PathLike[str] | None = None,
) -> list[PhaseSpan]:
    """The phase spans of a log, in the order they ended; with ``task``, only those of
    the trace(s) that task's spans belong to (the task's whole tree, usually).
    ``archive``: the store's archive folder, its events read in place (``tasktrail
    trace --archive``; :mod:`tasktrail.replay.across_archive`)."""
    # replay imports projections: load late
    from tasktrail.replay.across_archive import across_archive

    with across_archive(archive, source):
        return _tree_spans(source, task) if task is not None else _log_spans(source)


def _log_spans(source: Source) -> list[PhaseSpan]:
    from tasktrail.replay.log import read_log  # see phase_spans

    records, _, opened = read_log(source)
    try:
        spans, _, _ = fold_spans(records)
    finally:
        if opened is not None:
            opened.close()
    return spans


def _tree_spans(source: Source, task: str) -> list[PhaseSpan]:
    """The spans of ``task``'s trace, read from its root's tree only (not the log):
    the tree's streams, and where the store was reopened (for ``resumed``)."""
    from tasktrail.replay.report.tree import open_streams, read_tree  # see phase_spans

    with open_streams(source) as streams:
        read = read_tree(streams, task, whole=True)
        reopened = streams.positions([TaskRecovered.topic, TaskStopped.topic])
    spans, world, fold = fold_spans(read.records, reopened)
    state = world.get(task)
    if state is None:
        raise UnknownTask(task)
    traces = {span.trace_id for span in spans if span.task_id == task}
    traces.add(fold.trace_of(state, world.get)[0])
    return [span for span in spans if span.trace_id in traces]


def rebuild(
    source: Source,
    task: str | None = None,
    *,
    exporter: SpanExporter | None = None,
    service_name: str = SERVICE_NAME,
    archive: str | os.PathLike[str] | None = None,
) -> list[ReadableSpan]:
    """Record a log's phase spans through the SDK and return them; ``exporter``
    (any ``SpanExporter``) is sent each span too, then flushed (not shut down);
    ``archive`` as :func:`phase_spans` takes it."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource({"service.name": service_name}),
        sampler=ALWAYS_ON,  # history keeps every span, sampled or not when it ran
        id_generator=planned_ids(),
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer(SCOPE)
    for span in phase_spans(source, task, archive=archive):
        emit(tracer, span)
    provider.force_flush()
    return list(memory.get_finished_spans())


# ─── OTLP/JSON ─────────────────────────────────────────────────────────────


def to_otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """Spans in the OTLP/JSON shape (``resourceSpans`` / ``scopeSpans`` / ``spans``):
    hex ids, times as strings of ns since the epoch, typed attribute values."""
    resources: dict[Any, tuple[Any, dict[Any, tuple[Any, list[dict[str, Any]]]]]] = {}
    for span in spans:
        resource_key = _freeze(span.resource.attributes)
        scopes = resources.setdefault(resource_key, (span.resource, {}))[1]
        scope = span.instrumentation_scope
        scope_key = (scope.name, scope.version) if scope is not None else ("", "")
        scopes.setdefault(scope_key, (scope, []))[1].append(_span(span))
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(resource.attributes)},
                "scopeSpans": [
                    {"scope": _scope(scope), "spans": rows} for scope, rows in scopes.values()
                ],
            }
            for resource, scopes in resources.values()
        ]
    }


def write_otlp_json(spans: Sequence[ReadableSpan], out: str | os.PathLike[str]) -> int:
    """Write spans as OTLP/JSON to a file; returns how many."""
    with atomic_output(out) as handle:  # whole or not at all
        handle.write(orjson.dumps(to_otlp_json(spans), option=orjson.OPT_INDENT_2) + b"\n")
    return len(spans)


def _span(span: ReadableSpan) -> dict[str, Any]:
    context = span.context
    assert context is not None
    row: dict[str, Any] = {
        "traceId": f"{context.trace_id:032x}",
        "spanId": f"{context.span_id:016x}",
        "parentSpanId": f"{span.parent.span_id:016x}" if span.parent is not None else "",
        "name": span.name,
        "kind": _SPAN_KIND.get(span.kind.name, 0),
        "startTimeUnixNano": str(span.start_time),
        "endTimeUnixNano": str(span.end_time),
        "attributes": _attributes(span.attributes),
        "events": [
            {
                "timeUnixNano": str(event.timestamp),
                "name": event.name,
                "attributes": _attributes(event.attributes),
            }
            for event in span.events
        ],
        "status": {"code": _STATUS_CODE[span.status.status_code.name]},
        "flags": int(context.trace_flags),
    }
    if span.links:
        row["links"] = [
            {"traceId": f"{link.context.trace_id:032x}", "spanId": f"{link.context.span_id:016x}"}
            for link in span.links
        ]
    trace_state = context.trace_state.to_header() if context.trace_state else ""
    if trace_state:
        row["traceState"] = trace_state
    if span.status.description:
        row["status"]["message"] = span.status.description
    return row


def _scope(scope: Any) -> dict[str, Any]:
    if scope is None:
        return {"name": ""}
    out: dict[str, Any] = {"name": scope.name}
    if scope.version:
        out["version"] = scope.version
    return out


def _attributes(attributes: Any) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in (attributes or {}).items()]


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [_value(item) for item in value]}}
    return {"stringValue": str(value)}


def _freeze(attributes: Any) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), repr(v)) for k, v in (attributes or {}).items()))
