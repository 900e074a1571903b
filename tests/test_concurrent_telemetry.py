"""Telemetry under concurrency (issue 27, item 6): one span per phase invocation while
many run at once, the phase's span current inside it (a sync phase's thread and an
async phase's task alike, so the spans a phase starts are its children), the active
task count exact, and the spans rebuilt from history equal to the live ones."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from helpers.probes import metric_points
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tasktrail.domain import Registry, Scheduler, TaskDefinition, Worker
from tasktrail.projections.trace import rebuild


def agent_registry(tracer_provider: TracerProvider) -> Registry:
    tracer = tracer_provider.get_tracer("host")

    async def think(inv: Any) -> str:
        await asyncio.sleep(0.02)  # other tasks' phases run meanwhile
        with tracer.start_as_current_span("model.call", attributes={"task": inv.task_id}):
            await asyncio.sleep(0.01)
        return "act"

    def act(inv: Any) -> None:
        time.sleep(0.02)
        with tracer.start_as_current_span("tool.call", attributes={"task": inv.task_id}):
            time.sleep(0.01)
        inv.finish("completed")

    return Registry([TaskDefinition("agent", 1, {"think": think, "act": act})])


def test_one_span_per_phase_and_the_phase_span_current_inside_it(
    tmp_path: Path,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
    meter_provider: MeterProvider,
    reader: InMemoryMetricReader,
) -> None:
    store = tmp_path / "trail.db"
    s = Scheduler.open(store, registry=agent_registry(tracer_provider), worker="w")
    s.configure_telemetry(tracer_provider, meter_provider)
    tasks = [s.submit("agent") for _ in range(8)]
    active = metric_points(reader, "tasktrail.tasks.active")
    assert {p.value for p in active.values()} == {8}
    worker = Worker(s, concurrency=4)
    while not all(s.task(t).status == "terminal" for t in tasks):
        worker.tick()
    assert worker.invocations.peak >= 3  # they did run at once
    spans = exporter.get_finished_spans()
    phases = [span for span in spans if span.name == "tasktrail.phase"]
    by_task: dict[str, list[Any]] = {}
    for span in phases:
        by_task.setdefault(str(span.attributes["task.id"]), []).append(span)
    assert sorted(by_task) == sorted(tasks)
    for task_id, mine in by_task.items():
        assert sorted(str(span.attributes["phase"]) for span in mine) == ["act", "think"], task_id
        assert len({span.context.span_id for span in mine}) == 2
    # A span a phase starts, in its thread or its event loop task, is the phase's child.
    for name, phase in (("model.call", "think"), ("tool.call", "act")):
        calls = [span for span in spans if span.name == name]
        assert len(calls) == 8
        for call in calls:
            owner = next(
                span
                for span in by_task[str(call.attributes["task"])]
                if span.attributes["phase"] == phase
            )
            assert call.parent is not None
            assert call.parent.span_id == owner.context.span_id, (name, call.attributes)
            assert call.context.trace_id == owner.context.trace_id
    active = metric_points(reader, "tasktrail.tasks.active")
    assert {p.value for p in active.values()} == {0}
    s.close()
    live = {(span.context.span_id, span.attributes["phase"]) for span in phases}
    rebuilt = {
        (span.context.span_id, span.attributes["phase"])
        for span in rebuild(store)
        if span.name == "tasktrail.phase"
    }
    assert live == rebuilt
