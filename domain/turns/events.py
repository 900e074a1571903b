"""The events of Turns (on the task's own stream), of a task's pending Leader wakeup
(on ``wakeup:<task id>``) and of the runtime-cleanup obligations of its roles (on
``cleanup:<task id>``), each registered with its stored topic: the rules of this
package emit them and :mod:`.folds` folds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from ..tasks.events import TaskEvent, register_event

# ─── streams ────────────────────────────────────────────────────────────────

WAKEUP_STREAM_PREFIX = "wakeup:"

CLEANUP_STREAM_PREFIX = "cleanup:"


def wakeup_stream_id(task_id: str) -> str:
    """The stream a task's pending Leader wakeup lives on."""
    return f"{WAKEUP_STREAM_PREFIX}{task_id}"


def cleanup_stream_id(task_id: str) -> str:
    """The stream the runtime-cleanup obligations of a task's roles live on."""
    return f"{CLEANUP_STREAM_PREFIX}{task_id}"


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
class TurnStallDiagnosed(TurnEvent):
    """The Turn showed no progress since ``progress_at`` for the stall diagnostic
    window: a stall candidate, diagnosed before it may be declared stalled;
    ``diagnostic`` is what the runtime said of it, if anything."""

    progress_at: float
    diagnostic: str | None = None


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


# ─── wakeup events (stream ``wakeup:<task id>``) ────────────────────────────


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
class WakeupFoundBusy(WakeupEvent):
    """A pass found the Leader busy with Turn ``turn_id`` (``attempt`` earlier times,
    counted for that Turn): the wakeup is signalled again at ``resignal_at`` with the
    delivery backoff (``None``: the delivery retry limit is used up; the force window
    remains)."""

    turn_id: str
    attempt: int
    resignal_at: float | None


@dataclass(frozen=True, kw_only=True, slots=True)
class WakeupDropped(WakeupEvent):
    """The wakeup was dropped: its task has decided its outcome or ended."""

    reasons: tuple[str, ...]


# ─── cleanup events (stream ``cleanup:<task id>``) ──────────────────────────


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
class RuntimeCleanupClaimed(CleanupEvent):
    """Worker ``worker`` claimed the role's open obligation before asking its runtime
    to clean up (an intent: nothing was cleaned up yet); no other live worker asks
    its own while the claim holds. ``taken_from``: the worker whose claim it took
    over (its lease had expired, or a restart of this worker's name made it)."""

    worker: str
    taken_from: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeCleanupFailed(CleanupEvent):
    """A cleanup attempt failed; the obligation stays open."""

    error: str


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeCleanupSettled(CleanupEvent):
    """The role's runtime was cleaned up: the obligation is settled."""


# ─── settings (stream ``settings:turns``) ───────────────────────────────────

TURN_SETTINGS_STREAM = "settings:turns"


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnSettingsChanged(TaskEvent):
    """The Turn settings in force from now on, whole (``configure_turns``): the
    windows and limits section 2's rules decide by, so that a replay and the read
    models decide as the live scheduler did. ``task_id`` is empty (scheduler-wide);
    the fields are :class:`~.settings.TurnSettings`', with ``actor`` and ``why``: who
    set them and why (``ACT_FIELDS``). ``task_pass_retry_base_ms`` is ``None`` when the
    pass retry follows the delivery retry base; a log written before that was possible
    holds the number then in force, which it keeps."""

    task_stream: ClassVar[bool] = False
    aggregation_window_ms: float
    force_window_ms: float
    stall_window_ms: float
    delivery_retry_base_ms: float
    delivery_retry_limit: int
    task_pass_retry_base_ms: float | None
    task_pass_retry_limit: int
    task_concurrency: int
    stall_diagnostic_ms: float | None = None
    actor: str | None = None
    why: str | None = None

    def stream_id(self) -> str:
        """The one stream of the Turn settings."""
        return TURN_SETTINGS_STREAM


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
    TurnStallDiagnosed,
    TurnExited,
    TurnStalled,
    TurnObservationDropped,
    WakeupRequested,
    WakeupAggregated,
    WakeupDispatched,
    WakeupFoundBusy,
    WakeupDropped,
    RuntimeCleanupRequired,
    RuntimeCleanupClaimed,
    RuntimeCleanupFailed,
    RuntimeCleanupSettled,
    TurnSettingsChanged,
)
"""Every event class this module registers."""

for _cls in TURN_EVENT_TYPES:
    register_event(_cls)
