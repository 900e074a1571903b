"""pi-durable's behaviour where tasktrail once differed (issue 16; seed 004): each test
names the behaviour and fails when it breaks. The rules they hold are written down in
docs/seed-fidelity.md."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import finishing
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition, Worker
from tasktrail.domain.tasks.events import AbortMarked
from tasktrail.domain.telemetry import live as telemetry
from tasktrail.projections.trace import rebuild, to_otlp_json


def abandoned(scheduler: Scheduler) -> list[str]:
    return sorted(
        r.event.task_id
        for r in scheduler.store.read()
        if isinstance(r.event, AbortMarked) and r.event.reason == "restart"
    )


# ─── defect 4: abandon_on_restart marks every live flagged task at every open ──────


def test_pi_durable_abandon_on_restart_marks_every_live_flagged_task_at_open(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w")
    pending = s.submit("job", id="pending", abandon_on_restart=True)
    sleeping = s.submit("job", id="sleeping", abandon_on_restart=True)
    s.reserve(sleeping)
    s.sleep(sleeping, until=clock.now + 60_000)
    waiting = s.submit("job", id="waiting", abandon_on_restart=True)
    s.reserve(waiting)
    s.wait(waiting, on=[pending])
    ended = s.submit("leaf", id="ended", abandon_on_restart=True)
    s.reserve(ended)
    s.finish(ended, "completed")
    plain = s.submit("job", id="plain")
    s.close()  # a clean close: no task was running, nothing was recovered
    s_reopened = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    assert abandoned(s_reopened) == ["pending", "sleeping", "waiting"]
    for task_id in (pending, sleeping, waiting):
        task = s_reopened.task(task_id)
        assert task.abort_requested and task.abort_reason == "restart"
    assert not s_reopened.task(plain).abort_requested
    assert s_reopened.task(ended).status == "terminal"
    head = s_reopened.store.head()
    s_reopened.close()
    # Marked once: a later open finds them marked and appends nothing for them.
    third = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    assert third.store.head() == head
    third.close()


def test_pi_durable_abandon_on_restart_leaves_a_live_workers_running_task(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    a = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="a")
    held = a.submit("job", id="held", abandon_on_restart=True)
    a.reserve(held)
    waiting = a.submit("job", id="queued", abandon_on_restart=True)
    b = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="b")
    assert not b.task(held).abort_requested  # worker a is alive and running it
    assert b.task(waiting).abort_reason == "restart"
    b.close()
    a.close()


# ─── defect 5: a checkpoint span event marks a change of phase only ────────────────


def _traced(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> tuple[Scheduler, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    s.configure_telemetry(provider)
    return s, exporter


def _span_shapes(spans: Any) -> list[tuple[Any, ...]]:
    return [
        (
            span.attributes["phase"],
            span.attributes["outcome"],
            [(e.name, dict(e.attributes)) for e in span.events],
            span.context.span_id,
            span.start_time,
            span.end_time,
        )
        for span in spans
        if span.name == "tasktrail.phase"
    ]


def test_pi_durable_same_checkpoint_again_adds_no_span_event_and_no_span(
    sqlite_url: str, clock: ManualClock
) -> None:
    def pay(inv: Any) -> str:
        inv.checkpoint("pay")  # the intent, committed again before the effect
        clock.advance(7)
        return "receipt"

    registry = Registry([TaskDefinition("order", 1, {"pay": pay, "receipt": finishing()})])
    s, exporter = _traced(sqlite_url, clock, registry)
    task = s.submit("order")
    s.run_until_idle()
    live = _span_shapes(exporter.get_finished_spans())
    assert [(phase, outcome, events) for phase, outcome, events, *_ in live] == [
        ("pay", "next=receipt", [("tasktrail.checkpoint", {"phase": "receipt"})]),
        ("receipt", "done", []),
    ]
    # History folds the same way.
    assert _span_shapes(rebuild(s.store, task)) == live
    s.close()


# ─── defect 6: the active-tasks counter counts what a process loaded ───────────────


def _active(reader: InMemoryMetricReader) -> dict[str, int]:
    data = reader.get_metrics_data()
    out: dict[str, int] = {}
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "tasktrail.tasks.active":
                    for point in metric.data.data_points:
                        out[str(point.attributes["task.kind"])] = point.value
    return out


def test_pi_durable_active_tasks_counts_loaded_tasks_and_takes_them_back_at_close(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    first_process = InMemoryMetricReader()
    with telemetry.default_providers(meter_provider=MeterProvider([first_process])):
        s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
        s.submit("job", id="a")
        s.submit("job", id="b")
        s.submit("leaf", id="c")
        assert _active(first_process) == {"job": 2, "leaf": 1}
        s.close()
        assert _active(first_process) == {"job": 0, "leaf": 0}  # what is live at close
    second_process = InMemoryMetricReader()
    with telemetry.default_providers(meter_provider=MeterProvider([second_process])):
        s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
        assert _active(second_process) == {"job": 2, "leaf": 1}  # the tasks it loaded
        s.run_until_idle()  # the loaded tasks end here
        assert _active(second_process) == {"job": 0, "leaf": 0}  # never below zero
        s.submit("leaf", id="d")
        s.close()
        assert _active(second_process) == {"job": 0, "leaf": 0}


def test_pi_durable_active_tasks_move_with_the_configured_meter(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    s.submit("job", id="a")
    s.close()
    reopened = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    reader = InMemoryMetricReader()
    reopened.configure_telemetry(meter_provider=MeterProvider([reader]))
    assert _active(reader) == {"job": 1}
    reopened.run_until_idle()
    assert _active(reader) == {"job": 0}
    reopened.close()


# ─── a failed migration is tried again once a new definition is registered ────────


def _failing_migrate(task: Any) -> str:
    raise ValueError("cannot read the v1 memos")


def test_pi_durable_failed_migration_is_retried_under_a_newly_registered_definition(
    sqlite_url: str, clock: ManualClock
) -> None:
    registry = Registry([TaskDefinition("job", 1, {"start": finishing()})])
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    old = s.submit("job")
    registry.register(TaskDefinition("job", 2, {"start": finishing()}, migrate=_failing_migrate))
    s.run_pass()
    assert s.blocked_reason(old) == "migration_failed"
    assert s.failed_migrations == {old}
    assert s.run_pass().reserved == []  # the same definition is not tried again
    # No retry(): registering a new definition is enough.
    registry.register(
        TaskDefinition("job", 2, {"start": finishing(), "v2": finishing()}, migrate=lambda t: "v2")
    )
    assert s.blocked_reason(old) is None and s.failed_migrations == frozenset()
    assert s.run_pass().reserved == [old]
    task = s.task(old)
    assert (task.version, task.status, task.outcome.status) == (2, "terminal", "completed")  # type: ignore[union-attr]
    s.close()


def test_pi_durable_migration_failed_is_reported_once_per_definition(
    sqlite_url: str, clock: ManualClock
) -> None:
    registry = Registry([TaskDefinition("job", 1, {"start": finishing()})])
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    old = s.submit("job")
    reports: list[tuple[str, str]] = []
    worker = Worker(s, on_migration_failed=lambda task_id, why: reports.append((task_id, why)))
    registry.register(TaskDefinition("job", 2, {"start": finishing()}, migrate=_failing_migrate))
    worker.tick()
    worker.tick()
    assert reports == [(old, "migration_failed")]
    registry.register(TaskDefinition("job", 3, {"start": finishing()}, migrate=_failing_migrate))
    worker.tick()  # the new definition's migration fails too: that is news
    assert reports == [(old, "migration_failed")] * 2
    s.close()


def test_a_failed_migration_is_forgotten_once_its_task_ended(
    sqlite_url: str, clock: ManualClock
) -> None:
    """A Worker runs for months: the scheduler and the Worker held each task whose
    migration failed for good, ended or not (round nine); now only the live ones."""
    registry = Registry([TaskDefinition("job", 1, {"start": finishing()})])
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    old = [s.submit("job") for _ in range(3)]
    reports: list[str] = []
    worker = Worker(s, on_migration_failed=lambda task_id, why: reports.append(task_id))
    registry.register(TaskDefinition("job", 2, {"start": finishing()}, migrate=_failing_migrate))
    worker.tick()
    assert sorted(reports) == sorted(old) and s.failed_migrations == set(old)
    s.abort(old[0])  # no definition takes it: it ends orphaned (rule 13)
    assert s.task(old[0]).status == "terminal"
    worker.tick()
    assert set(s._failed_migrations) == set(worker._reported_migrations) == set(old[1:])
    # Without a Worker: the next failed migration drops those of the tasks that ended.
    s.abort(old[1])
    late = s.submit("job", version=1)
    s.run_pass()
    assert set(s._failed_migrations) == {old[2], late}
    assert s.blocked_reason(old[2]) == "migration_failed" and reports.count(old[2]) == 1
    s.close()


# ─── reports to the host: parked, migration failed, outdated definition ────────────


def test_pi_durable_host_hears_of_a_task_parked_at_the_restart_limit(
    sqlite_url: str, clock: ManualClock, registry: Registry
) -> None:
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry, worker="w", restart_limit=1)
    task = s.submit("job")
    s.reserve(task)
    s.store.close()  # a crash mid-phase
    reopened = Scheduler.open(
        sqlite_url, clock=clock, registry=registry, worker="w", restart_limit=1
    )
    parked: list[tuple[str, str]] = []
    worker = Worker(reopened, on_parked=lambda task_id, why: parked.append((task_id, why)))
    worker.tick()
    worker.tick()
    assert parked == [(task, "restart_limit")]  # once
    reopened.close()


@pytest.mark.parametrize("change", ["replaced_definition", "missing_definition"])
def test_pi_durable_host_hears_of_a_task_running_under_an_outdated_definition(
    sqlite_url: str, clock: ManualClock, change: str
) -> None:
    registry = Registry()
    ran: list[str] = []

    def plan(inv: Any) -> str:
        ran.append("plan v1")
        if change == "replaced_definition":
            registry.register(TaskDefinition("job", 2, {"plan": finishing(), "write": finishing()}))
        else:
            registry.unregister("job")
        return "write"

    def write(inv: Any) -> None:
        ran.append("write v1")
        inv.finish("completed")

    registry.register(TaskDefinition("job", 1, {"plan": plan, "write": write}))
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    task = s.submit("job")
    heard: list[tuple[str, str]] = []
    Worker(s, on_outdated=lambda task_id, why: heard.append((task_id, why))).tick()
    # The invocation keeps the definition it started with, and the host hears of it.
    assert ran == ["plan v1", "write v1"] and s.task(task).status == "terminal"
    assert heard == [(task, change)]
    s.close()


# ─── span links from a task's later phase spans to its first ──────────────────────


def _links(span: Any) -> list[tuple[int, int]]:
    return [(link.context.trace_id, link.context.span_id) for link in span.links]


def test_pi_durable_later_phase_spans_link_to_the_first(
    sqlite_url: str, clock: ManualClock
) -> None:
    def plan(inv: Any) -> None:
        inv.sleep(inv.now() + 1_000, then="write")

    registry = Registry(
        [
            TaskDefinition(
                "doc", 1, {"plan": plan, "write": lambda inv: "publish", "publish": finishing()}
            )
        ]
    )
    s, exporter = _traced(sqlite_url, clock, registry)
    task = s.submit("doc")
    s.run_until_idle()
    s.close()  # asleep; another process takes it up
    clock.advance(1_000)
    s, later_exporter = _traced(sqlite_url, clock, registry)
    s.run_until_idle()  # a new invocation, in a new process: reserved after the sleep
    spans = [
        span
        for span in (*exporter.get_finished_spans(), *later_exporter.get_finished_spans())
        if span.name == "tasktrail.phase"
    ]
    assert [span.attributes["phase"] for span in spans] == ["plan", "write", "publish"]
    first = spans[0].context
    assert list(spans[0].links) == []
    for later in spans[1:]:
        (link,) = later.links
        assert (link.context.trace_id, link.context.span_id) == (first.trace_id, first.span_id)
    # History links the same way, and the OTLP JSON carries the links.
    rebuilt = [span for span in rebuild(s.store, task) if span.name == "tasktrail.phase"]
    assert [_links(span) for span in rebuilt] == [_links(span) for span in spans]
    rows = to_otlp_json(rebuilt)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [row.get("links") for row in rows][1] == [
        {"traceId": f"{first.trace_id:032x}", "spanId": f"{first.span_id:016x}"}
    ]
    s.close()
