"""What the subdomains hook into every :class:`~.world.World`: the indexes it keeps
(:func:`register_indexer`), when a stream is finished with (:func:`register_retirer`),
what compaction trims (:func:`register_compactor`), and how a dropped stream is
read back (:data:`Loader`). Importing a subdomain's module registers its hooks."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tasks.events import TaskEvent

AnyWorld = Any
"""A :class:`~.world.World`: named, not imported, as the registry sits below the world
it is read by (``world.py`` imports this module, never the reverse)."""

Loader = Callable[[str, bool, "int | None"], "tuple[Any, int] | None"]
"""Reads one stream back from the store: ``loader(stream_id, task_stream, below)`` is
the stream's state folded from its events of version < ``below`` (all, if ``None``)
with that version, or ``None`` for a stream with no such events."""

Retirer = Callable[[AnyWorld, str, Any], "bool | None"]
"""Whether a non-task stream's state is finished with (``True``), still needed in
memory (``False``), or not of this retirer's kind (``None``)."""

Compactor = Callable[[AnyWorld], None]
"""Drops what an index keeps only for work that has ended (see :meth:`World.compact`)."""

Indexer = Callable[[AnyWorld, "TaskEvent", Any, Any], None]
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

REACTS: dict[Indexer, tuple[type, ...] | None] = {}
"""The event classes each indexer reacts to (subclasses included; ``None``: every
event of the streams it reads)."""

_DISPATCH: dict[type, tuple[Indexer, ...]] = {}
"""The indexers an event of each class calls, in registration order (stream indexers
first): filled per class on first use, emptied by each registration."""


def register_indexer(
    indexer: Indexer,
    *,
    task_streams: bool = True,
    restorable: bool = False,
    reacts_to: Iterable[type] | None = None,
) -> Indexer:
    """Add an index every :class:`World` keeps (turns, ledgers register theirs);
    ``task_streams=False``: it ignores events of tasks' own streams, and is not
    called for them; ``restorable``: see :data:`RESTORABLE`; ``reacts_to``: the only
    event classes (and their subclasses) whose events can change its index, the
    others do not call it (``None``: every event). An index must come out the same
    as if every event called it (``tests/test_fold_dispatch.py`` holds them to it)."""
    registry = INDEXERS if task_streams else STREAM_INDEXERS
    if indexer not in registry:
        registry.append(indexer)
    if restorable:
        RESTORABLE.add(indexer)
    REACTS[indexer] = tuple(reacts_to) if reacts_to is not None else None
    _DISPATCH.clear()
    return indexer


def indexers_for(event_class: type, *, every: bool = False) -> tuple[Indexer, ...]:
    """The indexers :meth:`World.apply` calls for an event of ``event_class``: the
    stream indexers (for an event of another stream than its task's), then the
    others, each only if it reacts to the class; ``every``: all of them, as if none
    declared what it reacts to (the slow path the dispatch is tested against)."""
    if not every:
        known = _DISPATCH.get(event_class)
        if known is not None:
            return known
    task_stream: bool = getattr(event_class, "task_stream", True)
    candidates = INDEXERS if task_stream else [*STREAM_INDEXERS, *INDEXERS]
    chosen = tuple(
        indexer for indexer in candidates if every or _reacts(REACTS.get(indexer), event_class)
    )
    if not every:
        _DISPATCH[event_class] = chosen
    return chosen


def _reacts(classes: tuple[type, ...] | None, event_class: type) -> bool:
    return classes is None or issubclass(event_class, classes)
