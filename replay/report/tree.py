"""One task's tree, read stream by stream: what ``report``, ``explain`` and ``trace``
of one task read instead of the whole log.

:func:`read_tree` reads the streams of a task's owners up to the root, itself and
everything it owns at any depth, plus the task streams of tasks the tree awaited
and the pass streams its events name. :func:`open_streams` opens any source (a
store, a path or URL, a JSONL export) as :class:`~.streams.Streams`, read-only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tasktrail.domain import Store, open_store
from tasktrail.domain.runs.identity import schedule_stream_id
from tasktrail.domain.store.store import Recorded
from tasktrail.domain.tasks.restart_limit import RESTART_LIMIT_STREAM
from tasktrail.domain.turns.events import cleanup_stream_id, wakeup_stream_id
from tasktrail.domain.turns.pass_events import PASS_STREAM_PREFIX, TASK_PASS_STREAM_PREFIX

from ..log import is_jsonl
from .streams import Index, LogStreams, StoreStreams, Streams


@dataclass
class Tree:
    """The events of one task's tree, in log order, and what was read."""

    records: list[Recorded]
    tree: list[str]
    """The owners (root first), then the task and everything below it."""
    subtree: list[str]
    """The task and everything below it, owners before what they own."""
    context: list[str]
    """Tasks outside the tree that it awaited (their task streams were read)."""
    streams: int
    """How many streams were read."""


@contextmanager
def open_streams(source: str | os.PathLike[str] | Store) -> Iterator[Streams]:
    """``source`` as streams to read: an open store, a JSONL export, or a store's path
    or URL (opened read-only here, closed on exit: a missing file is refused, not
    created)."""
    if isinstance(source, Store):
        yield StoreStreams(source) if source.archive is None else AcrossStreams(source)
        return
    if is_jsonl(source):
        yield LogStreams(source)
        return
    store = open_store(source, read_only=True)
    try:
        yield StoreStreams(store) if store.archive is None else AcrossStreams(store)
    finally:
        store.close()


class AcrossStreams(LogStreams):
    """A store read across its archive (``--archive``): its log walked, segments in
    place, for each question (as an export's is)."""

    def __init__(self, store: Store) -> None:
        super().__init__(str(store.location))
        self.store = store

    def _records(self) -> Iterator[Recorded]:
        for recorded in self.store.read():
            self._head = max(self._head, recorded.position)
            yield recorded


def owners_of(index: Index, task_id: str) -> list[str]:
    """``task_id``'s owner, its owner's owner, ... up to the root (nearest first)."""
    owners: list[str] = []
    seen = {task_id}
    owner = index.owner.get(task_id)
    while owner is not None and owner not in seen:  # a cycle is a corrupt log: stop
        owners.append(owner)
        seen.add(owner)
        owner = index.owner.get(owner)
    return owners


def read_tree(streams: Streams, task_id: str, *, whole: bool = False) -> Tree:
    """The events of ``task_id``'s owners, itself, everything it owns, and what they
    awaited (task streams only) and the passes that named them. With ``whole``, the
    tree of its root: everything its root owns, at any depth (what a trace holds)."""
    index = Index.of(streams.owned())
    owners = owners_of(index, task_id)
    if whole and owners:
        task_id, owners = owners[-1], []
    subtree = below(index, task_id)
    tree = [*reversed(owners), *subtree]
    runs = streams.runs(tree)
    wanted = [sid for tid in tree for sid in streams_of(tid, runs.get(tid, []))]
    # With the restart limit's own stream (an event a change, not counted as the tree's):
    # parked is measured against the limit recorded by each position, as live did.
    records = streams.read([*wanted, RESTART_LIMIT_STREAM])
    members = set(tree)
    awaited: list[str] = []
    passes: list[str] = []
    for recorded in records:
        event = recorded.event
        for other in getattr(event, "on", ()) if type(event).__name__ == "WaitStarted" else ():
            if other not in members and other not in awaited:
                awaited.append(other)
        pass_id = getattr(event, "pass_id", None)
        if isinstance(pass_id, str) and pass_id and f"{PASS_STREAM_PREFIX}{pass_id}" not in passes:
            passes.append(f"{PASS_STREAM_PREFIX}{pass_id}")
    more = [*awaited, *passes]
    if more:
        records = sorted(records + streams.read(more), key=lambda r: r.position)
    return Tree(records, tree, subtree, awaited, len(wanted) + len(more))


def below(index: Index, task_id: str) -> list[str]:
    """``task_id`` and every task below it, owners before what they own."""
    found: list[str] = []
    seen: set[str] = set()
    stack = [task_id]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        found.append(current)
        stack.extend(reversed(index.children.get(current, [])))
    return found


def streams_of(task_id: str, runs: list[str]) -> list[str]:
    """Every stream of one task: its own, its wakeups, cleanups, passes, schedule, runs."""
    return [
        task_id,
        wakeup_stream_id(task_id),
        cleanup_stream_id(task_id),
        f"{TASK_PASS_STREAM_PREFIX}{task_id}",
        schedule_stream_id(task_id),
        f"erasure:{task_id}",  # its values erased (issue 45): by whom, when, why
        *runs,
    ]


__all__ = ["Tree", "below", "open_streams", "owners_of", "read_tree", "streams_of"]
