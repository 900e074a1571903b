"""Idempotent submits (rule 18): ``submit(..., key=K)`` is one task per key and store.

The rule (``domain/tasks/keys.py``, applied in ``tasks/starting.py:submit``) gives a
key's first submission a stream of its own, ``key:K``, written in the same append as
the task, and makes a later submission with the key that task, appending nothing.
What the service adds is the race: two processes submitting K at once may both decide
before either appends (PostgreSQL's writers can; SQLite's take turns, so the second
decides on the first's). Both write version 1 of ``key:K``; the store's version check
takes one append and refuses the other whole (:class:`~..errors.ConflictError`, or
:class:`~..errors.TaskIdTaken` when both named the same task id), leaving the loser's
world refreshed with the winner's claim, whose task the loser then returns: each caller
gets the one task's id, and the loser appended nothing.

Mixed into :class:`~..app.scheduler.Scheduler` as :class:`KeyCommands`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConflictError, TaskIdTaken
from ..tasks.keys import check_key, key_holder
from ..world import World


class KeyCommands:
    """:meth:`task_of_key`, and what ``submit`` and ``submit_owned`` do with a key."""

    world: World
    _lock: Any

    def task_of_key(self, key: str) -> str | None:
        """The id of the task idempotency key ``key`` names (rule 18), as this scheduler
        has folded the store (:meth:`refresh` first to see other processes' newest), or
        ``None`` when no submission used it. A key outlives its task's end: an ended
        task's key is read back from the store."""
        check_key(key, None)
        with self._lock:
            return key_holder(self.world, key)

    def _keyed_submission(self, task_id: str, key: str | None, decide: Callable[[], None]) -> str:
        """Run ``decide``, a submission of ``task_id`` with ``key``; the id of the task
        the key names after it (``task_id`` without a key, or for a new key)."""
        if key is None:
            decide()
            return task_id
        try:
            decide()
        except (ConflictError, TaskIdTaken) as error:
            return self._key_winner(key, error)
        return self.task_of_key(key) or task_id

    def _key_winner(self, key: str, error: Exception) -> str:
        """A keyed submission refused whole by the store (``error``), the world
        refreshed: the task of another writer's submission with the key, which came
        first; ``error`` is raised when there is none (one of this id, and no key)."""
        holder = self.task_of_key(key)
        if holder is None:
            raise error
        return holder
