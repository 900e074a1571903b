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

from ..tasks.events import TaskEvent
from ..tasks.evolve import evolve, evolve_stream
from ..tasks.state import TaskState


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


class Stream(BaseAggregate[str]):
    """A stream outside any task's own (a dispatch run, say): its events fold
    through :func:`~.evolve.evolve_stream`."""

    state: Any

    @dataclass(frozen=True)
    class Event(CanMutateAggregate[str]):
        """An envelope around one tasktrail event of a non-task stream."""

        originator_id: str
        originator_version: int
        timestamp: datetime
        fact: TaskEvent

        def apply(self, aggregate: Any) -> None:
            aggregate.state = evolve_stream(getattr(aggregate, "state", None), self.fact)

    @dataclass(frozen=True)
    class Started(Event, CanInitAggregate[str]):
        """The envelope of a stream's first event."""

        originator_topic: str

    def __init__(self) -> None:
        """State comes from the events' ``apply``."""


TASK_TOPIC = get_topic(Task)
STREAM_TOPIC = get_topic(Stream)


def envelope(fact: TaskEvent, version: int, timestamp: datetime) -> Any:
    """Wrap a tasktrail event for eventsourcing, as version ``version`` of its stream."""
    stream_id = fact.stream_id()
    if type(fact).task_stream:
        if version == 1:
            return Task.Submitted(
                originator_id=stream_id,
                originator_version=version,
                timestamp=timestamp,
                fact=fact,
                originator_topic=TASK_TOPIC,
            )
        return Task.Event(
            originator_id=stream_id, originator_version=version, timestamp=timestamp, fact=fact
        )
    if version == 1:
        return Stream.Started(
            originator_id=stream_id,
            originator_version=version,
            timestamp=timestamp,
            fact=fact,
            originator_topic=STREAM_TOPIC,
        )
    return Stream.Event(
        originator_id=stream_id, originator_version=version, timestamp=timestamp, fact=fact
    )
