"""Erasure that keeps the proof: ``Scheduler.erase`` and ``tasktrail erase``.

A person may ask to have their data forgotten; an auditor still needs the history to
verify. For a finished tree (rule 37: a live one is refused, nothing appended), every
event of its streams that holds a value leaves the store with the values gone: each
field of any JSON value (``Any``: memos, results, messages, error details, run
payloads, and the stream chunks, asks and answers of later releases, which hold theirs
the same way) is set to null. Each erased row keeps its digest (its stream's chain
goes on from it) and the leaf it had in the log's tree (:mod:`..store.erased`), so every
seal still verifies; one transaction rewrites the rows and appends the act
(``HistoryErased``, with each row's digest, leaf and new bytes' hash, which ``verify``
holds it to) and a ``TaskErased`` on each task's ``erasure:<task>`` stream (``history``,
``explain`` and the audit read model show who erased it, when and why).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..errors import RuleViolation, StoreError, UnknownTask
from ..store.chain import as_bytes, unseal
from ..store.erasing import erased_row, value_fields
from ..store.gaps import HISTORY_STREAM, history_acts
from ..store.removal import record_act
from ..store.store import Store
from ..tasks.events import TaskEvent
from .across import reading_archive
from .archiving import Crash, scan
from .events import HistoryErased, TaskErased, erasure_stream_id
from .segments import SegmentWriter, read_segment

ERASE_RULE = 37


@dataclass
class Erased:
    """What an erasure took: the tree, its tasks, the events that lost values."""

    tree: str
    tasks: list[str]
    events: int
    position: int | None


def erase(
    store: Store,
    task_id: str,
    *,
    actor: str | None = None,
    why: str | None = None,
    at: float | None = None,
    crash: Crash | None = None,
    archive: str | os.PathLike[str] | None = None,
) -> Erased:
    """Erase the values of the tree of ``task_id`` (see the module); with ``archive``
    (the store's archive folder), of a tree archived there too: the act is recorded,
    then each segment holding the tree is written again with its values erased (its
    seal's root the same: an erased event keeps its leaf)."""
    if archive is not None:
        with reading_archive(archive, store):
            return _erase(store, task_id, actor, why, at, crash, Path(archive))
    return _erase(store, task_id, actor, why, at, crash, None)


def _erase(
    store: Store,
    task_id: str,
    actor: str | None,
    why: str | None,
    at: float | None,
    crash: Crash | None,
    folder: Path | None,
) -> Erased:
    unit = scan(store).unit_of(task_id)
    if unit is None:
        raise UnknownTask(task_id)
    live = sorted(t for t in unit.tasks if _live(store, t))
    if unit.live or unit.open_runs:
        what = f"task {live[0]} is live" if live else "it holds an open run or shared work"
        raise RuleViolation(
            ERASE_RULE,
            f"the tree of {task_id} is not finished ({what}): erase it once every task of "
            "it has ended",
            task_id=task_id,
        )
    root = sorted(unit.roots)[0] if unit.roots else task_id
    rewrite: list[tuple[int, bytes]] = []
    entries: list[list[Any]] = []
    by_task: dict[str, int] = {}
    segments: dict[str, dict[int, bytes]] = {}
    view = store.archive
    for stream_id in sorted(unit.streams):
        rows = [(None, (p, stream_id, v, t, s)) for p, v, t, s in store.stream_rows(stream_id)]
        if view is not None:
            for name, held in view.rows_of(stream_id).items():
                rows += [(name, row) for row in held]
        for segment, (position, _, version, topic, state) in rows:
            done = erased_row(position, stream_id, version, topic, as_bytes(state))
            if done is None:
                continue
            if segment is None:
                rewrite.append((position, done[0]))
            else:
                segments.setdefault(segment, {})[position] = done[0]
            entries.append(done[1])
            owner = stream_id if stream_id in unit.tasks else _task_of(done[0])
            by_task[owner] = by_task.get(owner, 0) + 1
    when = at if at is not None else time.time() * 1000
    acts = history_acts(store)
    events: list[TaskEvent] = [
        HistoryErased(
            task_id="",
            at=when,
            tree=root,
            tasks=tuple(sorted(unit.tasks)),
            entries=sorted(entries),
            actor=actor,
            why=why,
        )
    ]
    versions = [acts[-1].version + 1 if acts else 1]
    for task in sorted(unit.tasks):
        events.append(
            TaskErased(
                task_id=task, at=when, tree=root, events=by_task.get(task, 0), actor=actor, why=why
            )
        )
        versions.append(len(store.stream_rows(erasure_stream_id(task))) + 1)
    # The snapshots between the tree's first and last event may hold its values.
    held = (min(p for p, _ in rewrite), max(p for p, _ in rewrite)) if rewrite else None
    positions = record_act(store, events, versions, rewrite=rewrite, snapshots=held, crash=crash)
    for name, erased in segments.items():  # after the act: a kill between, erase again
        assert folder is not None
        _rewrite_segment(folder, name, erased, store)
    return Erased(root, sorted(unit.tasks), len(entries), positions[0])


def _rewrite_segment(folder: Path, name: str, erased: dict[int, bytes], store: Store) -> None:
    """Write a segment again with some rows erased, in place of the old one (fsynced,
    renamed over it): the same name, span, count and root."""
    read = read_segment(folder / name)
    writer = SegmentWriter(folder, int(name.split("-")[1]))
    for row in read.rows:
        writer.add((*row[:4], erased.get(row[0], row[4])))
    seal = writer.seal(store.chain_key, store.key_id)
    if seal["name"] != name or (read.seal or {}).get("root") != seal["root"]:
        writer.abandon()
        raise StoreError(f"segment {name} would not keep its seal once erased: left as it was")
    writer.finish(seal)


def _live(store: Store, task_id: str) -> bool:
    records = store.stream_records(task_id)
    return bool(records) and type(records[-1].event).__name__ != "TaskEnded"


def _task_of(state: bytes) -> str:
    task = orjson.loads(unseal(state)[0]).get("task_id")
    return task if isinstance(task, str) else ""


__all__ = ["ERASE_RULE", "HISTORY_STREAM", "Erased", "erase", "erased_row", "value_fields"]
