"""The checks and reads section 2's commands share: rule 4 (nothing is recorded on a
terminal task), well-formed roles, Turn ids and times, and a role's active Turn
(``turns.not_active`` when a command names another one).
"""

from __future__ import annotations

import math

from ..errors import InvalidArgument, RuleViolation
from ..tasks.state import TaskState
from ..world import Draft
from .refusals import TurnRuleViolation
from .state import TurnState


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
