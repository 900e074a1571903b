"""pi-durable's telemetry and ownership tree, ninth round (seed 004, `TaskScheduler`): what
a cascade over many descendants records on each of them (an abort span from the leaves
up, the metrics after it), and `failFast` when two awaited tasks fail at once or a
failing waiter cancels its other owned work. Each test names the seed's code it follows;
docs/seed-fidelity.md ("Round nine (telemetry and the ownership tree)") says what was
fixed and what is only reported."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import finishing
from helpers.probes import metric_points, of_type
from helpers.seed_telemetry_9 import CARRIER, DURATION, _active, _attrs, _same_as_history, _spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tasktrail.domain import ManualClock, Registry, RuleViolation, Scheduler, TaskDefinition
from tasktrail.domain.tasks.events import TaskEnded

# ─── a cascade over many descendants ─────────────────────────────────────────────
# pi-durable (rule 6, `#reserve`, `#phase` around `#runAbort`, `#track`): every live
# descendant of an aborted owner gets a mark and runs its own abort handler, in a span of
# its own (`kind` abort, outcome `aborted`, OK), only once the live work below it has
# ended (`#waitingOn(record, true)`), so the tree unwinds from its leaves; each terminal
# record takes its task back from `tasks.active`.


def _tree_registry(clock: ManualClock) -> Registry:
    def grow(inv: Any) -> None:
        if inv.task_id.count(".") < 2:
            for n in range(3):
                inv.submit("tree", id=f"{inv.task_id}.{n}", phase="grow")
        inv.sleep(inv.now() + 10**9)

    def unwind(inv: Any) -> None:
        clock.advance(1)  # each abort handler takes a millisecond
        inv.finish("aborted")

    return Registry([TaskDefinition("tree", 1, {"grow": grow}, abort=unwind)])


def test_pi_durable_a_cascade_gives_each_descendant_an_abort_span_from_the_leaves_up(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    """Seed 004, rule 6's cascade, `#reserve` (an abort invocation waits for the live
    work below it), `#phase` and `#track`."""
    s = Scheduler.open(sqlite_url, clock=clock, registry=_tree_registry(clock))
    s.configure_telemetry(tracer_provider, meter_provider)
    root = s.submit("tree", id="r", phase="grow")
    s.run_until_idle()
    assert _active(reader) == {"tree": 13}
    s.abort(root)
    s.run_until_idle()
    aborts = {_attrs(x)["task.id"]: x for x in _spans(exporter) if _attrs(x)["mode"] == "abort"}
    assert len(aborts) == 13 and s.task(root).status == "terminal"
    for task_id, span in aborts.items():
        assert (_attrs(span)["outcome"], span.status.status_code) == ("aborted", StatusCode.OK)
        for n in range(3) if task_id.count(".") < 2 else ():
            below = aborts[f"{task_id}.{n}"]
            assert below.end_time is not None and span.start_time is not None
            assert below.end_time <= span.start_time, (task_id, n)
    assert _active(reader) == {"tree": 0}
    points = metric_points(reader, DURATION)
    point = points[(("outcome", "aborted"), ("phase", "grow"), ("task.kind", "tree"))]
    assert (point.count, point.sum) == (13, 13)
    _same_as_history(s, _spans(exporter))
    s.close()


def test_pi_durable_a_cascade_mark_ends_every_running_descendants_span_at_the_mark(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    """Seed 004, `TaskScheduler.#phase`: an ended invocation's span is `aborted`, OK;
    the mark reaches every live descendant (rule 6), each then runs its abort handler."""
    registry = Registry([TaskDefinition("job", 1, {"go": finishing()}, abort=finishing("aborted"))])
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    s.configure_telemetry(tracer_provider, meter_provider)
    owner = s.submit("job")
    child = s.submit("job", owner=owner)
    grandchild = s.submit("job", owner=child)
    family = (owner, child, grandchild)
    for task in family:
        assert s.reserve(task) == "run"  # all three mid-phase
    marked_at = clock.advance(5)
    s.abort(owner)
    runs = [_spans(exporter, task) for task in family]
    assert [[(_attrs(x)["mode"], _attrs(x)["outcome"]) for x in r] for r in runs] == [
        [("run", "aborted")]
    ] * 3
    assert all(r[0].status.status_code == StatusCode.OK for r in runs)
    assert {r[0].end_time for r in runs} == {marked_at * 1_000_000}
    point = metric_points(reader, DURATION)[
        (("outcome", "aborted"), ("phase", "go"), ("task.kind", "job"))
    ]
    assert (point.count, point.sum) == (3, 15)
    for task in family:  # each run invocation ends at its next decision (rule 3)
        with pytest.raises(RuleViolation):
            s.checkpoint(task, "go", 1)
    s.run_until_idle()
    assert [[_attrs(x)["mode"] for x in _spans(exporter, task)] for task in family] == [
        ["run", "abort"]
    ] * 3
    assert _active(reader) == {"job": 0}
    _same_as_history(s, _spans(exporter))
    s.close()


# ─── failFast: two failures at one instant ───────────────────────────────────────
# pi-durable (`#anyFailed`, `#reconcile`): a `failFast` waiter wakes when any awaited
# task holds or ended with another outcome than `completed`; nothing records which one
# woke it. Two failing at one instant wake it once: one new invocation, whose handler
# reads both outcomes, in whatever order the wait named them.


@pytest.mark.parametrize("order", ["ab", "ba"])
def test_pi_durable_two_fail_fast_failures_at_one_instant_wake_the_waiter_once(
    order: str,
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """Seed 004, `TaskScheduler.#anyFailed`: a yes or no, not a winner."""
    seen: list[list[str | None]] = []

    def plan(inv: Any) -> None:
        kids = {n: inv.submit("kid", id=f"{inv.task_id}.{n}") for n in "ab"}
        inv.wait([kids[n] for n in order], "failFast", then="judge")

    def judge(inv: Any) -> None:
        kids = [inv.scheduler.task(f"{inv.task_id}.{n}") for n in "ab"]
        seen.append([k.outcome.status if k.outcome else None for k in kids])
        inv.finish("failed", "a check failed")

    registry = Registry(
        [
            TaskDefinition("waiter", 1, {"plan": plan, "judge": judge}),
            TaskDefinition("kid", 1, {"go": lambda inv: inv.finish("failed", inv.task_id)}),
        ]
    )
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    s.configure_telemetry(tracer_provider)
    waiter = s.submit("waiter", id="w", phase="plan", trace=CARRIER)
    s.run_until_idle()
    assert seen == [["failed", "failed"]]
    events = [type(e).__name__ for e in s.history(waiter)]
    assert events == ["TaskSubmitted", "TaskReserved", "WaitStarted", "TaskReserved", "TaskEnded"]
    first, woken = _spans(exporter, waiter)
    assert [_attrs(x)["outcome"] for x in (first, woken)] == ["waiting", "faulted"]
    assert (_attrs(woken)["phase"], _attrs(woken)["resumed"]) == ("judge", False)
    assert first.context is not None and woken.context is not None
    assert woken.context.trace_id == first.context.trace_id == 0x0AF7651916CD43DD8448EB211C80319C
    assert woken.parent is not None and first.parent is not None
    assert woken.parent.span_id == first.parent.span_id == 0xB7AD6B7169203331
    assert [link.context.span_id for link in woken.links] == [first.context.span_id]
    s.close()


# ─── a failFast waiter that fails cancels its other owned work ───────────────────
# pi-durable (`#commitState` holds an outcome while owned work is live; a held outcome
# other than `completed` is cancellation intent, rule 6): the waiter woken by one
# failure that finishes `failed` holds it; the sibling still asleep gets a mark and
# runs its abort handler; then the waiter ends. Each span and count follows.


def test_pi_durable_a_fail_fast_waiter_that_fails_cancels_its_sleeping_sibling(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    """Seed 004, `#anyFailed`, `#commitState` (`completing`), rule 6 and `#phase`."""

    def plan(inv: Any) -> None:
        kids = [inv.submit("fails", id="w.a"), inv.submit("naps", id="w.b")]
        inv.wait(kids, "failFast", then="judge")

    registry = Registry(
        [
            TaskDefinition(
                "waiter", 1, {"plan": plan, "judge": lambda inv: inv.finish("failed", "no")}
            ),
            TaskDefinition("fails", 1, {"go": lambda inv: inv.finish("failed", "bad")}),
            TaskDefinition(
                "naps",
                1,
                {"go": lambda inv: inv.sleep(inv.now() + 10**9)},
                abort=finishing("aborted"),
            ),
        ]
    )
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    s.configure_telemetry(tracer_provider, meter_provider)
    waiter = s.submit("waiter", id="w", phase="plan")
    s.run_until_idle()
    outcomes = {t: s.task(t).outcome for t in (waiter, "w.a", "w.b")}
    assert {t: o.status if o else None for t, o in outcomes.items()} == {
        "w": "failed",
        "w.a": "failed",
        "w.b": "aborted",
    }
    ended = [e.task_id for e in of_type(s, TaskEnded)]
    assert ended == ["w.a", "w.b", "w"]  # the holder ends after its owned work
    shapes = {
        task: [(_attrs(x)["mode"], _attrs(x)["outcome"]) for x in _spans(exporter, task)]
        for task in (waiter, "w.a", "w.b")
    }
    assert shapes == {
        "w": [("run", "waiting"), ("run", "faulted")],  # `judge` holds `failed`
        "w.a": [("run", "faulted")],
        "w.b": [("run", "sleeping"), ("abort", "aborted")],
    }
    assert set(_active(reader).values()) == {0}
    s.close()
