"""How the events of a task's runtime-cleanup obligations (its stream
``cleanup:<task id>``) fold into its :class:`~.state.CleanupState`, never reading the
clock: required (the role's next obligation), claimed by a worker, failed (still
open), settled. Importing this module registers the fold (:mod:`.folds` does).
"""

from __future__ import annotations

from typing import Any

from ..frozen import FrozenDict
from ..tasks.copies import copier, maker
from ..tasks.evolve import InvalidTransition, evolves_stream
from .events import (
    RuntimeCleanupClaimed,
    RuntimeCleanupFailed,
    RuntimeCleanupRequired,
    RuntimeCleanupSettled,
)
from .state import CleanupState, Obligation

# As in .folds: new states and copies without a frozen __init__'s cost.
_copy_obligation = copier(Obligation)
_new_cleanup, _new_obligation = maker(CleanupState), maker(Obligation)


@evolves_stream(
    RuntimeCleanupRequired, RuntimeCleanupClaimed, RuntimeCleanupFailed, RuntimeCleanupSettled
)
def fold_cleanup(state: CleanupState | None, event: Any) -> CleanupState:
    """The task's obligations after ``event`` (``state`` is ``None`` before its first)."""
    current = state if state is not None else _new_cleanup(event.task_id)
    obligation = current.obligations.get(event.role)
    if isinstance(event, RuntimeCleanupRequired):
        if obligation is not None and obligation.open:
            raise InvalidTransition(
                f"task {event.task_id}: a second open cleanup obligation for role {event.role!r}"
            )
        # A settled one is replaced by the role's next.
        number = obligation.number + 1 if obligation is not None else 1
        obligation = _new_obligation(event.role, event.at, number=number)
    elif obligation is None or not obligation.open:
        raise InvalidTransition(
            f"task {event.task_id}: {type(event).__name__} without an open obligation of "
            f"role {event.role!r}"
        )
    elif isinstance(event, RuntimeCleanupClaimed):
        obligation = _copy_obligation(obligation, claimed_by=event.worker)
    elif isinstance(event, RuntimeCleanupFailed):
        obligation = _copy_obligation(
            obligation, failures=obligation.failures + 1, last_error=event.error
        )
    else:
        obligation = _copy_obligation(obligation, settled_at=event.at)
    obligations = FrozenDict({**current.obligations, event.role: obligation})  # read-only
    return _new_cleanup(current.task_id, obligations)
