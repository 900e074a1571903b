"""The Task aggregate on eventsourcing: its events apply through ``evolve``.

A stored event is one tasktrail event (``fact``) in an eventsourcing envelope
that adds the stream id, the version and the recording ``timestamp``. The
aggregate's state is exactly the :class:`~.state.TaskState` that
:func:`~.evolve.evolve` folds, so ``Scheduler.task(id)`` and
``repository.get(id).state`` agree by construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventsourcing.domain import BaseAggregate, CanInitAggregate, CanMutateAggregate
from eventsourcing.utils import get_topic

from .events import TaskEvent, TaskSubmitted
from .evolve import evolve
from .state import TaskState


class Task(BaseAggregate[str]):
    """One task's event stream, as an eventsourcing aggregate with a string id."""

    state: TaskState

    @dataclass(frozen=True)
    class Event(CanMutateAggregate[str]):
        """An envelope around one tasktrail event."""

        originator_id: str
        originator_version: int
        timestamp: datetime
        fact: TaskEvent

        def apply(self, aggregate: Any) -> None:
            aggregate.state = evolve(getattr(aggregate, "state", None), self.fact)

    @dataclass(frozen=True)
    class Submitted(Event, CanInitAggregate[str]):
        """The envelope of a task's first event (:class:`~.events.TaskSubmitted`)."""

        originator_topic: str

    def __init__(self) -> None:
        """State comes from the events' ``apply``; there is nothing else to set."""


TASK_TOPIC = get_topic(Task)


def envelope(fact: TaskEvent, version: int, timestamp: datetime) -> Task.Event:
    """Wrap a tasktrail event for eventsourcing, as version ``version`` of its task."""
    if type(fact) is TaskSubmitted:
        return Task.Submitted(
            originator_id=fact.task_id,
            originator_version=version,
            timestamp=timestamp,
            fact=fact,
            originator_topic=TASK_TOPIC,
        )
    return Task.Event(
        originator_id=fact.task_id,
        originator_version=version,
        timestamp=timestamp,
        fact=fact,
    )
