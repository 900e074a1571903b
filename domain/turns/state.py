"""The states section 2's events fold into, and the vocabulary of Turns: a Turn's
statuses and ids (``<role>.<n>``), :class:`TurnState` and :class:`RoleState` (a
task's roles, kept on its ``TaskState``), the pending :class:`WakeupState`, the
runtime-cleanup :class:`CleanupState` and, for controller passes, :class:`PassState`
and the armed :class:`TaskPassRetry`. :mod:`..tasks.state` imports this module, so it
must import nothing of ``tasks``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..frozen import EMPTY

# ─── vocabulary ─────────────────────────────────────────────────────────────

LEADER = "leader"
"""The role a Leader wakeup starts a Turn for."""

TurnStatus = Literal["started", "delivered", "completed", "failed", "exited", "stalled"]

ACTIVE_TURN_STATUSES: frozenset[str] = frozenset({"started", "delivered"})

ENDED_TURN_STATUSES: frozenset[str] = frozenset({"completed", "failed", "exited", "stalled"})

ObservationKind = Literal["exit", "stall"]


def turn_id_for(role: str, number: int) -> str:
    """The id of a role's ``number``-th Turn (1-based): ``<role>.<number>``.

    Ids are deterministic, so a replay names the same Turns, and unique within a
    task: the part after the last dot is the number, the rest the role.
    """
    return f"{role}.{number}"


# ─── Turns, wakeups and cleanups ────────────────────────────────────────────


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
    held_by_pass: str | None = None
    """The pass that recorded the hold (``None``: a command did): later passes offer
    the Turn for delivery again."""
    completion_due_at: float | None = None
    exit_observed_at: float | None = None
    stall_observed_at: float | None = None
    stall_diagnosed_at: float | None = None
    """When a stall diagnostic was recorded (it stands until the Turn shows progress)."""
    ended_at: float | None = None
    end_reason: str | None = None

    @property
    def active(self) -> bool:
        """``started`` or ``delivered``: the role's one open Turn."""
        return self.status in ACTIVE_TURN_STATUSES

    @property
    def stall_diagnosed(self) -> bool:
        """Whether a stall diagnostic was recorded since the Turn last showed progress."""
        return self.stall_diagnosed_at is not None and self.stall_diagnosed_at >= self.progress_at

    def completion_due(self, now: float) -> bool:
        """Whether a reported completion is due (``due_at <= now``)."""
        return self.completion_due_at is not None and self.completion_due_at <= now

    def delivery_due(self, now: float, pass_id: str | None = None) -> bool:
        """Whether pass ``pass_id`` should try to deliver it now: ``started``, and never
        tried, its retry due, or held (``writer-attached``, ``delivery-uncertain``) by
        another pass or a command (yui offers those again in every later pass)."""
        if self.status != "started":
            return False
        if self.delivery_held:
            return pass_id is not None and pass_id != self.held_by_pass
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
            "stall_diagnosed_at": self.stall_diagnosed_at,
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
    first request's time (kept) and the last one's; the Leader Turn a pass last found
    busy, how often passes found that Turn busy, and when it is signalled again
    (``None``: not before the force window)."""

    task_id: str
    reasons: tuple[str, ...]
    request_count: int
    first_requested_at: float
    last_requested_at: float
    busy_attempts: int = 0
    resignal_at: float | None = None
    busy_turn_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The wakeup as plain data."""
        out: dict[str, Any] = {
            "task_id": self.task_id,
            "reasons": list(self.reasons),
            "request_count": self.request_count,
            "first_requested_at": self.first_requested_at,
            "last_requested_at": self.last_requested_at,
        }
        if self.busy_turn_id is not None:
            out["busy_turn_id"] = self.busy_turn_id
        if self.busy_attempts:
            out["busy_attempts"] = self.busy_attempts
        if self.resignal_at is not None:
            out["resignal_at"] = self.resignal_at
        return out


@dataclass(frozen=True, slots=True)
class Obligation:
    """The runtime-cleanup obligation of one role (stopped, or of a completed task)."""

    role: str
    required_at: float
    settled_at: float | None = None
    failures: int = 0
    last_error: str | None = None
    number: int = 1
    """Which of the role's obligations this is (1 for its first): what tells a new
    obligation from the one it replaced, whatever the clock said."""
    claimed_by: str | None = None
    """The worker that last claimed it (``RuntimeCleanupClaimed``): while that worker's
    lease is current, no other worker asks its runtime to clean up the role."""

    @property
    def open(self) -> bool:
        """Not settled yet."""
        return self.settled_at is None


@dataclass(frozen=True, slots=True)
class CleanupState:
    """The runtime-cleanup obligations of a task's roles, by role (a read-only mapping:
    see :class:`~..frozen.FrozenDict`)."""

    task_id: str
    obligations: Mapping[str, Obligation] = EMPTY

    def open_roles(self) -> list[str]:
        """Roles whose runtime still waits for cleanup, in the order they were required."""
        return [role for role, ob in self.obligations.items() if ob.open]


# ─── controller passes ──────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class PassState:
    """One controller pass, as its events recorded it (``blocked``, ``deferred`` and
    ``failed`` are read-only mappings: see :class:`~..frozen.FrozenDict`)."""

    pass_id: str
    scope: str
    keys: tuple[str, ...]
    task_ids: tuple[str, ...]
    concurrency: int
    started_at: float
    retried: tuple[str, ...] = ()
    blocked: Mapping[str, str] = EMPTY
    deferred: Mapping[str, tuple[str, ...]] = EMPTY
    failed: Mapping[str, str] = EMPTY
    done: tuple[str, ...] = ()
    finished_at: float | None = None


@dataclass(frozen=True, slots=True)
class TaskPassRetry:
    """A task's armed task-pass retry: its keys, earlier retries, and when it is due."""

    task_id: str
    keys: tuple[str, ...]
    attempt: int
    retry_at: float
