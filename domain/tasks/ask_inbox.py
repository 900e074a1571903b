"""The inbox: the open asks of a store (rules 30-32, :mod:`.asks`), oldest first.

``world.indexes["open_asks"]`` maps each live task with an open ask to the time it
asked: kept by :func:`index_asks` as every fold's (a scheduler's, a replay's, a
snapshot's), made with the first ask and dropped when none is open, so it holds as many
entries as there are open asks and the inbox reads it, never the history or every task.
:func:`inbox` orders it by (``asked_at``, task id), filters and pages it into
:class:`Ask` records.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument
from ..frozen import thawed
from ..world import World, register_indexer
from .asks import AskAnswered, AskClosed, AskOpened, open_ask
from .events import TaskEnded, TaskEvent
from .state import TaskState

OPEN_ASKS = "open_asks"


def index_asks(world: World, event: TaskEvent, previous: Any, state: Any) -> None:
    """Keep :data:`OPEN_ASKS` current after a task event (``state`` ``None``: the task
    is gone from this world, as when a refused batch is undone)."""
    if not type(event).task_stream:
        return  # another stream's event (a run's): no task's asks changed
    asked = open_ask(state) if isinstance(state, TaskState) and state.live else None
    index: dict[str, float] | None = world.indexes.get(OPEN_ASKS)
    if asked is not None:
        if index is None:
            index = world.indexes[OPEN_ASKS] = {}
        index[event.task_id] = asked.asked_at
    elif index is not None:
        index.pop(event.task_id, None)
        if not index:  # none open: as if there never was one (a snapshot, a replay agree)
            del world.indexes[OPEN_ASKS]


# Only an ask's own events open or close one, and only its task's end drops it.
register_indexer(
    index_asks, restorable=True, reacts_to=(AskOpened, AskAnswered, AskClosed, TaskEnded)
)


def implied_open_asks(world: World) -> dict[str, float]:
    """:data:`OPEN_ASKS` as the world's live tasks imply it (a snapshot's check)."""
    implied: dict[str, float] = {}
    for task_id in world.live:
        asked = open_ask(world.tasks[task_id])
        if asked is not None:
            implied[task_id] = asked.asked_at
    return implied


@dataclass(frozen=True, slots=True)
class Ask:
    """An open ask, as the inbox lists it: the asking task and its ``kind``, the
    ``topic``, what it asks (``request``, a plain copy), when it asked and until when
    (``asked_at``, ``deadline``: the scheduler clock's ms; ``None``, no deadline) and who
    may answer (``assignees``; empty: anyone)."""

    task_id: str
    topic: str
    request: Any
    asked_at: float
    deadline: float | None
    assignees: tuple[str, ...]
    kind: str

    def to_dict(self) -> dict[str, Any]:
        """The ask as plain JSON-ready data."""
        return {
            "task_id": self.task_id,
            "kind": self.kind,
            "topic": self.topic,
            "request": self.request,
            "asked_at": self.asked_at,
            "deadline": self.deadline,
            "assignees": list(self.assignees),
        }


def inbox(
    world: World,
    now: float,
    *,
    topic: str | None = None,
    assignee: str | None = None,
    kind: str | None = None,
    limit: int = 100,
    after: Ask | None = None,
) -> list[Ask]:
    """The open asks of ``world`` at ``now``, oldest first (by ``asked_at``, then task
    id): on ``topic``, answerable by ``assignee`` (an ask without assignees is anyone's),
    of tasks of ``kind``; ``limit`` at most, after the ask ``after`` (the last of the
    previous page). An ask past its deadline is not listed: it can no longer be
    answered (rule 30)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgument(f"limit must be an int >= 1, not {limit!r}")
    if after is not None and not isinstance(after, Ask):
        raise InvalidArgument(f"after must be an Ask the inbox listed, or None, not {after!r}")
    for name, value in (("topic", topic), ("assignee", assignee), ("kind", kind)):
        if value is not None and not isinstance(value, str):
            raise InvalidArgument(f"{name} must be a string or None, not {value!r}")
    index: dict[str, float] = world.indexes.get(OPEN_ASKS, {})
    order = sorted((asked_at, task_id) for task_id, asked_at in index.items())
    start = 0 if after is None else bisect.bisect_right(order, (after.asked_at, after.task_id))
    found: list[Ask] = []
    for _, task_id in order[start:]:
        task = world.tasks[task_id]
        asked = open_ask(task)
        if asked is None or (asked.deadline is not None and now >= asked.deadline):
            continue
        if topic is not None and asked.topic != topic:
            continue
        if kind is not None and task.kind != kind:
            continue
        if assignee is not None and asked.assignees and assignee not in asked.assignees:
            continue
        found.append(
            Ask(
                task_id,
                asked.topic,
                thawed(asked.request),
                asked.asked_at,
                asked.deadline,
                asked.assignees,
                task.kind,
            )
        )
        if len(found) == limit:
            break
    return found


__all__ = ["OPEN_ASKS", "Ask", "implied_open_asks", "inbox", "index_asks"]
