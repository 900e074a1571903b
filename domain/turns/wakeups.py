"""The pending Leader wakeup, one per task on ``wakeup:<task id>``: a request creates
it or aggregates into it (``wakeups.aggregate``: reasons appended once each, the first
time kept); once its aggregation window has passed it starts a Leader Turn
(``wakeups.dispatch``), or, finding the Leader busy, is signalled again with the
delivery backoff, counted per busy Leader Turn (``wakeups.resignal``); while the
Leader stays busy past the force window, its reasons are steered into the busy Turn
(``wakeups.force``, recorded by :func:`record_steered` only once the hand-off
happened); a wakeup of a task that decided its outcome is dropped
(``wakeups.task_done``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..tasks.context import Context
from ..tasks.guards import not_closing as _open
from ..tasks.state import TaskState
from ..tasks.validation import require_task as _task
from ..world import Draft, World, stream_in_view
from .checks import active_turn
from .events import (
    TurnStarted,
    WakeupAggregated,
    WakeupDispatched,
    WakeupDropped,
    WakeupFoundBusy,
    WakeupRequested,
    wakeup_stream_id,
)
from .refusals import TurnRuleViolation
from .rules import _fold_due_completion
from .settings import TurnSettings, retry_delay_ms
from .state import LEADER, WakeupState, turn_id_for


@dataclass(frozen=True, slots=True)
class WakeupDispatch:
    """What the wakeup step did for one task.

    ``status``: ``dispatched`` (a Leader Turn ``turn_id`` started), ``force``
    (the force window passed while the Leader was busy: ``reasons`` are to be
    handed to its Turn ``turn_id``, and only then recorded with
    :func:`record_steered`), ``steered`` (that hand-off happened and was
    recorded), ``dropped`` (the task decided its outcome), ``aggregating`` (the
    aggregation window is still open), ``busy`` (the Leader's Turn ``turn_id`` is
    active, the force window still open) or ``none`` (no wakeup pending).
    ``request_count`` is the wakeup's, so a hand-off records only what it handed.
    """

    status: Literal["dispatched", "force", "steered", "dropped", "aggregating", "busy", "none"]
    turn_id: str | None = None
    reasons: tuple[str, ...] = ()
    request_count: int = 0


WakeupRequestStatus = Literal["requested", "aggregated", "dropped"]


def outcome_decided(task: TaskState) -> bool:
    """Whether the task holds or reached its outcome (``completing`` or ``terminal``)."""
    return task.status in ("completing", "terminal")


def pending_wakeup(source: Draft | World, task_id: str) -> WakeupState | None:
    """The task's pending Leader wakeup, or ``None``."""
    stream_id = wakeup_stream_id(task_id)
    state: WakeupState | None = stream_in_view(source, stream_id)
    return state


DeadlineWindow = Literal["aggregation", "force", "resignal"]


def choose_deadline(
    aggregation_at: float,
    force_at: float,
    leader_busy: bool,
    now: float | None,
    resignal_at: float | None = None,
    found_busy: bool = True,
) -> tuple[float, DeadlineWindow]:
    """Which of a wakeup's deadlines is next, and what it is: the aggregation end,
    or, once that has passed (``now``; ``None``: not known) with the Leader still
    busy and a pass found it so (``found_busy``), the next re-signal or the force
    end, whichever comes first. The read models ask this too."""
    # wakeups.deadline (yui): the aggregation end is answered first, busy Leader or not,
    # and stays due until a pass found the Leader busy (yui's wake timer fires at the
    # aggregation end; its pass re-signals); then its re-signal, and the force end.
    if not leader_busy or now is None or now < aggregation_at or not found_busy:
        return aggregation_at, "aggregation"
    if resignal_at is not None and resignal_at < force_at:
        return resignal_at, "resignal"
    return force_at, "force"


def wakeup_deadline(
    wakeup: WakeupState, leader_busy: bool, settings: TurnSettings, now: float | None
) -> float:
    """When the wakeup is next due (see :func:`choose_deadline`)."""
    first = wakeup.first_requested_at
    return choose_deadline(
        first + settings.aggregation_window_ms,
        first + settings.force_window_ms,
        leader_busy,
        now,
        wakeup.resignal_at,
        wakeup.busy_attempts > 0,
    )[0]


def request_wakeup(
    draft: Draft, ctx: Context, settings: TurnSettings, task_id: str, reason: str
) -> WakeupRequestStatus:
    """Request a Leader wakeup: create the task's pending wakeup or aggregate into it."""
    _open(ctx, task_id)
    task = _task(draft, task_id)
    if not isinstance(reason, str) or not reason.strip():
        raise TurnRuleViolation(
            "wakeups.reason", f"a wakeup needs a non-blank reason, not {reason!r}", task_id=task_id
        )
    # 4. An abort mark on a terminal task is a no-op; so is a wakeup request.
    if task.status == "terminal":
        return "dropped"
    pending = pending_wakeup(draft, task_id)
    # wakeups.task_done: a wakeup of a task that decided its outcome is dropped.
    if task.status == "completing":
        reasons = (*pending.reasons, reason) if pending is not None else (reason,)
        draft.emit_stream(
            WakeupDropped(
                task_id=task_id,
                at=ctx.now,
                reasons=tuple(dict.fromkeys(reasons)),
                cause="wakeups.task_done",
            )
        )
        return "dropped"
    if pending is None:
        draft.emit_stream(WakeupRequested(task_id=task_id, at=ctx.now, reason=reason))
        return "requested"
    # wakeups.aggregate: reasons appended (once each), the first time kept.
    draft.emit_stream(
        WakeupAggregated(task_id=task_id, at=ctx.now, reason=reason, cause="wakeups.aggregate")
    )
    return "aggregated"


def dispatch_wakeup(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    *,
    pass_id: str | None = None,
) -> WakeupDispatch:
    """Dispatch the task's pending wakeup if it is due, or drop it if its task
    decided its outcome; returns what happened."""
    _open(ctx, task_id)
    wakeup = pending_wakeup(draft, task_id)
    task = draft.get(task_id)
    if wakeup is None or task is None:
        return WakeupDispatch("none")
    # wakeups.task_done: a wakeup of a completed or terminal task is dropped.
    if outcome_decided(task):
        draft.emit_stream(
            WakeupDropped(
                task_id=task_id,
                at=ctx.now,
                reasons=wakeup.reasons,
                cause="wakeups.task_done",
                pass_id=pass_id,
            )
        )
        return WakeupDispatch("dropped", None, wakeup.reasons)
    waited = max(0.0, ctx.now - wakeup.first_requested_at)
    if waited < settings.aggregation_window_ms:
        return WakeupDispatch("aggregating", None, wakeup.reasons)
    _fold_due_completion(draft, ctx, task_id, LEADER, pass_id)
    busy = active_turn(draft.get(task_id), LEADER)
    fields: dict[str, Any] = {
        "task_id": task_id,
        "at": ctx.now,
        "reasons": wakeup.reasons,
        "request_count": wakeup.request_count,
        "first_requested_at": wakeup.first_requested_at,
        "pass_id": pass_id,
    }
    if busy is not None:
        if waited < settings.force_window_ms:
            _resignal(draft, ctx, settings, wakeup, busy.turn_id, pass_id)
            return WakeupDispatch("busy", busy.turn_id, wakeup.reasons)
        # wakeups.force: past the force window a busy Leader gets the reasons steered in;
        # the hand-off is an external effect, recorded by record_steered once it happened.
        return WakeupDispatch("force", busy.turn_id, wakeup.reasons, wakeup.request_count)
    # wakeups.dispatch: aggregation window passed, Leader idle: a Leader Turn starts.
    role_state = _task(draft, task_id).roles.get(LEADER)
    turn_id = turn_id_for(LEADER, (role_state.turns if role_state else 0) + 1)
    draft.emit_stream(
        WakeupDispatched(**fields, turn_id=turn_id, mode="started", cause="wakeups.dispatch")
    )
    draft.emit(
        TurnStarted(
            task_id=task_id,
            at=ctx.now,
            role=LEADER,
            turn_id=turn_id,
            reasons=wakeup.reasons,
            cause="wakeups.dispatch",
            pass_id=pass_id,
        )
    )
    return WakeupDispatch("dispatched", turn_id, wakeup.reasons)


def _resignal(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    wakeup: WakeupState,
    turn_id: str,
    pass_id: str | None,
) -> None:
    # The busy Turn is the re-signal's identity (yui): finding another Turn busy starts
    # the count, and its backoff, over at the first attempt, due at once.
    attempt = wakeup.busy_attempts if wakeup.busy_turn_id == turn_id else 0
    due = attempt == 0 or (wakeup.resignal_at is not None and wakeup.resignal_at <= ctx.now)
    if not due:
        return
    # wakeups.resignal (yui): a wake that found the Leader busy is signalled again after
    # the delivery backoff, min(2000, base * 2**min(attempt, 3)) ms, as a delivery is
    # retried: `delivery_retry_limit` re-signals, and the pass the last one runs, finding
    # the Leader still busy, gives up (resignal_at None): only the force window is left.
    exhausted = attempt >= settings.delivery_retry_limit
    draft.emit_stream(
        WakeupFoundBusy(
            task_id=wakeup.task_id,
            at=ctx.now,
            turn_id=turn_id,
            attempt=attempt,
            resignal_at=None
            if exhausted
            else ctx.now + retry_delay_ms(settings.delivery_retry_base_ms, attempt),
            cause="wakeups.resignal",
            pass_id=pass_id,
        )
    )


def record_steered(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    turn_id: str,
    request_count: int,
    *,
    pass_id: str | None = None,
) -> bool:
    """Record that a forced wakeup's reasons were handed to the busy Leader Turn
    ``turn_id`` (after the hand-off happened). Records nothing, and returns
    ``False``, when the wakeup changed meanwhile (a later request joined it, or it
    was dispatched or dropped) or the Leader's Turn is another: the next pass hands
    off what is pending then."""
    _open(ctx, task_id)
    wakeup = pending_wakeup(draft, task_id)
    busy = active_turn(draft.get(task_id), LEADER)
    if wakeup is None or wakeup.request_count != request_count:
        return False
    if busy is None or busy.turn_id != turn_id:
        return False
    # wakeups.force: the reasons went into the busy Turn; the wakeup is cleared.
    draft.emit_stream(
        WakeupDispatched(
            task_id=task_id,
            at=ctx.now,
            reasons=wakeup.reasons,
            request_count=wakeup.request_count,
            first_requested_at=wakeup.first_requested_at,
            pass_id=pass_id,
            turn_id=turn_id,
            mode="steered",
            cause="wakeups.force",
        )
    )
    return True
