"""Live telemetry (SPEC.md section 6): phase spans and metrics through OpenTelemetry.

The spans are those :mod:`.phase_spans` defines, folded from the events the
scheduler commits and recorded with their derived ids and scheduler-clock
times, so the spans :mod:`tasktrail.projections.trace` rebuilds from the log
equal them. Metrics: an up-down counter of active tasks (:mod:`.active`) and a
histogram of phase durations.

Live telemetry costs nothing observable while no provider is configured: the
hooks check for one and return. Configure a scheduler with
:func:`configure_telemetry` (or :meth:`Scheduler.configure_telemetry`); one
never configured uses the process-wide default, which is OpenTelemetry's
global providers unless :func:`set_default_providers` names others. A
telemetry failure is logged and never changes what the scheduler decides.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..tasks.events import (
    CheckpointCommitted,
    TaskEnded,
    TaskEvent,
    TaskRecovered,
    TaskReserved,
    TaskSubmitted,
)
from ..tasks.evolve import evolve
from ..tasks.state import TaskState
from ..world import World
from .active import ActiveTasks
from .emit import emit as emit  # re-exported: the trace rebuilt from history uses them
from .emit import planned_ids as planned_ids
from .providers import DEFAULTS, NO_METER, NO_TRACER, no_global
from .providers import default_providers as default_providers
from .providers import set_default_providers as set_default_providers
from .spans import PhaseFold, PhaseSpan

SCOPE = "tasktrail"
ACTIVE_TASKS = "tasktrail.tasks.active"
PHASE_DURATION = "tasktrail.phase.duration"

_log = logging.getLogger("tasktrail.telemetry")
_ATTRIBUTE = "_tasktrail_telemetry"
_PROPAGATOR = TraceContextTextMapPropagator()


class Observed(Protocol):
    """What telemetry reads of a scheduler: its world (the tasks before an append is
    folded in) and the tasks it resumed since opening; it also keeps its
    :class:`Telemetry` as an attribute of the scheduler."""

    @property
    def world(self) -> World: ...

    @property
    def _resumed(self) -> set[str]: ...


class Telemetry:
    """One scheduler's telemetry: its providers (``None``: the defaults), the tracer
    and instruments taken from them, and the fold of the events it commits."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.fold = PhaseFold()
        self._tracer: tuple[trace.TracerProvider, trace.Tracer] | None = None
        self._instruments: tuple[metrics.MeterProvider, Any, Any] | None = None
        self._failed = False
        self.active = ActiveTasks()

    def tracer(self) -> trace.Tracer | None:
        """The tracer, or ``None`` while no tracer provider is configured."""
        provider = self.tracer_provider or DEFAULTS.tracer_provider
        if provider is None:
            if no_global(0):
                return None
            provider = trace.get_tracer_provider()
        if isinstance(provider, NO_TRACER):
            return None
        if self._tracer is None or self._tracer[0] is not provider:
            self._tracer = (provider, provider.get_tracer(SCOPE))
        return self._tracer[1]

    def instruments(self) -> tuple[Any, Any] | None:
        """The active-tasks counter and the phase-duration histogram, or ``None``."""
        provider = self.meter_provider or DEFAULTS.meter_provider
        if provider is None:
            if no_global(1):
                return None
            provider = metrics.get_meter_provider()
        if isinstance(provider, NO_METER):
            return None
        if self._instruments is None or self._instruments[0] is not provider:
            meter = provider.get_meter(SCOPE)
            active = meter.create_up_down_counter(
                ACTIVE_TASKS,
                unit="{task}",
                description="Live tasks this process loaded or submitted, not yet terminal",
            )
            duration = meter.create_histogram(
                PHASE_DURATION, unit="ms", description="Phase span durations (scheduler clock)"
            )
            self._instruments = (provider, active, duration)
        return self._instruments[1], self._instruments[2]

    def opened(self, scheduler: Observed) -> None:
        """The scheduler loaded its store: count the live tasks it holds."""
        instruments = self.instruments()
        if instruments is not None:
            self.active.count_on(scheduler.world, instruments[0])

    def closed(self) -> None:
        """The scheduler closed (or this telemetry was replaced): take back its counts."""
        self.active.release()

    def committed(
        self,
        scheduler: Observed,
        events: Sequence[TaskEvent],
        versions: Sequence[int],
        before: Mapping[str, TaskState | None] | None = None,
    ) -> None:
        """Fold events just appended, before the scheduler's world applies them; or
        after, given ``before``: the state of each task they write before the first."""
        tracer = self.tracer()
        instruments = self.instruments()
        if tracer is None and instruments is None:
            self.fold.open.clear()
            return
        if instruments is not None:
            self.active.count_on(scheduler.world, instruments[0])
        world = scheduler.world
        states: dict[str, TaskState] = {}

        def lookup(task_id: str) -> TaskState | None:
            if task_id in states:
                return states[task_id]
            return before[task_id] if before and task_id in before else world.get(task_id)

        for event, version in zip(events, versions, strict=True):
            if not type(event).task_stream:
                continue
            after = evolve(lookup(event.task_id), event)
            states[event.task_id] = after
            spans = self.fold.apply(
                event,
                after,
                version,
                resumed=event.task_id in scheduler._resumed,
                lookup=lookup,
            )
            if instruments is not None:
                if isinstance(event, TaskSubmitted):
                    self.active.submitted(event.task_id, after.kind)
                elif isinstance(event, TaskEnded):
                    self.active.ended(event.task_id)
            self._finished(spans, tracer, instruments)

    def follows(self, task_id: str) -> bool:
        """Whether another writer's event of the task matters here: a span of it is open
        or its trace kept (:meth:`PhaseFold.follows`), or it is counted active here."""
        return self.fold.follows(task_id) or task_id in self.active.counted

    def folded(
        self, scheduler: Observed, folded: Sequence[tuple[TaskEvent, int, TaskState]]
    ) -> None:
        """Take in events other writers appended (each with its version and the task's
        state after it; the world holds them already) of tasks this telemetry
        :meth:`follows`. A recovery of a task whose span is open here means another
        worker took the task over: the span ends lease-lost (:meth:`PhaseFold.lost`),
        once, and is forgotten; this process owns the task no more and appends nothing
        for it. Another writer's end of a task is taken back from the count here."""
        tracer = self.tracer()
        instruments = self.instruments()
        if tracer is None and instruments is None:
            self.fold.open.clear()
            return
        for index, (event, version, after) in enumerate(folded):
            task_id = event.task_id
            if isinstance(event, TaskEnded):
                self.active.ended(task_id)
            if isinstance(event, TaskRecovered):
                spans = self.fold.lost(event, _taker(folded[index + 1 :], task_id))
            elif task_id in self.fold.open and not isinstance(
                event, TaskReserved | CheckpointCommitted
            ):
                # An abort mark or an end another writer appended ends the span as
                # history does. (A reservation or a checkpoint of another writer's comes
                # after a recovery, which ended the span already.)
                spans = self.fold.apply(
                    event, after, version, resumed=False, lookup=scheduler.world.get
                )
            else:
                if isinstance(event, TaskEnded):
                    self.fold.forget(task_id)
                continue
            self._finished(spans, tracer, instruments)

    def _finished(
        self, spans: Sequence[PhaseSpan], tracer: trace.Tracer | None, instruments: Any
    ) -> None:
        """Emit each finished span and record its duration in the span's context (as
        pi-durable records it with its span: an exemplar leads from the point to it)."""
        for span in spans:
            emitted = emit(tracer, span) if tracer is not None else None
            if instruments is not None:
                measured = otel_context.Context()  # never the caller's current span
                if emitted is not None:
                    measured = trace.set_span_in_context(NonRecordingSpan(emitted), measured)
                instruments[1].record(
                    span.duration_ms,
                    {"task.kind": span.kind, "phase": span.phase, "outcome": span.outcome},
                    context=measured,
                )

    def failed(self, what: str) -> None:
        """Log a telemetry failure: the first of this scheduler's as a warning."""
        if self._failed:
            _log.debug("tasktrail telemetry: %s failed", what, exc_info=True)
        else:
            _log.warning(
                "tasktrail telemetry: %s failed (later failures log at debug)", what, exc_info=True
            )
        self._failed = True


def _taker(later: Sequence[tuple[TaskEvent, int, TaskState]], task_id: str) -> str | None:
    """The worker that reserved the task in ``later`` events, if one did."""
    for event, _, _ in later:
        if isinstance(event, TaskReserved) and event.task_id == task_id:
            return event.worker
    return None


# ─── the scheduler's hooks ─────────────────────────────────────────────────


def configure_telemetry(
    scheduler: Observed,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> Telemetry:
    """Give a scheduler its providers (``None``: the process-wide defaults)."""
    previous = getattr(scheduler, _ATTRIBUTE, None)
    telemetry = Telemetry(tracer_provider, meter_provider)
    setattr(scheduler, _ATTRIBUTE, telemetry)
    if isinstance(previous, Telemetry):
        # Open spans move with the providers (each phase still ends once, in the new
        # ones); the counts too: taken back from the old, made on the new.
        telemetry.fold = previous.fold
        previous.closed()
        opened(scheduler)
    return telemetry


def telemetry_of(scheduler: Observed) -> Telemetry:
    """The scheduler's telemetry, made on first use with the default providers."""
    telemetry = getattr(scheduler, _ATTRIBUTE, None)
    if not isinstance(telemetry, Telemetry):
        telemetry = configure_telemetry(scheduler)
    return telemetry


def committed(
    scheduler: Observed,
    events: Sequence[TaskEvent],
    versions: Sequence[int],
    before: Mapping[str, TaskState | None] | None = None,
) -> None:
    """Hook: the scheduler appended ``events`` (see :meth:`Telemetry.committed`);
    never raises."""
    telemetry = None
    try:
        telemetry = telemetry_of(scheduler)
        telemetry.committed(scheduler, events, versions, before)
    except Exception:
        if telemetry is not None:
            telemetry.failed("recording committed events")


def follows(scheduler: Observed) -> Callable[[str], bool] | None:
    """Hook, for a refresh: which tasks' events of other writers telemetry takes in
    (:func:`folded`), or ``None`` when it follows none (costs nothing without telemetry)."""
    telemetry = getattr(scheduler, _ATTRIBUTE, None)
    if not isinstance(telemetry, Telemetry):
        return None
    if not (telemetry.fold.holding() or telemetry.active.counted):
        return None
    return telemetry.follows


def folded(scheduler: Observed, events: Sequence[tuple[TaskEvent, int, TaskState]]) -> None:
    """Hook: a refresh folded in events of other writers that :func:`follows` named;
    never raises."""
    telemetry = getattr(scheduler, _ATTRIBUTE, None)
    if not isinstance(telemetry, Telemetry):
        return
    try:
        telemetry.folded(scheduler, events)
    except Exception:
        telemetry.failed("taking in other writers' events")


def opened(scheduler: Observed) -> None:
    """Hook: the scheduler loaded its store; never raises."""
    telemetry = None
    try:
        telemetry = telemetry_of(scheduler)
        telemetry.opened(scheduler)
    except Exception:
        if telemetry is not None:
            telemetry.failed("counting the loaded tasks")


def closed(scheduler: Observed) -> None:
    """Hook: the scheduler is closing; never raises."""
    telemetry = getattr(scheduler, _ATTRIBUTE, None)
    if not isinstance(telemetry, Telemetry):
        return
    try:
        telemetry.closed()
    except Exception:
        telemetry.failed("taking back the active-task counts")


def current_carrier() -> dict[str, str] | None:
    """Hook: a W3C carrier of the current span, when one is current; never raises."""
    try:
        if not trace.get_current_span().get_span_context().is_valid:
            return None
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier)
        return carrier or None
    except Exception:
        _log.warning("tasktrail telemetry: reading the current span failed", exc_info=True)
        return None


class _Current(AbstractContextManager[None]):
    """Makes a phase span current while its handler runs (so spans the handler starts
    and tasks it submits join the task's trace)."""

    def __init__(self, span_context: SpanContext) -> None:
        self.span_context = span_context
        self.token: object | None = None

    def __enter__(self) -> None:
        with contextlib.suppress(Exception):
            span = NonRecordingSpan(self.span_context)
            self.token = otel_context.attach(trace.set_span_in_context(span))

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            with contextlib.suppress(Exception):
                otel_context.detach(self.token)  # type: ignore[arg-type]


_NOTHING: AbstractContextManager[None] = contextlib.nullcontext()


def phase_context(scheduler: Observed, task_id: str) -> AbstractContextManager[None]:
    """Hook: a context manager around a handler call; does nothing without a tracer."""
    try:
        telemetry = getattr(scheduler, _ATTRIBUTE, None)
        if telemetry is None:
            if DEFAULTS.tracer_provider is None and no_global(0):
                return _NOTHING
            if isinstance(DEFAULTS.tracer_provider or trace.get_tracer_provider(), NO_TRACER):
                return _NOTHING
            telemetry = telemetry_of(scheduler)
        if telemetry.tracer() is None:
            return _NOTHING
        span_context = telemetry.fold.current(task_id)
        return _Current(span_context) if span_context is not None else _NOTHING
    except Exception:
        return _NOTHING
