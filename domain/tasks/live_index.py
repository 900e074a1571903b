"""Indexes of live tasks that per-tick work reads instead of every task ever.

``world.indexes["live_order"]`` maps each live task to its submission sequence
number (a pass takes ready tasks in submission order); ``["task_seq"]`` is the
last number given. ``world.indexes["cancelling"]`` holds the live tasks with
cancellation intent (rule 6): while it is empty, no task has a cancelling
ancestor, and nothing walks up an owner chain. ``["live_priority"]`` maps each
live task submitted with a priority other than 0 (rule 19) to it, and is made only
once one is: a store that never used priorities orders its work as before. Each holds
only live tasks, as plain ids and ints, so they stay as small as the live work.
"""

from __future__ import annotations

from typing import Any

from ..world import World, register_indexer
from .events import AbortMarked, OutcomeHeld, TaskEnded, TaskEvent, TaskSubmitted
from .state import TaskState

LIVE_ORDER = "live_order"
TASK_SEQ = "task_seq"
CANCELLING = "cancelling"
LIVE_PRIORITY = "live_priority"


def index_live(world: World, event: TaskEvent, previous: Any, state: Any) -> None:
    """Keep :data:`LIVE_ORDER` and :data:`CANCELLING` current after a task event
    (``state`` ``None``: the task is gone from this world, as when a refused batch
    is undone)."""
    if not type(event).task_stream:
        return
    task_id = event.task_id
    order: dict[str, int] = world.indexes.setdefault(LIVE_ORDER, {})
    cancelling: set[str] = world.indexes.setdefault(CANCELLING, set())
    if isinstance(state, TaskState) and state.live:
        if task_id not in order:
            seq = world.indexes.get(TASK_SEQ, 0) + 1
            world.indexes[TASK_SEQ] = seq
            order[task_id] = seq
        if state.cancelling():
            cancelling.add(task_id)
        else:
            cancelling.discard(task_id)
        if state.priority:
            world.indexes.setdefault(LIVE_PRIORITY, {})[task_id] = state.priority
    else:
        order.pop(task_id, None)
        cancelling.discard(task_id)
        raised = world.indexes.get(LIVE_PRIORITY)
        if raised:
            raised.pop(task_id, None)


# A task turns live when submitted and stops at its end; only a mark or a held outcome
# changes cancellation intent (TaskState.cancelling).
register_indexer(
    index_live, restorable=True, reacts_to=(TaskSubmitted, OutcomeHeld, AbortMarked, TaskEnded)
)


def live_in_order(world: World) -> list[str]:
    """The live tasks in submission order."""
    order: dict[str, int] = world.indexes.get(LIVE_ORDER, {})
    if order.keys() == world.live:
        # The usual case: every live task numbered, each number once. Sorted by a C
        # lookup, on keys mostly in order already: a seventh of the general sort's time
        # at 2,560 live tasks, and a worker asks at every look, under the lock.
        return sorted(order, key=order.__getitem__)
    return sorted(world.live, key=lambda task_id: (order.get(task_id, 0), task_id))


def live_by_priority(world: World) -> list[str]:
    """The live tasks, higher priorities first (rule 19), each priority in submission
    order: the order a worker whose slots are scarce starts them in. Sorting the live
    work only, as :func:`live_in_order` does."""
    ordered = live_in_order(world)
    raised: dict[str, int] | None = world.indexes.get(LIVE_PRIORITY)
    if not raised:
        return ordered
    # Only the tasks of another priority than 0 are sorted again (the index holds those):
    # the normal ones keep their place, between the higher and the lower.
    order: dict[str, int] = world.indexes.get(LIVE_ORDER, {})
    ranked = sorted(raised, key=lambda task_id: (-raised[task_id], order.get(task_id, 0), task_id))
    above = [task_id for task_id in ranked if raised[task_id] > 0]
    below = [task_id for task_id in ranked if raised[task_id] < 0]
    return above + [task_id for task_id in ordered if task_id not in raised] + below


def priority_of(world: World, task_id: str) -> int:
    """A live task's priority (rule 19; 0 for one not live or of the normal priority)."""
    raised: dict[str, int] | None = world.indexes.get(LIVE_PRIORITY)
    return raised.get(task_id, 0) if raised else 0


def submission_rank(world: World, task_id: str) -> int:
    """A live task's submission sequence number (0 for one not live)."""
    order: dict[str, int] = world.indexes.get(LIVE_ORDER, {})
    return order.get(task_id, 0)


def any_cancelling(world: World) -> bool:
    """Whether some live task of ``world`` has cancellation intent."""
    return bool(world.indexes.get(CANCELLING))
