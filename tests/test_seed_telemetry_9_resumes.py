"""pi-durable's telemetry, ninth round (seed 004, `TaskScheduler`): spans and counts across
a break. The spans of a task resumed after a sleep or a wait, a task parked at open
(still counted active, its span after `retry` resumed), and a phase span open when the
providers change. Each test names the seed's code it follows; docs/seed-fidelity.md
("Round nine (telemetry and the ownership tree)") says what was fixed and what is only
reported."""

from __future__ import annotations

import pytest
from conftest import crash, reopen
from helpers.seed_telemetry_9 import CARRIER, _active, _attrs, _same_as_history, _spans
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tasktrail.domain import ManualClock, Registry, Scheduler

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
