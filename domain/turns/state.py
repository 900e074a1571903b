"""Agent Turns, Leader wakeups and runtime-cleanup obligations as events (SPEC.md section 2).

A task has **roles** (``leader`` and named others). A **Turn** is one agent
turn of one role: ``started -> delivered -> completed | failed | exited |
stalled``. At most one Turn per (task, role) is active (``started`` or
``delivered``). Turn events live on the task's own stream, so the task's
aggregate version guards them and rule 4 holds: nothing is recorded on a
terminal task.

Two kinds of record must outlive the task, so they live on streams of their
own:

- the task's **pending Leader wakeup**, on ``wakeup:<task id>``: requested,
  aggregated, dispatched (a Leader Turn started, or the reasons steered into the
  busy one) or dropped (the task has decided its outcome or ended);
- the **runtime-cleanup obligations** of a completed task's roles, on
  ``cleanup:<task id>``: required, failed (still open), settled.

Section 2's rules are not numbered in SPEC.md; events a rule produced name it in
``cause`` (``turns.completion_due``, ``wakeups.dispatch``, ...), and events a
controller pass recorded carry its ``pass_id``.

This module holds the event classes, the state they fold into and the
settings; the rules and the folds are in :mod:`.turn_rules`. It must not import
:mod:`.state` (which imports it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from ..errors import InvalidArgument, Refused
from ..tasks.events import TaskEvent, register_event

# ─── vocabulary ─────────────────────────────────────────────────────────────

LEADER = "leader"
"""The role a Leader wakeup starts a Turn for."""

TurnStatus = Literal["started", "delivered", "completed", "failed", "exited", "stalled"]
ACTIVE_TURN_STATUSES: frozenset[str] = frozenset({"started", "delivered"})
ENDED_TURN_STATUSES: frozenset[str] = frozenset({"completed", "failed", "exited", "stalled"})

DeliveryOutcome = Literal[
    "delivered",
    "already-delivered",
    "not-ready",
    "runtime-unavailable",
    "writer-attached",
    "delivery-uncertain",
]
DELIVERY_OUTCOMES: tuple[DeliveryOutcome, ...] = (
    "delivered",
    "already-delivered",
    "not-ready",
    "runtime-unavailable",
    "writer-attached",
    "delivery-uncertain",
)
SETTLED_OUTCOMES: frozenset[str] = frozenset({"delivered", "already-delivered"})
"""The Turn was handed to its runtime: it moves to ``delivered``."""
RETRYABLE_OUTCOMES: frozenset[str] = frozenset({"not-ready", "runtime-unavailable"})
"""Try again after ``min(2000, base * 2**min(attempt, 3))`` ms, up to the limit."""
HELD_OUTCOMES: frozenset[str] = frozenset({"writer-attached", "delivery-uncertain"})
"""Not retried by the scheduler: ``writer-attached`` waits for the writer to go,
``delivery-uncertain`` may have reached the runtime (exempt from exit liveness in
the pass that recorded it)."""

ObservationKind = Literal["exit", "stall"]

WAKEUP_STREAM_PREFIX = "wakeup:"
CLEANUP_STREAM_PREFIX = "cleanup:"

MAX_TASK_CONCURRENCY = 32
"""The most per-task passes a controller pass runs at once."""


def wakeup_stream_id(task_id: str) -> str:
    """The stream a task's pending Leader wakeup lives on."""
    return f"{WAKEUP_STREAM_PREFIX}{task_id}"


def cleanup_stream_id(task_id: str) -> str:
    """The stream the runtime-cleanup obligations of a task's roles live on."""
    return f"{CLEANUP_STREAM_PREFIX}{task_id}"


def turn_id_for(role: str, number: int) -> str:
    """The id of a role's ``number``-th Turn (1-based): ``<role>.<number>``.

    Ids are deterministic, so a replay names the same Turns, and unique within a
    task: the part after the last dot is the number, the rest the role.
    """
    return f"{role}.{number}"


def retry_delay_ms(base_ms: float, attempt: int) -> float:
    """The capped exponential backoff of yui: ``min(2000, base * 2**min(attempt, 3))``.

    ``attempt`` counts the earlier attempts (0, 1, 2, ...): at base 250 that is
    250, 500, 1000, 2000, 2000, ... ms.
    """
    return float(min(2000.0, base_ms * 2 ** min(attempt, 3)))


# ─── refusals ───────────────────────────────────────────────────────────────


class TurnRuleViolation(Refused):
    """A command broke one of the rules of SPEC.md section 2; nothing was appended
    (except for :class:`StaleCompletion`, whose refusal is itself recorded).

    ``rule`` names the rule, as ``turns.one_active`` or ``wakeups.reason``.
    """

    def __init__(self, rule: str, reason: str, *, task_id: str | None = None) -> None:
        self.rule = rule
        super().__init__(f"{rule}: {reason}", task_id=task_id)


class StaleCompletion(TurnRuleViolation):
    """A completion named a Turn that is not its role's active one (``turns.stale_completion``).

    It was refused and never applied, but the refusal **was recorded** (a
    :class:`TurnCompletionRefused` event), so the audit shows it. ``turn_id`` is
    the Turn the completion named, ``active_turn_id`` the role's active Turn
    (``None`` when the role has none).
    """

    def __init__(self, task_id: str, role: str, turn_id: str, active_turn_id: str | None) -> None:
        self.role = role
        self.turn_id = turn_id
        self.active_turn_id = active_turn_id
        active = (
            f"the active Turn is {active_turn_id}" if active_turn_id else "it has no active Turn"
        )
        super().__init__(
            "turns.stale_completion",
            f"completion of Turn {turn_id} of role {role!r} is stale ({active}); "
            "it was recorded as refused and not applied",
            task_id=task_id,
        )


# ─── settings ───────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class TurnSettings:
    """The windows and limits of Turns, wakeups and controller passes (all in ms).

    Defaults are yui's: the aggregation window (60 s) gathers a burst of
    wakeup requests into one Leader Turn; the force window (10 min) bounds how
    long a busy Leader can hold a wakeup back; a Turn with no progress for the
    stall window (30 min) is ``stalled``. Delivery retries back off from 250 ms
    and give up after 60 retries (about two minutes of trying); a failed
    per-task pass is retried twice (after 250 and 500 ms). A controller pass
    runs up to 4 per-task passes at once (at most 32).
    """

    aggregation_window_ms: float = 60_000
    force_window_ms: float = 10 * 60_000
    stall_window_ms: float = 30 * 60_000
    delivery_retry_base_ms: float = 250
    delivery_retry_limit: int = 60
    task_pass_retry_base_ms: float = 250
    task_pass_retry_limit: int = 2
    task_concurrency: int = 4

    def __post_init__(self) -> None:
        for name in (
            "aggregation_window_ms",
            "force_window_ms",
            "stall_window_ms",
            "delivery_retry_base_ms",
            "task_pass_retry_base_ms",
        ):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or value <= 0
            ):
                raise InvalidArgument(f"{name} must be a positive number of ms, not {value!r}")
        for name in ("delivery_retry_limit", "task_pass_retry_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidArgument(f"{name} must be a positive int, not {value!r}")
        if self.force_window_ms < self.aggregation_window_ms:
            raise InvalidArgument(
                f"force_window_ms ({self.force_window_ms}) must be at least "
                f"aggregation_window_ms ({self.aggregation_window_ms})"
            )
        check_concurrency(self.task_concurrency, "task_concurrency")


def check_concurrency(value: object, name: str = "concurrency") -> int:
    """A per-task pass bound: a positive int of at most :data:`MAX_TASK_CONCURRENCY`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{name} must be a positive int, not {value!r}")
    if value > MAX_TASK_CONCURRENCY:
        raise InvalidArgument(
            f"{name} must be at most {MAX_TASK_CONCURRENCY}, not {value}: "
            "more per-task passes at once would only queue on the store"
        )
    return value


DEFAULT_TURN_SETTINGS = TurnSettings()


# ─── state ──────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class TurnState:
    """One Turn of one role, as its events made it.

    ``progress_at`` is the last sign of progress (start, delivery, an explicit
    progress report); the stall window counts from it. ``retry_at`` is when a
    retryable delivery is due again. ``completion_due_at`` is a reported
    completion not yet folded; ``exit_observed_at``/``stall_observed_at`` are
    destructive observations waiting for the next pass to judge them.
    """

    turn_id: str
    role: str
    status: TurnStatus
    started_at: float
    progress_at: float
    cause: str | None = None
    reasons: tuple[str, ...] = ()
    delivery_outcome: str | None = None
    delivery_attempts: int = 0
    """Retryable delivery outcomes recorded so far."""
    retry_at: float | None = None
    delivery_held: bool = False
    completion_due_at: float | None = None
    exit_observed_at: float | None = None
    stall_observed_at: float | None = None
    ended_at: float | None = None
    end_reason: str | None = None

    @property
    def active(self) -> bool:
        """``started`` or ``delivered``: the role's one open Turn."""
        return self.status in ACTIVE_TURN_STATUSES

    def completion_due(self, now: float) -> bool:
        """Whether a reported completion is due (``due_at <= now``)."""
        return self.completion_due_at is not None and self.completion_due_at <= now

    def delivery_due(self, now: float) -> bool:
        """Whether a pass should try to deliver it now: ``started``, not held, and
        never tried or its retry is due."""
        if self.status != "started" or self.delivery_held:
            return False
        return self.delivery_outcome is None or (self.retry_at is not None and self.retry_at <= now)

    def to_dict(self) -> dict[str, Any]:
        """The Turn as plain data, leaving out what is unset."""
        out: dict[str, Any] = {
            "turn_id": self.turn_id,
            "role": self.role,
            "status": self.status,
            "started_at": self.started_at,
            "progress_at": self.progress_at,
        }
        optional: dict[str, Any] = {
            "cause": self.cause,
            "reasons": list(self.reasons) if self.reasons else None,
            "delivery_outcome": self.delivery_outcome,
            "delivery_attempts": self.delivery_attempts or None,
            "retry_at": self.retry_at,
            "delivery_held": self.delivery_held or None,
            "completion_due_at": self.completion_due_at,
            "exit_observed_at": self.exit_observed_at,
            "stall_observed_at": self.stall_observed_at,
            "ended_at": self.ended_at,
            "end_reason": self.end_reason,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        return out


@dataclass(frozen=True, slots=True)
class RoleState:
    """One role of a task: how many Turns it started, the active one, the last ended one."""

    name: str
    turns: int = 0
    active: TurnState | None = None
    last: TurnState | None = None

    def to_dict(self) -> dict[str, Any]:
        """The role as plain data."""
        out: dict[str, Any] = {"turns": self.turns}
        if self.active is not None:
            out["active"] = self.active.to_dict()
        if self.last is not None:
            out["last"] = self.last.to_dict()
        return out


@dataclass(frozen=True, slots=True)
class WakeupState:
    """A task's pending Leader wakeup: every reason in first-request order, the
    first request's time (kept) and the last one's."""

    task_id: str
    reasons: tuple[str, ...]
    request_count: int
    first_requested_at: float
    last_requested_at: float

    def to_dict(self) -> dict[str, Any]:
        """The wakeup as plain data."""
        return {
            "task_id": self.task_id,
            "reasons": list(self.reasons),
            "request_count": self.request_count,
            "first_requested_at": self.first_requested_at,
            "last_requested_at": self.last_requested_at,
        }


@dataclass(frozen=True, slots=True)
class Obligation:
    """The runtime-cleanup obligation of one role of a completed task."""

    role: str
    required_at: float
    settled_at: float | None = None
    failures: int = 0
    last_error: str | None = None

    @property
    def open(self) -> bool:
        """Not settled yet."""
        return self.settled_at is None


@dataclass(frozen=True, slots=True)
class CleanupState:
    """The runtime-cleanup obligations of a task's roles, by role."""

    task_id: str
    obligations: dict[str, Obligation] = field(default_factory=dict)

    def open_roles(self) -> list[str]:
        """Roles whose runtime still waits for cleanup, in the order they were required."""
        return [role for role, ob in self.obligations.items() if ob.open]


# ─── Turn events (the task's own stream) ────────────────────────────────────


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnEvent(TaskEvent):
    """Base of the events of one Turn: which role, which Turn, what rule or pass made it."""

    role: str
    turn_id: str
    cause: str | None = None
    """The section 2 rule that produced the event (``None``: the caller's command)."""
    pass_id: str | None = None
    """The controller pass that recorded it, if one did."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnStarted(TurnEvent):
    """A Turn of ``role`` started; ``reasons`` say why (a Leader wakeup's reasons)."""

    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnDelivered(TurnEvent):
    """The Turn was handed to its runtime (``delivered`` or ``already-delivered``)."""

    outcome: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnDeliveryRetryScheduled(TurnEvent):
    """A retryable delivery outcome: try again at ``retry_at`` (``attempt`` earlier tries)."""

    outcome: str
    attempt: int
    retry_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnDeliveryHeld(TurnEvent):
    """A delivery outcome the scheduler does not retry (``writer-attached``,
    ``delivery-uncertain``); the Turn stays ``started``."""

    outcome: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnDeliveryFailed(TurnEvent):
    """Delivery retries were exhausted after ``attempts`` retryable outcomes; a
    :class:`TurnFailed` follows."""

    outcome: str
    attempts: int


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnProgressed(TurnEvent):
    """The Turn showed progress: the stall window starts again."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnCompletionReported(TurnEvent):
    """A completion of the active Turn was reported, due at ``due_at``: a pass folds it then."""

    due_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnCompleted(TurnEvent):
    """The Turn completed."""

    summary: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnCompletionRefused(TurnEvent):
    """A stale completion: it named a Turn other than the role's active one. It
    changes nothing; it is here so the audit shows the refusal."""

    active_turn_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnFailed(TurnEvent):
    """The Turn ended ``failed``: ``reason`` is ``delivery_exhausted`` or the caller's."""

    reason: str
    message: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnExitObserved(TurnEvent):
    """The runtime reported the Turn's process gone; the next pass judges it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnStallObserved(TurnEvent):
    """The runtime reported the Turn stuck; the next pass judges it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnExited(TurnEvent):
    """A pass judged an exit observation: the Turn ended ``exited``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnStalled(TurnEvent):
    """The Turn ended ``stalled``: no progress since ``progress_at`` for the stall
    window, or a stall observation a pass judged."""

    progress_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnObservationDropped(TurnEvent):
    """A destructive observation (``exit`` or ``stall``) was dropped: a due
    completion won (``turns.completion_wins``) or its Turn was no longer active
    (``turns.not_active``)."""

    kind: str


# ─── wakeup events (stream ``wakeup:<task id>``) ─────────────────────────────


@dataclass(frozen=True, kw_only=True, slots=True)
class WakeupEvent(TaskEvent):
    """Base of the events of a task's pending Leader wakeup."""

    task_stream: ClassVar[bool] = False
    cause: str | None = None
    pass_id: str | None = None

    def stream_id(self) -> str:
        """The task's wakeup stream."""
        return wakeup_stream_id(self.task_id)


@dataclass(frozen=True, kw_only=True, slots=True)
class WakeupRequested(WakeupEvent):
    """The first request created the pending wakeup (``first_requested_at`` = ``at``)."""

    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class WakeupAggregated(WakeupEvent):
    """A later request joined the pending wakeup: its reason appended if new, the
    first time kept."""

    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class WakeupDispatched(WakeupEvent):
    """The wakeup was dispatched and cleared: a Leader Turn ``turn_id`` started
    (``mode`` ``started``), or, the force window having passed while the Leader
    was busy, its reasons were steered into the busy Turn (``steered``)."""

    turn_id: str
    mode: Literal["started", "steered"]
    reasons: tuple[str, ...]
    request_count: int
    first_requested_at: float


@dataclass(frozen=True, kw_only=True, slots=True)
class WakeupDropped(WakeupEvent):
    """The wakeup was dropped: its task has decided its outcome or ended."""

    reasons: tuple[str, ...]


# ─── cleanup events (stream ``cleanup:<task id>``) ───────────────────────────


@dataclass(frozen=True, kw_only=True, slots=True)
class CleanupEvent(TaskEvent):
    """Base of the events of the runtime-cleanup obligations of a task's roles."""

    task_stream: ClassVar[bool] = False
    role: str
    cause: str | None = None
    pass_id: str | None = None

    def stream_id(self) -> str:
        """The task's cleanup stream."""
        return cleanup_stream_id(self.task_id)


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeCleanupRequired(CleanupEvent):
    """A completed task's role owes a runtime cleanup."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeCleanupFailed(CleanupEvent):
    """A cleanup attempt failed; the obligation stays open."""

    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeCleanupSettled(CleanupEvent):
    """The role's runtime was cleaned up: the obligation is settled."""


TURN_EVENT_TYPES: tuple[type[TaskEvent], ...] = (
    TurnStarted,
    TurnDelivered,
    TurnDeliveryRetryScheduled,
    TurnDeliveryHeld,
    TurnDeliveryFailed,
    TurnProgressed,
    TurnCompletionReported,
    TurnCompleted,
    TurnCompletionRefused,
    TurnFailed,
    TurnExitObserved,
    TurnStallObserved,
    TurnExited,
    TurnStalled,
    TurnObservationDropped,
    WakeupRequested,
    WakeupAggregated,
    WakeupDispatched,
    WakeupDropped,
    RuntimeCleanupRequired,
    RuntimeCleanupFailed,
    RuntimeCleanupSettled,
)
"""Every event class this module registers."""

for _cls in TURN_EVENT_TYPES:
    register_event(_cls)
