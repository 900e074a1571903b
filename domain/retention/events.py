"""The events of a store's history acts (the Retention issue), each on the one stream
``history:acts`` (:data:`~..store.gaps.HISTORY_STREAM`), so that two acts decided on the
same log conflict on its version and one is refused whole.

:class:`HistoryArchived` says which finished task trees left the store for a segment
file, with the segment's seal and the blocks they were in the full log's tree
(:mod:`..store.gaps`); :class:`HistoryPruned` the same for trees deleted with no
segment (a retention policy with no archive folder); :class:`HistoryErased` which
values an erasure took out of a tree's events, with what each erased row keeps for the
proofs. :class:`TaskErased` is the erasure as each task of the tree shows it, on the
task's own ``erasure:<task>`` stream (``history`` and ``explain`` read it with one
indexed read). Folding an act changes no task: a world that folded the trees an
archive took keeps them until its next compaction drops them (they ended), and a
fold read across the archive holds them as a fold before the act did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..store.gaps import HISTORY_STREAM
from ..tasks.events import TaskEvent, register_event
from ..tasks.evolve import evolves_stream
from ..world import World, register_indexer, register_retirer

ERASURE_STREAM_PREFIX = "erasure:"


def erasure_stream_id(task_id: str) -> str:
    """The stream where task ``task_id`` records that its values were erased."""
    return ERASURE_STREAM_PREFIX + task_id


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryEvent(TaskEvent):
    """Base of the history acts: scheduler-wide (``task_id`` empty), on one stream."""

    task_stream: ClassVar[bool] = False

    actor: str | None = None
    why: str | None = None

    def stream_id(self) -> str:
        """The history acts' one stream."""
        return HISTORY_STREAM


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryArchived(HistoryEvent):
    """Finished trees moved to ``segment`` (a file name in the archive folder): its
    ``seal`` (the segment's own RFC 6962 root over its events, their count and first and
    last positions, the key id and a MAC when keyed), the ``trees`` (root task ids) and
    ``streams`` it took, its ``events``, and ``blocks``: ``[first_leaf, size, first,
    last, hash]`` of each block of the full log's tree its events filled."""

    command: ClassVar[str] = "archive"

    segment: str
    seal: Any
    trees: tuple[str, ...]
    streams: tuple[str, ...]
    events: int
    blocks: Any


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryPruned(HistoryEvent):
    """Finished trees deleted with no segment: what :class:`HistoryArchived` records,
    but ``seal`` says what was dropped, not where it went; ``verify`` knows the gap is
    meant and the seals taken before still verify through the blocks."""

    command: ClassVar[str] = "prune"

    seal: Any
    trees: tuple[str, ...]
    streams: tuple[str, ...]
    events: int
    blocks: Any


@dataclass(frozen=True, kw_only=True, slots=True)
class HistoryErased(HistoryEvent):
    """Values erased from the events of the tree of ``tree`` (its ``tasks``): each
    entry ``[position, stream, version, digest, leaf, sha256 of the row now, fields]``
    names an erased row, what its chain and the full log's tree keep of it and which
    fields lost their values; ``segment``: the segment that held the tree, if archived."""

    command: ClassVar[str] = "erase"

    tree: str
    tasks: tuple[str, ...]
    entries: Any
    segment: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskErased(TaskEvent):
    """The values of task ``task_id``'s tree were erased (by ``actor``, for ``why``):
    ``events`` of its own streams lost values; ``tree``: the tree's root."""

    task_stream: ClassVar[bool] = False
    command: ClassVar[str] = "erase"

    tree: str
    events: int
    actor: str | None = None
    why: str | None = None

    def stream_id(self) -> str:
        """The task's erasure stream."""
        return erasure_stream_id(self.task_id)


HISTORY_EVENT_TYPES = (HistoryArchived, HistoryPruned, HistoryErased, TaskErased)
for _cls in HISTORY_EVENT_TYPES:
    register_event(_cls)


@evolves_stream(HistoryArchived, HistoryPruned, HistoryErased, TaskErased)
def _acts(state: int | None, event: TaskEvent) -> int:
    """A history stream's state: how many acts it holds (what the acts took is the
    log's to say, not memory's)."""
    return (state or 0) + 1


def _retired(world: World, stream_id: str, state: Any) -> bool | None:
    """Nothing live reads these streams: they leave memory at the next compaction."""
    if stream_id == HISTORY_STREAM or stream_id.startswith(ERASURE_STREAM_PREFIX):
        return True
    return None


register_retirer(_retired)


def forget_erased(world: World, event: TaskEvent, previous: Any, state: Any) -> None:
    """A world that reads ended tasks back from its store (a scheduler's, a projector's)
    drops the erased tree's tasks it still holds, so the next read of one is the
    erased one; a full fold (no loader) folded the erased events already."""
    if isinstance(event, HistoryErased) and world.loader is not None:
        for task_id in event.tasks:
            task = world.tasks.get(task_id)
            if task is not None and not task.live:
                del world.tasks[task_id]


register_indexer(forget_erased, task_streams=False, reacts_to=(HistoryErased,))
