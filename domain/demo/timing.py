"""How long the demo's work takes, and the tracing that makes it an incident to open.

The demo runs on a :class:`~tasktrail.domain.ManualClock`. Left alone, that clock moves
only between passes, so every phase would take 0 ms and every span of ``tasktrail
trace`` would be a point. Here each phase handler first does its "work": it advances
the clock by a duration of its own, a base per kind and phase with a jitter derived
from the task id (deterministic: the same demo gives the same log). A pass runs its
phases one after another, as one worker process does, so the clock never goes back.

The demo is also a host that traces: when the process configured no OpenTelemetry
tracer, its schedulers get an SDK ``TracerProvider`` that exports nothing, so owned
work submitted inside a phase keeps that phase's W3C carrier and its spans nest under
it. The carriers hold tasktrail's derived ids, so they too are the same every run.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

from ..app.scheduler import Scheduler
from ..clock import ManualClock
from ..tasks.definitions import TaskDefinition
from ..tasks.invocation import Invocation
from ..telemetry.live import Telemetry

WORK_MS: dict[tuple[str, str], float] = {
    ("research", "plan"): 30,
    ("research", "synthesize"): 120,
    ("search", "fetch"): 8,
    ("search", "parse"): 15,
    ("review", "review"): 25,
    ("review", "verdict"): 40,
    ("check", "check"): 10,
    ("check", "recheck"): 5,
    ("batch", "start"): 12,
    ("batch", "commit"): 6,
    ("ingest", "ingest"): 9,
    ("ingest", "commit"): 6,
    ("fragile", "warm_up"): 3,
    ("fragile", "step"): 90,
    ("crew", "lead"): 20,
    ("crew", "wrap"): 10,
    ("nightly", "idle"): 2,
    ("nightly", "retire"): 2,
}
"""Mean work of each phase, in ms of the scheduler clock."""
ABORT_WORK_MS = 4.0
DEFAULT_WORK_MS = 5.0

Handler = Callable[[Invocation], Any]


def work_ms(kind: str, phase: str, task_id: str) -> int:
    """How long one phase of one task works: its mean, times 0.5 to 1.5 by the task."""
    base = ABORT_WORK_MS if phase == "" else WORK_MS.get((kind, phase), DEFAULT_WORK_MS)
    jitter = zlib.crc32(f"{task_id}/{phase}".encode()) % 1000 / 1000
    return max(1, round(base * (0.5 + jitter)))


def _working(clock: ManualClock, kind: str, phase: str, handler: Handler) -> Handler:
    def work_then_decide(inv: Invocation) -> Any:
        clock.advance(work_ms(kind, phase, inv.task_id))
        return handler(inv)

    work_then_decide.__name__ = getattr(handler, "__name__", phase or "abort")
    return work_then_decide


def timed(clock: ManualClock, definition: TaskDefinition) -> TaskDefinition:
    """The same definition, each phase (and the abort handler) working before it decides."""
    phases = {
        name: _working(clock, definition.kind, name, handler)
        for name, handler in definition.phases.items()
    }
    abort = definition.abort
    return TaskDefinition(
        definition.kind,
        definition.version,
        phases,
        abort=_working(clock, definition.kind, "", abort) if abort is not None else None,
        migrate=definition.migrate,
    )


def demo_tracer() -> Any:
    """An SDK tracer provider that exports nothing, when the process configured no tracer
    (``None`` when it did: then the demo's spans go where the host sends them)."""
    if Telemetry().tracer() is not None:
        return None
    from opentelemetry.sdk.trace import TracerProvider

    return TracerProvider(shutdown_on_exit=False)


def traced(scheduler: Scheduler, tracer_provider: Any) -> Scheduler:
    """``scheduler``, sending its spans to ``tracer_provider`` if one is given."""
    if tracer_provider is not None:
        scheduler.configure_telemetry(tracer_provider=tracer_provider)
    return scheduler
