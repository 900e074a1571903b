"""What the subdomains hook into every :class:`~.world.World`: the indexes it keeps
(:func:`register_indexer`), when a stream is finished with (:func:`register_retirer`),
what compaction trims (:func:`register_compactor`), and how a dropped stream is
read back (:data:`Loader`). Importing a subdomain's module registers its hooks."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tasks.events import TaskEvent
    from .world import World

Loader = Callable[[str, bool, "int | None"], "tuple[Any, int] | None"]
"""Reads one stream back from the store: ``loader(stream_id, task_stream, below)`` is
the stream's state folded from its events of version < ``below`` (all, if ``None``)
with that version, or ``None`` for a stream with no such events."""

Retirer = Callable[["World", str, Any], "bool | None"]
"""Whether a non-task stream's state is finished with (``True``), still needed in
memory (``False``), or not of this retirer's kind (``None``)."""

Compactor = Callable[["World"], None]
"""Drops what an index keeps only for work that has ended (see :meth:`World.compact`)."""

Indexer = Callable[["World", "TaskEvent", Any, Any], None]
"""Keeps one index of a world current: ``fn(world, event, previous, state)``,
called after every event is folded (``previous``/``state`` are the stream's
states before and after)."""

INDEXERS: list[Indexer] = []
STREAM_INDEXERS: list[Indexer] = []
"""Indexers that only read events of streams other than tasks' own (not called for
task-stream events: most of a log)."""


RETIRERS: list[Retirer] = []
COMPACTORS: list[Compactor] = []


def register_retirer(retirer: Retirer) -> Retirer:
    """Say when a kind of non-task stream is finished with (:meth:`World.compact`)."""
    if retirer not in RETIRERS:
        RETIRERS.append(retirer)
    return retirer


def register_compactor(compactor: Compactor) -> Compactor:
    """Add a step to :meth:`World.compact` (an index dropping what ended work left)."""
    if compactor not in COMPACTORS:
        COMPACTORS.append(compactor)
    return compactor


RESTORABLE: set[Indexer] = set()
"""Indexers whose index of a task follows from the task's state alone (``state``
``None``: no such task), so that :meth:`World.restore_task` can put it back."""


def register_indexer(
    indexer: Indexer, *, task_streams: bool = True, restorable: bool = False
) -> Indexer:
    """Add an index every :class:`World` keeps (turns, ledgers register theirs);
    ``task_streams=False``: it ignores events of tasks' own streams, and is not
    called for them; ``restorable``: see :data:`RESTORABLE`."""
    registry = INDEXERS if task_streams else STREAM_INDEXERS
    if indexer not in registry:
        registry.append(indexer)
    if restorable:
        RESTORABLE.add(indexer)
    return indexer
