"""The rules of Turns, Leader wakeups and runtime cleanups (SPEC.md section 2), and their folds.

``decide`` functions here take a :class:`~.world.Draft`, a
:class:`~.decide.Context` (``ctx.now`` is the clock) and the
:class:`~.turns.TurnSettings`, check the rules of one command and emit its
events, or raise a refusal (:class:`~.turns.TurnRuleViolation` naming the rule,
:class:`~.errors.RuleViolation` for rules 2 and 4). A refused command appends
nothing, with one exception the issue asks for: a stale completion is recorded
as refused (:class:`~.turns.TurnCompletionRefused`) and never applied.

Section 2's rules, each applied in one place below, with its name above the
branch that applies it:

- ``turns.one_active``: at most one active Turn per (task, role).
- ``turns.stale_completion``: a completion naming a Turn other than the active
  one is refused, recorded, never applied.
- ``turns.completion_due`` / ``turns.completion_wins``: due completions are
  folded before anything else looks at a Turn, liveness included; a destructive
  observation of a Turn a due completion ended is dropped.
- ``turns.delivery_retry`` / ``turns.delivery_exhausted``: retryable delivery
  outcomes are retried after ``min(2000, base * 2**min(attempt, 3))`` ms up to
  the limit; then a delivery failure is recorded and the Turn ends ``failed``.
- ``turns.stall_window``: a Turn with no progress for the stall window ends
  ``stalled``.
- ``cleanup.completed_task``: a completed task's roles owe a runtime cleanup.
- ``wakeups.aggregate``, ``wakeups.dispatch``, ``wakeups.force``,
  ``wakeups.task_done``: the pending Leader wakeup.

The folds (``@evolves`` for Turn events on the task's stream,
``@evolves_stream`` for the wakeup and cleanup streams) never read the clock.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..errors import InvalidArgument, RuleViolation
from ..tasks.context import Context
from ..tasks.evolve import InvalidTransition, evolves, evolves_stream
from ..tasks.guards import not_closing as _open
from ..tasks.state import TaskState
from ..tasks.validation import require_task as _task
from ..world import Draft, World
from .state import (
    DELIVERY_OUTCOMES,
    LEADER,
    RETRYABLE_OUTCOMES,
    SETTLED_OUTCOMES,
    CleanupState,
    Obligation,
    ObservationKind,
    RoleState,
    RuntimeCleanupFailed,
    RuntimeCleanupRequired,
    RuntimeCleanupSettled,
    TurnCompleted,
    TurnCompletionRefused,
    TurnCompletionReported,
    TurnDelivered,
    TurnDeliveryFailed,
    TurnDeliveryHeld,
    TurnDeliveryRetryScheduled,
    TurnEvent,
    TurnExited,
    TurnExitObserved,
    TurnFailed,
    TurnObservationDropped,
    TurnProgressed,
    TurnRuleViolation,
    TurnSettings,
    TurnStalled,
    TurnStallObserved,
    TurnStarted,
    TurnState,
    TurnStatus,
    WakeupAggregated,
    WakeupDispatched,
    WakeupDropped,
    WakeupRequested,
    WakeupState,
    cleanup_stream_id,
    retry_delay_ms,
    turn_id_for,
    wakeup_stream_id,
)

# ─── results ────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class DeliveryDecision:
    """What a delivery outcome did to its Turn.

    ``status``: ``delivered`` (the Turn moved to ``delivered``), ``retry``
    (tried again at ``retry_at``), ``held`` (not retried), ``failed`` (retries
    exhausted: the Turn ended ``failed``), ``completed`` (a due completion won
    first) or ``unchanged`` (already delivered; nothing recorded).
    """

    status: Literal["delivered", "retry", "held", "failed", "completed", "unchanged"]
    outcome: str
    attempt: int = 0
    retry_at: float | None = None


@dataclass(frozen=True, slots=True)
class WakeupDispatch:
    """What the wakeup step did for one task.

    ``status``: ``dispatched`` (a Leader Turn ``turn_id`` started), ``steered``
    (the force window passed while the Leader was busy: ``reasons`` go into its
    Turn ``turn_id``), ``dropped`` (the task decided its outcome), ``aggregating``
    (the aggregation window is still open), ``busy`` (the Leader's Turn
    ``turn_id`` is active, the force window still open) or ``none`` (no wakeup
    pending).
    """

    status: Literal["dispatched", "steered", "dropped", "aggregating", "busy", "none"]
    turn_id: str | None = None
    reasons: tuple[str, ...] = ()


CompletionStatus = Literal["completed", "pending", "stale"]
WakeupRequestStatus = Literal["requested", "aggregated", "dropped"]


# ─── helpers ────────────────────────────────────────────────────────────────


def _not_terminal(task: TaskState, what: str) -> None:
    # 4. Terminal is absorbing: nothing is recorded on a terminal task's stream.
    if task.status == "terminal":
        raise RuleViolation(
            4, f"the task is terminal; {what} cannot be recorded on it", task_id=task.id
        )


def check_role(role: object, task_id: str | None = None) -> str:
    """A role name: a non-empty string without surrounding whitespace or NUL."""
    if not isinstance(role, str) or not role or role != role.strip() or "\x00" in role:
        raise InvalidArgument(
            f"a role must be a non-empty name without surrounding whitespace, not {role!r}",
            task_id=task_id,
        )
    return role


def _turn_id(turn_id: object, task_id: str) -> str:
    if not isinstance(turn_id, str) or not turn_id:
        raise InvalidArgument(
            f"a Turn id must be a non-empty string, not {turn_id!r}", task_id=task_id
        )
    return turn_id


def _time(value: object, what: str, task_id: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
    ):
        raise InvalidArgument(
            f"{what} must be a finite time >= 0 in ms, not {value!r}", task_id=task_id
        )
    return value


def active_turn(task: TaskState | None, role: str) -> TurnState | None:
    """The role's active Turn, or ``None``."""
    if task is None:
        return None
    role_state = task.roles.get(role)
    return role_state.active if role_state is not None else None


def outcome_decided(task: TaskState) -> bool:
    """Whether the task holds or reached its outcome (``completing`` or ``terminal``)."""
    return task.status in ("completing", "terminal")


def completed(task: TaskState) -> bool:
    """Whether the task's decided outcome is ``completed`` (held or terminal)."""
    return task.outcome is not None and task.outcome.status == "completed"


def _observations(turn: TurnState) -> list[ObservationKind]:
    kinds: list[ObservationKind] = []
    if turn.exit_observed_at is not None:
        kinds.append("exit")
    if turn.stall_observed_at is not None:
        kinds.append("stall")
    return kinds


def _fold_due_completion(
    draft: Draft, ctx: Context, task_id: str, role: str, pass_id: str | None
) -> bool:
    """Fold the role's due completion, if it has one; returns whether it did."""
    turn = active_turn(draft.get(task_id), role)
    if turn is None or not turn.completion_due(ctx.now):
        return False
    # turns.completion_due: a due completion is folded before anything else looks at the Turn.
    draft.emit(
        TurnCompleted(
            task_id=task_id,
            at=ctx.now,
            role=role,
            turn_id=turn.turn_id,
            cause="turns.completion_due",
            pass_id=pass_id,
        )
    )
    # turns.completion_wins: the destructive observations of that Turn are dropped.
    for kind in _observations(turn):
        draft.emit(
            TurnObservationDropped(
                task_id=task_id,
                at=ctx.now,
                role=role,
                turn_id=turn.turn_id,
                kind=kind,
                cause="turns.completion_wins",
                pass_id=pass_id,
            )
        )
    return True


# ─── Turn commands ──────────────────────────────────────────────────────────


def start_turn(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    role: str,
    *,
    reasons: Iterable[str] = (),
    cause: str | None = None,
    pass_id: str | None = None,
) -> str:
    """Start a Turn of ``role``; returns its id (``<role>.<n>``)."""
    _open(ctx, task_id)
    task = _task(draft, task_id)
    check_role(role, task_id)
    _not_terminal(task, "a Turn")
    if task.status == "completing":
        raise TurnRuleViolation(
            "turns.outcome_decided",
            f"the task holds its outcome; no Turn of {role!r} starts on it",
            task_id=task_id,
        )
    _fold_due_completion(draft, ctx, task_id, role, pass_id)
    task = _task(draft, task_id)
    role_state = task.roles.get(role)
    # turns.one_active: at most one active Turn per (task, role).
    if role_state is not None and role_state.active is not None:
        raise TurnRuleViolation(
            "turns.one_active",
            f"role {role!r} already has an active Turn, {role_state.active.turn_id}; "
            "complete, fail or observe its end first",
            task_id=task_id,
        )
    turn_id = turn_id_for(role, (role_state.turns if role_state else 0) + 1)
    draft.emit(
        TurnStarted(
            task_id=task_id,
            at=ctx.now,
            role=role,
            turn_id=turn_id,
            reasons=tuple(reasons),
            cause=cause,
            pass_id=pass_id,
        )
    )
    return turn_id


def _named_active_turn(draft: Draft, task_id: str, role: str, turn_id: str) -> TurnState:
    turn = active_turn(draft.get(task_id), role)
    if turn is None or turn.turn_id != turn_id:
        active = f"its active Turn is {turn.turn_id}" if turn else "it has no active Turn"
        raise TurnRuleViolation(
            "turns.not_active",
            f"Turn {turn_id} is not the active Turn of role {role!r} ({active})",
            task_id=task_id,
        )
    return turn


def deliver_turn(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    role: str,
    turn_id: str,
    outcome: str,
    *,
    pass_id: str | None = None,
) -> DeliveryDecision:
    """Record the outcome of one attempt to deliver the active Turn to its runtime."""
    _open(ctx, task_id)
    task = _task(draft, task_id)
    check_role(role, task_id)
    _turn_id(turn_id, task_id)
    if outcome not in DELIVERY_OUTCOMES:
        raise InvalidArgument(
            f"unknown delivery outcome {outcome!r}; expected one of {', '.join(DELIVERY_OUTCOMES)}",
            task_id=task_id,
        )
    _not_terminal(task, "a delivery")
    turn = _named_active_turn(draft, task_id, role, turn_id)
    fields: dict[str, Any] = {
        "task_id": task_id,
        "at": ctx.now,
        "role": role,
        "turn_id": turn_id,
        "outcome": outcome,
        "pass_id": pass_id,
    }
    if turn.status == "delivered":
        if outcome in SETTLED_OUTCOMES:
            return DeliveryDecision("unchanged", outcome)
        raise TurnRuleViolation(
            "turns.already_delivered",
            f"Turn {turn_id} was already delivered; a later {outcome!r} changes nothing",
            task_id=task_id,
        )
    if outcome in SETTLED_OUTCOMES:
        draft.emit(TurnDelivered(**fields))
        return DeliveryDecision("delivered", outcome)
    if outcome in RETRYABLE_OUTCOMES:
        attempt = turn.delivery_attempts
        if attempt >= settings.delivery_retry_limit:
            # turns.completion_wins: a due completion beats the failure exhaustion would record.
            if _fold_due_completion(draft, ctx, task_id, role, pass_id):
                return DeliveryDecision("completed", outcome, attempt)
            # turns.delivery_exhausted: record the delivery failure; the Turn ends failed.
            draft.emit(
                TurnDeliveryFailed(**fields, attempts=attempt + 1, cause="turns.delivery_exhausted")
            )
            draft.emit(
                TurnFailed(
                    task_id=task_id,
                    at=ctx.now,
                    role=role,
                    turn_id=turn_id,
                    reason="delivery_exhausted",
                    message=f"{attempt + 1} deliveries ended {outcome!r}",
                    cause="turns.delivery_exhausted",
                    pass_id=pass_id,
                )
            )
            return DeliveryDecision("failed", outcome, attempt)
        # turns.delivery_retry: try again after min(2000, base * 2**min(attempt, 3)) ms.
        retry_at = ctx.now + retry_delay_ms(settings.delivery_retry_base_ms, attempt)
        draft.emit(
            TurnDeliveryRetryScheduled(
                **fields, attempt=attempt, retry_at=retry_at, cause="turns.delivery_retry"
            )
        )
        return DeliveryDecision("retry", outcome, attempt, retry_at)
    draft.emit(TurnDeliveryHeld(**fields))
    return DeliveryDecision("held", outcome, turn.delivery_attempts)


def progress_turn(
    draft: Draft, ctx: Context, settings: TurnSettings, task_id: str, role: str, turn_id: str
) -> None:
    """The active Turn showed progress: its stall window starts again."""
    _open(ctx, task_id)
    task = _task(draft, task_id)
    check_role(role, task_id)
    _turn_id(turn_id, task_id)
    _not_terminal(task, "progress")
    _named_active_turn(draft, task_id, role, turn_id)
    draft.emit(TurnProgressed(task_id=task_id, at=ctx.now, role=role, turn_id=turn_id))


def complete_turn(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    role: str,
    turn_id: str,
    *,
    due_at: float | None = None,
    summary: str | None = None,
) -> CompletionStatus:
    """A completion of ``turn_id``: applied now (``completed``), kept until ``due_at``
    (``pending``, a pass folds it then), or recorded as refused (``stale``)."""
    _open(ctx, task_id)
    task = _task(draft, task_id)
    check_role(role, task_id)
    _turn_id(turn_id, task_id)
    if due_at is not None:
        _time(due_at, "due_at", task_id)
    _not_terminal(task, "a completion")
    turn = active_turn(task, role)
    if turn is not None and turn.turn_id != turn_id:
        # Another Turn's due completion is folded first; the stale check sees the result.
        _fold_due_completion(draft, ctx, task_id, role, None)
        turn = active_turn(draft.get(task_id), role)
    # turns.stale_completion: refused, recorded as refused, never applied.
    if turn is None or turn.turn_id != turn_id:
        draft.emit(
            TurnCompletionRefused(
                task_id=task_id,
                at=ctx.now,
                role=role,
                turn_id=turn_id,
                active_turn_id=turn.turn_id if turn is not None else None,
                cause="turns.stale_completion",
            )
        )
        return "stale"
    if due_at is not None and due_at > ctx.now:
        draft.emit(
            TurnCompletionReported(
                task_id=task_id, at=ctx.now, role=role, turn_id=turn_id, due_at=due_at
            )
        )
        return "pending"
    draft.emit(
        TurnCompleted(task_id=task_id, at=ctx.now, role=role, turn_id=turn_id, summary=summary)
    )
    for kind in _observations(turn):
        draft.emit(
            TurnObservationDropped(
                task_id=task_id,
                at=ctx.now,
                role=role,
                turn_id=turn_id,
                kind=kind,
                cause="turns.completion_wins",
            )
        )
    return "completed"


def fail_turn(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    role: str,
    turn_id: str,
    *,
    reason: str = "failed",
    message: str | None = None,
) -> None:
    """End the active Turn ``failed`` (the runtime reported a failure)."""
    _open(ctx, task_id)
    task = _task(draft, task_id)
    check_role(role, task_id)
    _turn_id(turn_id, task_id)
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidArgument(f"a failure reason must be a non-empty string, not {reason!r}")
    _not_terminal(task, "a failure")
    turn = _named_active_turn(draft, task_id, role, turn_id)
    # turns.completion_wins: a due completion is folded before the failure could apply.
    if turn.completion_due(ctx.now):
        raise TurnRuleViolation(
            "turns.completion_wins",
            f"a completion of Turn {turn_id} is due and wins over the failure; "
            "run a pass (or start the next Turn) to fold it",
            task_id=task_id,
        )
    draft.emit(
        TurnFailed(
            task_id=task_id, at=ctx.now, role=role, turn_id=turn_id, reason=reason, message=message
        )
    )


def observe(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    role: str,
    kind: ObservationKind,
    turn_id: str | None = None,
) -> Literal["observed", "dropped"]:
    """Record a destructive observation (``exit`` or ``stall``) of a Turn for the
    next pass to judge; ``turn_id`` ``None`` means the role's active Turn.

    An observation naming a Turn that is no longer active is dropped, and the
    drop recorded (``turns.not_active``).
    """
    _open(ctx, task_id)
    task = _task(draft, task_id)
    check_role(role, task_id)
    if turn_id is not None:
        _turn_id(turn_id, task_id)
    _not_terminal(task, f"an {kind} observation")
    turn = active_turn(task, role)
    if turn is None and turn_id is None:
        raise TurnRuleViolation(
            "turns.not_active", f"role {role!r} has no active Turn to observe", task_id=task_id
        )
    if turn is None or (turn_id is not None and turn.turn_id != turn_id):
        assert turn_id is not None
        draft.emit(
            TurnObservationDropped(
                task_id=task_id,
                at=ctx.now,
                role=role,
                turn_id=turn_id,
                kind=kind,
                cause="turns.not_active",
            )
        )
        return "dropped"
    already = turn.exit_observed_at if kind == "exit" else turn.stall_observed_at
    if already is None:
        event_type = TurnExitObserved if kind == "exit" else TurnStallObserved
        draft.emit(event_type(task_id=task_id, at=ctx.now, role=role, turn_id=turn.turn_id))
    return "observed"


def fold_turns(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    roles: Collection[str] | None = None,
    *,
    unsettled: Collection[str] = (),
    pass_id: str | None = None,
) -> dict[str, TurnStatus]:
    """A pass's Turn step for one task: due completions first, then liveness.

    Returns the roles whose active Turn this ended, with how. ``roles``
    limits it to those roles; Turns in ``unsettled`` (a ``delivery-uncertain``
    delivery in this pass) are exempt from exit liveness. A terminal task's
    Turns are frozen (rule 4) and left alone.
    """
    _open(ctx, task_id)
    task = draft.get(task_id)
    if task is None or task.status == "terminal":
        return {}
    names = [name for name in task.roles if roles is None or name in roles]
    ended: dict[str, TurnStatus] = {}
    # turns.completion_due: every due completion is folded before liveness looks.
    for name in names:
        if _fold_due_completion(draft, ctx, task_id, name, pass_id):
            ended[name] = "completed"
    for name in names:
        turn = active_turn(draft.get(task_id), name)
        if turn is None:
            continue
        base: dict[str, Any] = {
            "task_id": task_id,
            "at": ctx.now,
            "role": name,
            "turn_id": turn.turn_id,
            "pass_id": pass_id,
        }
        if turn.exit_observed_at is not None and turn.turn_id not in unsettled:
            draft.emit(TurnExited(**base, cause="turns.exit_observed"))
            ended[name] = "exited"
        elif turn.stall_observed_at is not None:
            draft.emit(
                TurnStalled(**base, progress_at=turn.progress_at, cause="turns.stall_observed")
            )
            ended[name] = "stalled"
        # turns.stall_window: no progress for the stall window ends the Turn stalled.
        elif ctx.now - turn.progress_at >= settings.stall_window_ms:
            draft.emit(
                TurnStalled(**base, progress_at=turn.progress_at, cause="turns.stall_window")
            )
            ended[name] = "stalled"
    return ended


def deliveries_due(
    task: TaskState | None, now: float, roles: Collection[str] | None
) -> list[TurnState]:
    """The active Turns of ``task`` a pass should try to deliver now."""
    if task is None or task.status == "terminal":
        return []
    return [
        role.active
        for name, role in task.roles.items()
        if (roles is None or name in roles)
        and role.active is not None
        and role.active.delivery_due(now)
    ]


# ─── runtime cleanup ────────────────────────────────────────────────────────


def cleanup_state(draft: Draft | World, task_id: str) -> CleanupState | None:
    """The cleanup obligations of a task's roles, or ``None`` if none were ever required."""
    stream_id = cleanup_stream_id(task_id)
    if isinstance(draft, Draft):
        state: CleanupState | None = draft.get_stream(stream_id)
    else:
        state = draft.streams.get(stream_id)
    return state


def require_cleanups(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    roles: Collection[str] | None = None,
    *,
    pass_id: str | None = None,
) -> list[str]:
    """Give each role of a completed task its runtime-cleanup obligation; returns
    the roles that got one now."""
    _open(ctx, task_id)
    task = draft.get(task_id)
    if task is None or not completed(task):
        return []
    state = cleanup_state(draft, task_id)
    known = state.obligations if state is not None else {}
    required: list[str] = []
    for name, role in task.roles.items():
        if (roles is not None and name not in roles) or name in known:
            continue
        # cleanup.completed_task: a completed task's roles owe a cleanup; a role with an
        # active Turn waits for it to end, unless the task is terminal (its Turns are frozen).
        if role.active is not None and task.status != "terminal":
            continue
        draft.emit_stream(
            RuntimeCleanupRequired(
                task_id=task_id,
                at=ctx.now,
                role=name,
                cause="cleanup.completed_task",
                pass_id=pass_id,
            )
        )
        required.append(name)
    return required


def settle_cleanup(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    role: str,
    *,
    error: str | None = None,
    pass_id: str | None = None,
) -> Literal["settled", "failed"]:
    """Settle a role's open cleanup obligation, or, given ``error``, record a failed
    attempt (the obligation stays open)."""
    _open(ctx, task_id)
    _task(draft, task_id)
    check_role(role, task_id)
    state = cleanup_state(draft, task_id)
    obligation = state.obligations.get(role) if state is not None else None
    if obligation is None or not obligation.open:
        raise TurnRuleViolation(
            "cleanup.no_obligation",
            f"role {role!r} has no open runtime-cleanup obligation",
            task_id=task_id,
        )
    if error is not None:
        draft.emit_stream(
            RuntimeCleanupFailed(
                task_id=task_id, at=ctx.now, role=role, error=str(error), pass_id=pass_id
            )
        )
        return "failed"
    draft.emit_stream(
        RuntimeCleanupSettled(task_id=task_id, at=ctx.now, role=role, pass_id=pass_id)
    )
    return "settled"


# ─── Leader wakeups ─────────────────────────────────────────────────────────


def pending_wakeup(source: Draft | World, task_id: str) -> WakeupState | None:
    """The task's pending Leader wakeup, or ``None``."""
    stream_id = wakeup_stream_id(task_id)
    if isinstance(source, Draft):
        state: WakeupState | None = source.get_stream(stream_id)
    else:
        state = source.streams.get(stream_id)
    return state


def wakeup_deadline(wakeup: WakeupState, leader_busy: bool, settings: TurnSettings) -> float:
    """When the wakeup is due: the end of its aggregation window, or, while the
    Leader is busy past that, the end of its force window."""
    aggregation_at = wakeup.first_requested_at + settings.aggregation_window_ms
    if not leader_busy:
        return aggregation_at
    return wakeup.first_requested_at + settings.force_window_ms


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
            return WakeupDispatch("busy", busy.turn_id, wakeup.reasons)
        # wakeups.force: past the force window a busy Leader gets the reasons steered in.
        draft.emit_stream(
            WakeupDispatched(**fields, turn_id=busy.turn_id, mode="steered", cause="wakeups.force")
        )
        return WakeupDispatch("steered", busy.turn_id, wakeup.reasons)
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


# ─── folds: Turns on the task's stream ──────────────────────────────────────


def _role(state: TaskState, event: TurnEvent) -> RoleState:
    return state.roles.get(event.role) or RoleState(event.role)


def _with_role(state: TaskState, role: RoleState) -> TaskState:
    return replace(state, roles={**state.roles, role.name: role})


def _active(state: TaskState, event: TurnEvent) -> tuple[RoleState, TurnState]:
    role = state.roles.get(event.role)
    if role is None or role.active is None or role.active.turn_id != event.turn_id:
        raise InvalidTransition(
            f"task {state.id}: {type(event).__name__} for Turn {event.turn_id} of role "
            f"{event.role!r}, which is not its active Turn"
        )
    return role, role.active


def _update(state: TaskState, event: TurnEvent, **changes: Any) -> TaskState:
    role, turn = _active(state, event)
    return _with_role(state, replace(role, active=replace(turn, **changes)))


def _end(state: TaskState, event: TurnEvent, status: TurnStatus, reason: str | None) -> TaskState:
    role, turn = _active(state, event)
    ended = replace(
        turn,
        status=status,
        ended_at=event.at,
        end_reason=reason,
        retry_at=None,
        completion_due_at=None,
    )
    return _with_role(state, replace(role, active=None, last=ended))


@evolves(TurnStarted)
def _started(state: TaskState, event: TurnStarted) -> TaskState:
    role = _role(state, event)
    if role.active is not None:
        raise InvalidTransition(
            f"task {state.id}: Turn {event.turn_id} started while {role.active.turn_id} of "
            f"role {event.role!r} is active"
        )
    turn = TurnState(
        turn_id=event.turn_id,
        role=event.role,
        status="started",
        started_at=event.at,
        progress_at=event.at,
        cause=event.cause,
        reasons=event.reasons,
    )
    return _with_role(state, replace(role, turns=role.turns + 1, active=turn))


@evolves(TurnDelivered)
def _delivered(state: TaskState, event: TurnDelivered) -> TaskState:
    return _update(
        state,
        event,
        status="delivered",
        delivery_outcome=event.outcome,
        retry_at=None,
        delivery_held=False,
        progress_at=event.at,
    )


@evolves(TurnDeliveryRetryScheduled)
def _retry_scheduled(state: TaskState, event: TurnDeliveryRetryScheduled) -> TaskState:
    return _update(
        state,
        event,
        delivery_outcome=event.outcome,
        delivery_attempts=event.attempt + 1,
        retry_at=event.retry_at,
        delivery_held=False,
    )


@evolves(TurnDeliveryHeld)
def _delivery_held(state: TaskState, event: TurnDeliveryHeld) -> TaskState:
    return _update(state, event, delivery_outcome=event.outcome, retry_at=None, delivery_held=True)


@evolves(TurnDeliveryFailed)
def _delivery_failed(state: TaskState, event: TurnDeliveryFailed) -> TaskState:
    return _update(
        state,
        event,
        delivery_outcome=event.outcome,
        delivery_attempts=event.attempts,
        retry_at=None,
    )


@evolves(TurnProgressed)
def _progressed(state: TaskState, event: TurnProgressed) -> TaskState:
    _, turn = _active(state, event)
    # Progress never moves backwards; it also answers an earlier stall observation.
    return _update(
        state, event, progress_at=max(turn.progress_at, event.at), stall_observed_at=None
    )


@evolves(TurnCompletionReported)
def _completion_reported(state: TaskState, event: TurnCompletionReported) -> TaskState:
    return _update(state, event, completion_due_at=event.due_at)


@evolves(TurnCompleted)
def _completed(state: TaskState, event: TurnCompleted) -> TaskState:
    return _end(state, event, "completed", event.cause)


@evolves(TurnCompletionRefused)
def _completion_refused(state: TaskState, event: TurnCompletionRefused) -> TaskState:
    return state  # recorded for the audit; never applied


@evolves(TurnFailed)
def _failed(state: TaskState, event: TurnFailed) -> TaskState:
    return _end(state, event, "failed", event.reason)


@evolves(TurnExitObserved)
def _exit_observed(state: TaskState, event: TurnExitObserved) -> TaskState:
    return _update(state, event, exit_observed_at=event.at)


@evolves(TurnStallObserved)
def _stall_observed(state: TaskState, event: TurnStallObserved) -> TaskState:
    return _update(state, event, stall_observed_at=event.at)


@evolves(TurnExited)
def _exited(state: TaskState, event: TurnExited) -> TaskState:
    return _end(state, event, "exited", event.cause)


@evolves(TurnStalled)
def _stalled(state: TaskState, event: TurnStalled) -> TaskState:
    return _end(state, event, "stalled", event.cause)


@evolves(TurnObservationDropped)
def _observation_dropped(state: TaskState, event: TurnObservationDropped) -> TaskState:
    return state  # the Turn it named had already ended (or was never active)


# ─── folds: wakeup and cleanup streams ──────────────────────────────────────


@evolves_stream(WakeupRequested, WakeupAggregated, WakeupDispatched, WakeupDropped)
def _wakeup(state: WakeupState | None, event: Any) -> WakeupState | None:
    if isinstance(event, WakeupRequested):
        if state is not None:
            raise InvalidTransition(f"task {event.task_id}: a second pending wakeup requested")
        return WakeupState(event.task_id, (event.reason,), 1, event.at, event.at)
    if isinstance(event, WakeupAggregated):
        if state is None:
            raise InvalidTransition(f"task {event.task_id}: wakeup aggregated with none pending")
        reasons = state.reasons if event.reason in state.reasons else (*state.reasons, event.reason)
        return replace(
            state,
            reasons=reasons,
            request_count=state.request_count + 1,
            last_requested_at=event.at,
        )
    if isinstance(event, WakeupDispatched) and state is None:
        raise InvalidTransition(f"task {event.task_id}: wakeup dispatched with none pending")
    return None  # dispatched or dropped: nothing pending any more


@evolves_stream(RuntimeCleanupRequired, RuntimeCleanupFailed, RuntimeCleanupSettled)
def _cleanup(state: CleanupState | None, event: Any) -> CleanupState:
    current = state if state is not None else CleanupState(event.task_id)
    obligation = current.obligations.get(event.role)
    if isinstance(event, RuntimeCleanupRequired):
        if obligation is not None:
            raise InvalidTransition(
                f"task {event.task_id}: a second cleanup obligation for role {event.role!r}"
            )
        obligation = Obligation(event.role, event.at)
    elif obligation is None or not obligation.open:
        raise InvalidTransition(
            f"task {event.task_id}: {type(event).__name__} without an open obligation of "
            f"role {event.role!r}"
        )
    elif isinstance(event, RuntimeCleanupFailed):
        obligation = replace(obligation, failures=obligation.failures + 1, last_error=event.error)
    else:
        obligation = replace(obligation, settled_at=event.at)
    return CleanupState(current.task_id, {**current.obligations, event.role: obligation})
