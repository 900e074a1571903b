"""One event read back from a log, with where it was: :class:`Recorded`."""

from __future__ import annotations

from dataclasses import dataclass

from ..tasks.events import TaskEvent


@dataclass(frozen=True, slots=True)
class Recorded:
    """One event read back from a store, with its position in the store's log."""

    position: int
    event: TaskEvent
    originator_version: int
