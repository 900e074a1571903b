"""The tasks a reader has not seen change: per-tick work that looks again only at them.

A worker asks after every task at each tick (its blocked reports, its wake): with a
thousand tasks queued and a few changing a tick, asking after all of them is most of
its time. A :class:`Changes` hands a :class:`~..world.World` a set that the fold adds
each task it changes to (``World.watchers``: every event of a task's stream, and a
task put back when a refused batch is undone), and gives the reader that set, emptied
for the next look. A world the reader has not seen yet (the scheduler took another:
a compacted copy, a snapshot) answers ``None``: look at every task once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..hooks import register_compactor

OVERFLOW_AT = 10_000
"""Changed tasks a reader may leave unread beyond twice the live ones: past that, a
world's compaction empties its set and the reader looks at every task once (a reader
that stopped looking costs no more memory than that)."""


class _Watch(set[str]):
    """A reader's set of changed tasks; ``overflowed``: emptied, look at every task."""

    overflowed = False


class Changes:
    """One reader's view of which tasks changed in the world it reads."""

    def __init__(self) -> None:
        self._world: Any = None
        self._changed = _Watch()

    def since(self, world: Any) -> set[str] | None:
        """The tasks that changed in ``world`` since the last call (under the lock the
        world is folded under), or ``None`` when ``world`` is not the one the last call
        saw, or too many changed unread: then every task is to be looked at."""
        if world is self._world and not self._changed.overflowed:
            changed = set(self._changed)
            self._changed.clear()
            return changed
        if self._world is not None:
            self.forget()
        self._world = world
        self._changed = _Watch()
        world.watchers.append(self._changed)
        return None

    def forget(self) -> None:
        """Stop watching the world (a reader that closes): its fold adds to no set of ours."""
        world, self._world = self._world, None
        if world is not None:
            world.watchers[:] = [w for w in world.watchers if w is not self._changed]


class Selected:
    """The live tasks of a world whose state passes ``test``, kept current from the
    world's changes: each look costs what changed since the last, not the live work."""

    def __init__(self, test: Callable[[Any], bool]) -> None:
        self._test = test
        self._changes = Changes()
        self.ids: set[str] = set()

    def of(self, world: Any) -> set[str]:
        """The live tasks of ``world`` that pass the test (under the world's lock)."""
        changed: Any = self._changes.since(world)
        if changed is None:
            self.ids, changed = set(), world.live
        ids, tasks, test = self.ids, world.tasks, self._test
        for task_id in changed:
            task = tasks.get(task_id)
            if task is not None and task.status != "terminal" and test(task):
                ids.add(task_id)
            else:
                ids.discard(task_id)
        return ids


@register_compactor
def _trim_unread(world: Any) -> None:
    """Empty the set of a reader that left too many changes unread (see OVERFLOW_AT)."""
    most = 2 * len(world.live) + OVERFLOW_AT
    for watch in world.watchers:
        if len(watch) > most and isinstance(watch, _Watch):
            watch.clear()
            watch.overflowed = True


__all__ = ["Changes", "Selected"]
