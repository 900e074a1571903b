"""The rules of a Turn's life (SPEC.md section 2): start one (``turns.one_active``,
``turns.outcome_decided``), report its progress, complete it or fail it. A completion
naming a Turn other than the active one is refused, recorded as refused and never
applied (``turns.stale_completion``); a completion due later is folded once due,
before anything else looks at the Turn (``turns.completion_due``), and wins over the
Turn's exit and stall observations (``turns.completion_wins``). Like every rule module
here, a ``decide`` function takes a ``Draft``, a ``Context`` (``ctx.now`` is the
clock) and the :class:`~.settings.TurnSettings`, and emits its events or raises a
refusal that appends nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from ..errors import InvalidArgument
from ..tasks.context import Context
from ..tasks.guards import not_closing as _open
from ..tasks.validation import require_task as _task
from ..world import Draft
from .checks import _named_active_turn, _not_terminal, _time, _turn_id, active_turn, check_role
from .events import (
    TurnCompleted,
    TurnCompletionRefused,
    TurnCompletionReported,
    TurnFailed,
    TurnObservationDropped,
    TurnProgressed,
    TurnStarted,
)
from .refusals import TurnRuleViolation
from .settings import TurnSettings
from .state import ObservationKind, TurnState, turn_id_for

CompletionStatus = Literal["completed", "pending", "stale"]


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
