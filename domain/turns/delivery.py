"""Delivering a Turn to its runtime: the six delivery outcomes and what each does to
the Turn (settled ones move it to ``delivered``; retryable ones are retried after
``min(2000, base * 2**min(attempt, 3))`` ms up to the limit, ``turns.delivery_retry``,
then a delivery failure is recorded and the Turn ends ``failed``,
``turns.delivery_exhausted``; held ones are not retried), and which Turns a pass
should try to deliver now.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import InvalidArgument
from ..tasks.context import Context
from ..tasks.guards import not_closing as _open
from ..tasks.state import TaskState
from ..tasks.validation import require_task as _task
from ..world import Draft
from .checks import _named_active_turn, _not_terminal, _turn_id, check_role
from .events import (
    TurnDelivered,
    TurnDeliveryFailed,
    TurnDeliveryHeld,
    TurnDeliveryRetryScheduled,
    TurnFailed,
)
from .refusals import TurnRuleViolation
from .rules import _fold_due_completion
from .settings import TurnSettings, retry_delay_ms
from .state import TurnState

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
"""Not retried on a timer: ``writer-attached`` waits for the writer to go,
``delivery-uncertain`` may have reached the runtime (exempt from exit liveness in
the pass that recorded it). Every later pass offers the Turn for delivery again
(yui); a held Turn makes no pass due by itself."""


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


def deliveries_due(
    task: TaskState | None,
    now: float,
    roles: Collection[str] | None,
    pass_id: str | None = None,
) -> list[TurnState]:
    """The active Turns of ``task`` pass ``pass_id`` should try to deliver now: never
    tried, retry due, or held by another pass (``turns.held_offered_again``), and no
    completion due (``turns.completion_due``: the pass folds it; the agent finished, so
    its input is not pushed again)."""
    if task is None or task.status == "terminal":
        return []
    return [
        role.active
        for name, role in task.roles.items()
        if (roles is None or name in roles)
        and role.active is not None
        and role.active.delivery_due(now, pass_id)
        and not role.active.completion_due(now)
    ]
