"""Telemetry (SPEC.md section 6) from history: the spans rebuilt from the log equal the live
ones and are deterministic without telemetry; one task's trace, its OTLP JSON, a
configured exporter, and `tasktrail trace`. The live spans and metrics are in
test_telemetry.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tasktrail.domain.demo.workload import run_demo
from tasktrail.domain.tasks.events import TaskSubmitted
from tasktrail.domain.telemetry import live as telemetry
from tasktrail.projections.trace import phase_spans, rebuild, to_otlp_json
from tasktrail.replay import replay
from tasktrail.replay.cli import main


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
    # (With no tracer at all nothing is stored: test_without_a_provider_* in test_telemetry.py.)
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
