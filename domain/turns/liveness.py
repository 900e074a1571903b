"""Liveness of Turns: a destructive observation (an ``exit`` or a ``stall`` the
runtime reported) is recorded for the next pass to judge, and a pass's Turn step folds
due completions first, then ends Turns ``exited`` or ``stalled`` on those
observations, or ``stalled`` once they show no progress for the stall window
(``turns.stall_window``), after a stall diagnostic recorded once they showed none for
the diagnostic window (``turns.stall_diagnostic``).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal

from ..tasks.context import Context
from ..tasks.guards import not_closing as _open
from ..tasks.state import TaskState
from ..tasks.validation import require_task as _task
from ..world import Draft
from .checks import _not_terminal, _turn_id, active_turn, check_role
from .events import (
    TurnExited,
    TurnExitObserved,
    TurnObservationDropped,
    TurnStallDiagnosed,
    TurnStalled,
    TurnStallObserved,
)
from .refusals import TurnRuleViolation
from .rules import _fold_due_completion
from .settings import TurnSettings
from .state import ObservationKind, TurnState, TurnStatus


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
        # turns.stall_window: no progress for the stall window ends the Turn stalled, once
        # its stall diagnostic was recorded (turns.stall_diagnostic comes first).
        elif ctx.now - turn.progress_at >= settings.stall_window_ms and turn.stall_diagnosed:
            draft.emit(
                TurnStalled(**base, progress_at=turn.progress_at, cause="turns.stall_window")
            )
            ended[name] = "stalled"
    return ended


def stall_candidates(
    task: TaskState | None, now: float, settings: TurnSettings, roles: Collection[str] | None
) -> list[TurnState]:
    """The active Turns of ``task`` due a stall diagnostic: no progress for the
    diagnostic window, none recorded since, and no completion due (it wins)."""
    if task is None or task.status == "terminal":
        return []
    return [
        role.active
        for name, role in task.roles.items()
        if (roles is None or name in roles)
        and role.active is not None
        and not role.active.stall_diagnosed
        and not role.active.completion_due(now)
        and now - role.active.progress_at >= settings.diagnostic_after_ms
    ]


def record_stall_diagnostic(
    draft: Draft,
    ctx: Context,
    settings: TurnSettings,
    task_id: str,
    role: str,
    turn_id: str,
    diagnostic: str | None,
    *,
    pass_id: str | None = None,
) -> bool:
    """Record the stall diagnostic of Turn ``turn_id`` (what the runtime said, if
    anything), if it is still due one. Returns whether it recorded it."""
    _open(ctx, task_id)
    task = _task(draft, task_id)
    if not any(t.turn_id == turn_id for t in stall_candidates(task, ctx.now, settings, [role])):
        return False
    turn = active_turn(task, role)
    assert turn is not None
    # turns.stall_diagnostic (yui): a Turn idle for the diagnostic window is diagnosed
    # before the stall window may declare it stalled.
    draft.emit(
        TurnStallDiagnosed(
            task_id=task_id,
            at=ctx.now,
            role=role,
            turn_id=turn_id,
            progress_at=turn.progress_at,
            diagnostic=diagnostic,
            cause="turns.stall_diagnostic",
            pass_id=pass_id,
        )
    )
    return True
