"""pi-durable's telemetry, ninth round (seed 004, `TaskScheduler`): how a phase span ends.
Its outcome, status and duration on every way a run ends; an abort handler's span when a
close stops it or crashes cut it off; the span events a phase adds; and the instruments
those durations and counts are recorded in. Each test names the seed's code it follows;
docs/seed-fidelity.md ("Round nine (telemetry and the ownership tree)") says what was
fixed and what is only reported."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import crash, finishing, reopen
from helpers.probes import metric_points
from helpers.seed_telemetry_9 import ACTIVE, DURATION, _active, _attrs, _spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Histogram, InMemoryMetricReader, Sum
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tasktrail.domain import ManualClock, Registry, RuleViolation, Scheduler, TaskDefinition
from tasktrail.domain.telemetry import live as telemetry
from tasktrail.projections.trace import phase_spans

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
