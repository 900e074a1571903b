"""pi-durable's telemetry and ownership tree, ninth round (seed 004, `TaskScheduler`): a
phase span on every way a run ends, span events, metrics after cascades over many
descendants and across parking, the spans of a task resumed after a sleep or a wait,
what a cascade records on each descendant, and `failFast` when two awaited tasks fail at
once. Each test names the seed's code it follows; docs/seed-fidelity.md ("Round nine
(telemetry and the ownership tree)") says what was fixed and what is only reported."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import crash, finishing, reopen
from helpers.probes import metric_points, of_type
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Histogram, InMemoryMetricReader, Sum
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tasktrail.domain import ManualClock, Registry, RuleViolation, Scheduler, TaskDefinition
from tasktrail.domain.tasks.events import TaskEnded
from tasktrail.domain.telemetry import live as telemetry
from tasktrail.projections.trace import phase_spans, rebuild

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


# ─── every way a run ends ────────────────────────────────────────────────────────
# pi-durable (`#phase`, `finally`): the outcome is the held or final outcome's (`done`,
# `aborted`, `faulted` for failed/faulted/orphaned), else `waiting` / `sleeping`, else
# `aborted` for an invocation that ended (an abort mark) or a close, else `next=<phase>`;
# an error status for failed/faulted, OK for `aborted`, none otherwise; and the duration
# is recorded under the task's kind, the phase the span began at, and that outcome.

ENDS: dict[str, tuple[str, StatusCode, str | None]] = {
    "completed": ("done", StatusCode.UNSET, None),
    "failed": ("faulted", StatusCode.ERROR, "task_failed: no luck"),
    "aborted": ("aborted", StatusCode.OK, None),
    "threw": ("faulted", StatusCode.ERROR, "task_faulted: ValueError: disk on fire"),
    "abort_mark": ("aborted", StatusCode.OK, None),
    "close": ("aborted", StatusCode.OK, None),
    "wait": ("waiting", StatusCode.UNSET, None),
    "sleep": ("sleeping", StatusCode.UNSET, None),
    "checkpoint": ("next=then", StatusCode.UNSET, None),
}


@pytest.mark.parametrize("end", list(ENDS))
def test_pi_durable_each_way_a_run_ends_gives_its_span_outcome_status_and_duration(
    end: str,
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    """Seed 004, `TaskScheduler.#phase`: outcome, status and duration for each end."""
    schedulers: list[Scheduler] = []

    def go(inv: Any) -> str | None:
        clock.advance(3)
        s = schedulers[0]
        if end in ("completed", "failed", "aborted"):
            inv.finish(end, "no luck" if end == "failed" else None)
        elif end == "threw":
            raise ValueError("disk on fire")
        elif end == "abort_mark":
            s.abort(inv.task_id)
            return "then"  # refused (rule 3): the run invocation has ended
        elif end == "close":
            s.close()
            return "then"  # refused (rule 2)
        elif end == "wait":
            inv.wait([s.submit("leaf")], then="then")
        elif end == "sleep":
            inv.sleep(inv.now() + 1_000, then="then")
        else:
            return "then"
        return None

    registry = Registry(
        [
            TaskDefinition(
                "job", 1, {"go": go, "then": lambda inv: None}, abort=finishing("aborted")
            ),
            TaskDefinition("leaf", 1, {"go": finishing()}),
        ]
    )
    s = Scheduler.open(sqlite_url, clock=clock, registry=registry)
    s.configure_telemetry(tracer_provider, meter_provider)
    schedulers.append(s)
    task = s.submit("job", phase="go")
    s.run_pass()
    outcome, status, description = ENDS[end]
    span = _spans(exporter, task)[0]
    expected: dict[str, Any] = {"task.id": task, "task.kind": "job", "phase": "go"}
    expected |= {"mode": "run", "resumed": False, "outcome": outcome}
    if status == StatusCode.ERROR:
        expected["error.type"] = description.split(":")[0] if description else None
    assert _attrs(span) == expected
    assert (span.status.status_code, span.status.description) == (status, description)
    assert (span.end_time - span.start_time) == 3_000_000  # scheduler ms, in ns
    point = metric_points(reader, DURATION)[
        (("outcome", outcome), ("phase", "go"), ("task.kind", "job"))
    ]
    assert (point.count, point.sum) == (1, 3)
    s.close()


# ─── an abort handler stopped by a close, or cut off by crashes ──────────────────
# pi-durable (`#phase` around `#runAbort`; `join`; `open`): a close ends an abort
# invocation's span `aborted` with an OK status and writes it back `pending` with no
# restart; the next open's abort span is `resumed`. Cut off by crashes, the spans are
# never ended live; at the limit `#reserve` faults the task before any span, and the
# count of the open that loaded it is taken back.


def test_pi_durable_an_abort_handler_stopped_by_a_close_ends_its_span_aborted_ok(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """Seed 004, `TaskScheduler.join` (a close is not a crash) and `#phase`."""
    registry = Registry([TaskDefinition("job", 1, {"go": finishing()}, abort=finishing("aborted"))])
    with telemetry.default_providers(tracer_provider):
        s = reopen(sqlite_url, clock, registry, limit=1)
        task = s.submit("job")
        s.abort(task)
        assert s.reserve(task) == "abort"  # its abort handler is on when the host closes
        clock.advance(2)
        s.close()
        s = reopen(sqlite_url, clock, registry, limit=1)
        assert (s.task(task).status, s.task(task).restarts) == ("pending", 0)
        s.run_until_idle()
        s.close()
    stopped, resumed = _spans(exporter, task)
    assert [(_attrs(x)["mode"], _attrs(x)["resumed"]) for x in (stopped, resumed)] == [
        ("abort", False),
        ("abort", True),
    ]
    assert [_attrs(x)["outcome"] for x in (stopped, resumed)] == ["aborted", "aborted"]
    assert stopped.status.status_code == resumed.status.status_code == StatusCode.OK
    assert stopped.end_time - stopped.start_time == 2_000_000


def test_pi_durable_an_abort_handler_cut_off_at_the_limit_is_faulted_without_a_span(
    sqlite_url: str,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
    meter_provider: MeterProvider,
) -> None:
    """Seed 004, `TaskScheduler.#reserve` (the cut-off check before `#createInvocation`)
    and `#track` (a loaded task taken back at its terminal record)."""
    registry = Registry([TaskDefinition("job", 1, {"go": finishing()}, abort=finishing("aborted"))])
    with telemetry.default_providers(tracer_provider):
        s = reopen(sqlite_url, clock, registry, limit=2)
        task = s.submit("job")
        s.abort(task)
        for _ in range(2):  # each abort invocation dies with its process
            assert s.reserve(task) == "abort"
            clock.advance(1)
            crash(s)
            s = reopen(sqlite_url, clock, registry, limit=2)
        s.configure_telemetry(tracer_provider, meter_provider)  # the last process's meter
        assert s.task(task).restarts == 2 and _active(reader) == {"job": 1}
        s.run_until_idle()
        outcome = s.task(task).outcome
        assert outcome is not None and (outcome.status, outcome.reason) == (
            "faulted",
            "restart_limit",
        )
        s.close()
    assert _spans(exporter, task) == []  # none ended live; the fault has none
    assert _active(reader) == {"job": 0}
    # History shows each cut-off abort span, ended where the next open found it.
    cut = [
        (x.attributes["mode"], x.attributes["resumed"], x.outcome) for x in phase_spans(sqlite_url)
    ]
    assert cut == [("abort", False, "interrupted"), ("abort", True, "interrupted")]


# ─── span events ─────────────────────────────────────────────────────────────────
# pi-durable (the runtime's `commit`): the checkpoint event is added only when the state
# committed is `running` at another phase than the current one, by a run or an abort
# handler alike; a memo (not a `commit`), a wait or a sleep into another phase, the same
# checkpoint again, a new attempt of the same phase and an outcome add none.


def test_pi_durable_only_a_running_change_of_phase_adds_a_span_event(
    scheduler: Scheduler,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """Seed 004, the phase runtime's `commit` (`pi.durable.checkpoint`, phase changed)."""
    scheduler.configure_telemetry(tracer_provider)
    s = scheduler
    task, other = s.submit("job", phase="a"), s.submit("leaf")
    assert s.reserve(task) == "run"
    s.memo(task, "seen", [1])
    s.checkpoint(task, "a")  # the same checkpoint again: nothing
    s.checkpoint(task, "a", 1)  # a new attempt: a span of its own, no event
    s.checkpoint(task, "b", 0)  # a new phase: the one event
    s.wait(task, [other], phase="c")
    s.reserve(other)
    s.finish(other)
    assert s.reserve(task) == "run"
    s.sleep(task, until=clock.now, phase="d")
    assert s.reserve(task) == "run"
    s.abort(task)
    with pytest.raises(RuleViolation):
        s.checkpoint(task, "e")  # the marked run invocation ends at its next decision
    assert s.reserve(task) == "abort"
    s.checkpoint(task, "cleanup")  # an abort handler's change of phase: an event too
    s.finish(task, "aborted")
    events = [
        (_attrs(x)["phase"], _attrs(x)["outcome"], [(e.name, dict(e.attributes)) for e in x.events])
        for x in _spans(exporter, task)
    ]
    checkpoint = "tasktrail.checkpoint"
    assert events == [
        ("a", "next=a", []),
        ("a", "next=b", [(checkpoint, {"phase": "b", "attempt": 0})]),
        ("b", "waiting", []),
        ("c", "sleeping", []),
        ("d", "aborted", []),
        ("d", "next=cleanup", [(checkpoint, {"phase": "cleanup"})]),
        ("cleanup", "aborted", []),
    ]
    assert _attrs(_spans(exporter, task)[2])["attempt"] == 0  # attempt 0 is an attempt


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


# ─── a task resumed after a sleep or a wait ──────────────────────────────────────
# pi-durable 1.4.0 (`#commitState`, `#step`'s rule 1, `#phase`): a sleep or a wait ends
# the invocation and its span (outcome `sleeping` / `waiting`); the task's next run is a
# new invocation with a span of its own, at the checkpoint it committed, under the same
# parent (`task.trace`), not `resumed` in the process that put it to sleep.


@pytest.mark.parametrize("how", ["sleep", "wait"])
def test_pi_durable_a_task_resumed_after_a_sleep_or_wait_has_a_new_span_in_its_trace(
    how: str,
    scheduler: Scheduler,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """Seed 004, `TaskScheduler.#phase` (one span per invocation, `task.trace` its parent)."""
    s = scheduler
    s.configure_telemetry(tracer_provider)
    task, other = s.submit("job", trace=CARRIER), s.submit("leaf")
    assert s.reserve(task) == "run"
    if how == "sleep":
        s.sleep(task, until=clock.now + 10, phase="end", attempt=2)
        clock.advance(10)
    else:
        s.wait(task, [other], phase="end", attempt=2)
    s.run_until_idle()
    first, resumed = _spans(exporter, task)
    assert _attrs(first)["outcome"] == ("sleeping" if how == "sleep" else "waiting")
    assert {k: _attrs(resumed)[k] for k in ("phase", "attempt", "mode", "resumed", "outcome")} == {
        "phase": "end",
        "attempt": 2,
        "mode": "run",
        "resumed": False,
        "outcome": "done",
    }
    assert first.context is not None and resumed.context is not None
    assert resumed.context.trace_id == first.context.trace_id
    assert resumed.parent is not None and first.parent is not None
    assert resumed.parent.span_id == first.parent.span_id == 0xB7AD6B7169203331
    assert [link.context.span_id for link in resumed.links] == [first.context.span_id]


# ─── parking and retry ───────────────────────────────────────────────────────────
# pi-durable (`open`: `#track` and `#resumed.add` for every loaded record; `#parked`;
# `retry`): a task parked at open is live, so it counts in `tasks.active` while parked,
# and no span is made for it; `retry()` lets the next pass run it, and that first span
# since the open is `resumed`; its terminal record takes it back.


def test_pi_durable_a_parked_task_stays_active_and_its_span_after_retry_is_resumed(
    sqlite_url: str,
    clock: ManualClock,
    registry: Registry,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    exporter: InMemorySpanExporter,
    reader: InMemoryMetricReader,
) -> None:
    """Seed 004, `TaskScheduler.open`, `#parked`, `retry` and `#phase` (`resumed`)."""
    s = reopen(sqlite_url, clock, registry, limit=1)
    task = s.submit("job")
    assert s.reserve(task) == "run"
    crash(s)
    s = reopen(sqlite_url, clock, registry, limit=1)
    s.configure_telemetry(tracer_provider, meter_provider)
    assert s.parked == [task] and _active(reader) == {"job": 1}
    s.run_until_idle()
    assert _spans(exporter, task) == [] and _active(reader) == {"job": 1}
    s.retry(task)
    s.run_until_idle()
    assert [(_attrs(x)["phase"], _attrs(x)["resumed"]) for x in _spans(exporter, task)] == [
        ("start", True),
        ("end", False),
    ]
    assert _active(reader) == {"job": 0}
    s.close()


# ─── the instruments ─────────────────────────────────────────────────────────────
# pi-durable (constructor, `#track`, `#phase`): an up-down counter of active tasks,
# attributed with the task's kind, and a histogram of phase durations in milliseconds
# (`performance.now()` differences), attributed with kind, phase and outcome only.
# (Names and keys are SPEC.md section 6's and tasktrail's: `tasktrail.*`, `task.kind`.)


def test_pi_durable_the_instruments_kinds_units_and_attributes(
    scheduler: Scheduler,
    tracer_provider: TracerProvider,
    meter_provider: MeterProvider,
    reader: InMemoryMetricReader,
) -> None:
    """Seed 004, `createTypedMetrics(...).upDownCounter` / `.histogram` and their records."""
    scheduler.configure_telemetry(tracer_provider, meter_provider)
    scheduler.submit("job")
    scheduler.run_until_idle()
    data = reader.get_metrics_data()
    assert data is not None
    metrics = {
        m.name: m
        for r in data.resource_metrics
        for scope in r.scope_metrics
        if scope.scope.name == "tasktrail"
        for m in scope.metrics
    }
    active, duration = metrics[ACTIVE], metrics[DURATION]
    assert isinstance(active.data, Sum) and not active.data.is_monotonic
    assert isinstance(duration.data, Histogram)
    assert (active.unit, duration.unit) == ("{task}", "ms")
    assert {tuple(sorted(p.attributes)) for p in active.data.data_points} == {("task.kind",)}
    assert {tuple(sorted(p.attributes)) for p in duration.data.data_points} == {
        ("outcome", "phase", "task.kind")
    }


# ─── a span open when the providers change ───────────────────────────────────────
# pi-durable (`#phase`): every span a phase starts is ended, in a `finally`. Its
# telemetry is fixed when the scheduler is made; tasktrail's can be configured again
# (round seven moved the counts to the new meter). A phase span open at that moment
# ends once, in the new providers, as history has it.


def test_a_phase_span_open_when_the_providers_change_ends_in_the_new_ones(
    scheduler: Scheduler,
    clock: ManualClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """Seed 004, `TaskScheduler.#phase` (its `finally` ends every span it started)."""
    old = InMemorySpanExporter()
    old_provider = TracerProvider()
    old_provider.add_span_processor(SimpleSpanProcessor(old))
    scheduler.configure_telemetry(old_provider)
    task = scheduler.submit("job")
    assert scheduler.reserve(task) == "run"
    clock.advance(4)
    scheduler.configure_telemetry(tracer_provider)  # the host swaps providers mid-phase
    scheduler.checkpoint(task, "end")
    scheduler.finish(task)
    assert old.get_finished_spans() == ()
    spans = _spans(exporter, task)
    assert [(_attrs(x)["phase"], _attrs(x)["outcome"]) for x in spans] == [
        ("start", "next=end"),
        ("end", "done"),
    ]
    assert spans[0].end_time - spans[0].start_time == 4_000_000
    _same_as_history(scheduler, spans)
