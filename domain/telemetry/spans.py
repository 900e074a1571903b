"""What a phase span is (SPEC.md section 6), as a fold over task events.

A phase span (``tasktrail.phase``) is defined by the log, not by a handler
call: it covers one task's stay at one checkpoint within one invocation, from
the event that put it there (``TaskReserved``, or a ``CheckpointCommitted``)
to the event that moved it on (the next checkpoint, a wait, a sleep or a retry's
backoff, an outcome, an abort mark during a run, a close). :class:`PhaseFold` is that
definition. The live scheduler runs it on the events it commits
(:mod:`.telemetry`); :mod:`tasktrail.projections.trace` runs it over a stored
log. Both give the same spans — names, attributes, ids and scheduler-clock
times — because both are the same fold over the same events.

Ids are derived, not drawn: a span's id from its task and the version of the
event that opened it; a trace id from the stored W3C carrier, else the
owner's trace, else the task's id and submission time. Nothing here reads a
clock or touches OpenTelemetry's providers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.trace import SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..tasks.events import (
    AbortMarked,
    CheckpointCommitted,
    OutcomeHeld,
    TaskEnded,
    TaskEvent,
    TaskRecovered,
    TaskReserved,
    TaskStopped,
    WaitStarted,
)
from ..tasks.state import TaskState

SPAN_NAME = "tasktrail.phase"
CHECKPOINT_EVENT = "tasktrail.checkpoint"
ERROR_STATUSES = frozenset({"faulted", "failed", "orphaned"})
MAX_STATUS_MESSAGE = 500
"""How much of an outcome's message an error status keeps (pi-durable's cut)."""

AttributeValue = str | bool | int | float
Lookup = Callable[[str], TaskState | None]

_PROPAGATOR = TraceContextTextMapPropagator()
ROOT_FLAGS = trace.TraceFlags(
    trace.TraceFlags.SAMPLED | getattr(trace.TraceFlags, "RANDOM_TRACE_ID", 0)
)
"""The flags of a root phase span: sampled, its trace id random (a hash prefix)."""


@dataclass(frozen=True)
class SpanEvent:
    """A point in a span: a checkpoint committed, at its scheduler-clock time."""

    name: str
    at: float
    attributes: dict[str, AttributeValue]


@dataclass(frozen=True)
class PhaseSpan:
    """One finished ``tasktrail.phase`` span, as plain data (times in scheduler ms)."""

    task_id: str
    kind: str
    phase: str
    outcome: str
    trace_id: int
    span_id: int
    parent: SpanContext | None
    """The stored trace carrier's span, or ``None`` for a root span."""
    start_at: float
    end_at: float
    attributes: dict[str, AttributeValue]
    events: tuple[SpanEvent, ...] = ()
    links: tuple[SpanContext, ...] = ()
    """The task's first phase span, from each of its later ones (pi-durable links an
    invocation's spans to where the task began)."""
    error: str | None = None
    """The error status description (faulted, failed, orphaned, interrupted), if any."""
    ok: bool = False
    """Whether the span has an explicit OK status (an abort that ended as asked)."""

    @property
    def start_ns(self) -> int:
        """The start in ns since the epoch, as OpenTelemetry wants it."""
        return to_ns(self.start_at)

    @property
    def end_ns(self) -> int:
        """The end in ns since the epoch."""
        return to_ns(self.end_at)

    @property
    def duration_ms(self) -> float:
        """How long the phase took on the scheduler clock."""
        return self.end_at - self.start_at


@dataclass
class _Open:
    task_id: str
    kind: str
    phase: str
    attempt: int | None
    mode: str
    resumed: bool
    start_at: float
    trace_id: int
    span_id: int
    parent: SpanContext | None
    links: tuple[SpanContext, ...] = ()
    events: list[SpanEvent] = field(default_factory=list)


def to_ns(at: float) -> int:
    """A scheduler-clock time (ms since the epoch) in ns; exact for integer ms."""
    return round(at * 1_000_000)


def _hash_id(bits: int, *parts: str) -> int:
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[: bits // 8], "big") or 1


def trace_id_for(task: TaskState) -> int:
    """The trace id of a task with no carrier and no owner: derived from its id and
    submission time, so a replay of the same log gives the same id."""
    return _hash_id(128, "tasktrail.trace", task.id, str(to_ns(task.submitted_at)))


def span_id_for(task: TaskState, version: int) -> int:
    """The id of the phase span that the task's event number ``version`` opened."""
    return _hash_id(64, "tasktrail.phase", task.id, str(to_ns(task.submitted_at)), str(version))


def carrier_context(carrier: Mapping[str, str] | None) -> SpanContext | None:
    """The span a W3C ``traceparent`` carrier names, or ``None`` if it names none."""
    if not carrier:
        return None
    span_context = trace.get_current_span(_PROPAGATOR.extract(carrier)).get_span_context()
    return span_context if span_context.is_valid else None


def _outcome_of(status: str) -> str:
    if status == "completed":
        return "done"
    return "aborted" if status == "aborted" else "faulted"


class PhaseFold:
    """Task events in, finished phase spans out: the one definition of a phase span.

    Feed it every task-stream event in log order with the task's state after
    it and the event's version in its stream. ``resumed`` says
    whether a ``TaskReserved`` is the task's first invocation since a store
    was opened. With ``interrupted_spans`` (from history) a phase that a crash
    cut off ends, with an error, where recovery found it. A live process sees the
    recovery of a phase it runs only when another worker took the task over (this
    one's lease expired): that span ends lease-lost (:meth:`lost`).
    """

    def __init__(self, *, interrupted_spans: bool = False) -> None:
        self.interrupted_spans = interrupted_spans
        self.open: dict[str, _Open] = {}
        self._traces: dict[str, tuple[int, SpanContext | None]] = {}

    def apply(
        self,
        event: TaskEvent,
        after: TaskState,
        version: int,
        *,
        resumed: bool,
        lookup: Lookup,
    ) -> list[PhaseSpan]:
        """The spans ``event`` finished (usually none, at most two)."""
        task_id = event.task_id
        current = self.open.get(task_id)
        finished: list[PhaseSpan] = []
        if isinstance(event, TaskReserved):
            if current is not None:  # never on a valid log; end it rather than lose it
                finished.append(self._close(current, event.at, "aborted", ok=True))
            self._start(after, event, version, event.mode, resumed, lookup)
        elif isinstance(event, CheckpointCommitted):
            if current is not None and (event.phase, event.attempt) == (
                current.phase,
                current.attempt,
            ):
                # pi-durable: the same checkpoint committed again (an intent before an
                # effect, say) adds no checkpoint event and opens no new span.
                return finished
            if current is not None:
                # The checkpoint event marks a change of phase only (pi-durable); a new
                # attempt of the same phase still starts a span of its own.
                if event.phase != current.phase:
                    attributes: dict[str, AttributeValue] = {"phase": event.phase}
                    if event.attempt is not None:
                        attributes["attempt"] = event.attempt
                    current.events.append(SpanEvent(CHECKPOINT_EVENT, event.at, attributes))
                finished.append(self._close(current, event.at, f"next={event.phase}"))
            if after.status == "running" and after.mode is not None:
                self._start(after, event, version, after.mode, False, lookup)
        elif current is None:
            pass
        elif isinstance(event, WaitStarted) or after.status == "waiting":  # or a message wait
            finished.append(self._close(current, event.at, "waiting"))
        elif after.status == "sleeping":  # a sleep, or a failed phase's backoff (rule 23)
            retried = event.rule == 23
            error = getattr(event, "message", None) if retried else None
            outcome, kind = ("retrying", "phase_retried") if retried else ("sleeping", None)
            finished.append(self._close(current, event.at, outcome, error=error, error_type=kind))
        elif isinstance(event, OutcomeHeld | TaskEnded):
            error = None
            if event.status in ERROR_STATUSES:
                text = event.message if event.status != "orphaned" else event.reason
                detail = (text or event.reason or event.status)[:MAX_STATUS_MESSAGE]
                error = f"task_{event.status}: {detail}"
            finished.append(
                self._close(
                    current,
                    event.at,
                    _outcome_of(event.status),
                    error=error,
                    ok=event.status == "aborted",
                    error_type=f"task_{event.status}" if error else None,
                )
            )
        elif (isinstance(event, AbortMarked) and current.mode == "run") or isinstance(
            event, TaskStopped
        ):
            # The invocation ends at an abort mark during a run, or at a close.
            finished.append(self._close(current, event.at, "aborted", ok=True))
        elif isinstance(event, TaskRecovered):
            if self.interrupted_spans:
                message = f"interrupted: the process stopped mid-phase (restart {event.restarts})"
                finished.append(
                    self._close(
                        current, event.at, "interrupted", error=message, error_type="interrupted"
                    )
                )
            else:
                # Live, a phase is open only while this process runs it: the recovery
                # is another worker's, so this one lost its lease.
                finished.extend(self.lost(event))
        if isinstance(event, TaskEnded):
            self._traces.pop(task_id, None)
        return finished

    def lost(self, event: TaskRecovered, taken_by: str | None = None) -> list[PhaseSpan]:
        """The open span of a task that another worker recovered from this process (its
        lease expired), ended where the recovery was, with an error saying so and the
        worker that took the task (``taken_by``) when known; the fold forgets the task.
        Nothing when no span of the task is open (then it was never this process's)."""
        current = self.open.get(event.task_id)
        if current is None:
            return []
        self._traces.pop(event.task_id, None)  # kept again if this process runs it again
        loser = f"worker {event.worker}" if event.worker is not None else "this worker"
        message = (
            f"lease_lost: {loser} lost its lease and another worker recovered the task "
            f"(restart {event.restarts})"
        )
        if taken_by is not None:
            message += f"; worker {taken_by} took it"
        span = self._close(
            current,
            event.at,
            "interrupted",
            error=message,
            error_type="lease_lost",
            more={"lease.taken_by": taken_by} if taken_by is not None else None,
        )
        return [span]

    def follows(self, task_id: str) -> bool:
        """Whether the fold holds anything of the task: an open span, or its trace."""
        return task_id in self.open or task_id in self._traces

    def holding(self) -> bool:
        """Whether the fold keeps anything of any task."""
        return bool(self.open or self._traces)

    def forget(self, task_id: str) -> None:
        """Drop what the fold keeps of a task another worker ended, out of its sight."""
        self.open.pop(task_id, None)
        self._traces.pop(task_id, None)

    def current(self, task_id: str) -> SpanContext | None:
        """The open phase span of a task, as a span context (for handlers' context)."""
        current = self.open.get(task_id)
        if current is None:
            return None
        # The flags the span gets when emitted: its parent's, or sampled with a random id.
        flags = current.parent.trace_flags if current.parent is not None else ROOT_FLAGS
        return SpanContext(current.trace_id, current.span_id, is_remote=False, trace_flags=flags)

    def trace_of(
        self, task: TaskState, lookup: Lookup, depth: int = 0
    ) -> tuple[int, SpanContext | None]:
        """The task's trace id and parent span: its stored carrier's, else its owner's
        trace (as root spans), else a trace of its own."""
        known = self._traces.get(task.id)
        if known is not None:
            return known
        parent = carrier_context(task.trace)
        owner = lookup(task.owner_id) if task.owner_id is not None and depth < 64 else None
        if parent is not None:
            found: tuple[int, SpanContext | None] = (parent.trace_id, parent)
        elif owner is not None:
            found = (self.trace_of(owner, lookup, depth + 1)[0], None)
        else:
            found = (trace_id_for(task), None)
        if task.live:
            self._traces[task.id] = found
        return found

    def _start(
        self,
        task: TaskState,
        event: TaskEvent,
        version: int,
        mode: str,
        resumed: bool,
        lookup: Lookup,
    ) -> None:
        trace_id, parent = self.trace_of(task, lookup)
        checkpoint = task.checkpoint
        links: tuple[SpanContext, ...] = ()
        first = task.started_version
        if first is not None and first != version:
            # A later phase span links to the task's first one (same trace, derived id).
            flags = parent.trace_flags if parent is not None else ROOT_FLAGS
            first_span = SpanContext(
                trace_id, span_id_for(task, first), is_remote=False, trace_flags=flags
            )
            links = (first_span,)
        self.open[task.id] = _Open(
            task_id=task.id,
            kind=task.kind,
            phase=checkpoint.phase if checkpoint is not None else "",
            attempt=checkpoint.attempt if checkpoint is not None else None,
            mode=mode,
            resumed=resumed,
            start_at=event.at,
            trace_id=trace_id,
            span_id=span_id_for(task, version),
            parent=parent,
            links=links,
        )

    def _close(
        self,
        current: _Open,
        at: float,
        outcome: str,
        *,
        error: str | None = None,
        ok: bool = False,
        error_type: str | None = None,
        more: dict[str, AttributeValue] | None = None,
    ) -> PhaseSpan:
        self.open.pop(current.task_id, None)
        attributes: dict[str, AttributeValue] = {
            "task.id": current.task_id,
            "task.kind": current.kind,
            "phase": current.phase,
            "mode": current.mode,
            "resumed": current.resumed,
        }
        if current.attempt is not None:
            attributes["attempt"] = current.attempt
        attributes["outcome"] = outcome
        if error_type is not None:
            attributes["error.type"] = error_type
        if more:
            attributes.update(more)
        return PhaseSpan(
            task_id=current.task_id,
            kind=current.kind,
            phase=current.phase,
            outcome=outcome,
            trace_id=current.trace_id,
            span_id=current.span_id,
            parent=current.parent,
            start_at=current.start_at,
            end_at=at,
            attributes=attributes,
            events=tuple(current.events),
            links=current.links,
            error=error,
            ok=ok and error is None,
        )
