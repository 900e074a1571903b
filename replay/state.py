"""Any log back into scheduler state, as of any position or clock time.

:func:`replay` folds a log (a store or a JSONL export) through the same
``evolve`` the scheduler and the projections use, and runs the same
projections into memory, so a :class:`SchedulerState` holds exactly the rows
``tasktrail project`` writes — live mirror, pending wakeups, ledgers, audit —
plus every task's full state. It never writes to the source.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from html import escape
from typing import Any

import orjson

from tasktrail.domain import CorruptEvent, Store, TaskState, World, open_store
from tasktrail.domain.history import restore, stream_loader
from tasktrail.domain.store.store import Recorded
from tasktrail.domain.tasks.definitions import parked_now
from tasktrail.domain.tasks.restart_limit import restart_limit_of
from tasktrail.projections import Changes, Projection, default_projections
from tasktrail.projections.base import Coalescer

from .log import Skipped, is_jsonl, read_log
from .until import Until as Until

COALESCE_BATCH = 10_000
"""Events between two applications of the projections that coalesce (bounds the memory
of the streams touched in between)."""


@dataclass(frozen=True)
class Problem:
    """An event that could not be folded (only kept by a lenient fold)."""

    position: int
    message: str


@dataclass
class SchedulerState:
    """The scheduler's state after a log (or a prefix of one)."""

    held: World
    """The world folded: every task after a fold from position 0; the live work (and
    what the events after the snapshot touched) after a start from a snapshot.
    :attr:`world` is always every task."""
    position: int = 0
    """The last position folded."""
    events: int = 0
    """How many events were folded."""
    tables: dict[str, dict[Any, dict[str, Any]]] = field(default_factory=dict)
    """Every read-model table, by name: rows by primary key, as the projections write them."""
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    last_position: dict[str, int] = field(default_factory=dict)
    """The position of the last event of each stream (for pointing at a problem)."""
    snapshot: int | None = None
    """The snapshot this state started from (``None``: folded from position 0). Such a
    state holds the live work; :meth:`complete` folds the log from 0 the first time
    every task or a read-model table is asked for."""
    snapshot_problems: list[str] = field(default_factory=list, compare=False)
    """The snapshots passed over on the way (failed a check), and why."""
    _full: Callable[[], SchedulerState] | None = field(default=None, repr=False, compare=False)

    def complete(self) -> SchedulerState:
        """This state with every task and every read-model row (a state started from
        a snapshot folds the whole log once, to the same position)."""
        full, self._full = self._full, None
        if full is not None:
            folded = full()
            self.held, self.tables, self.keys = folded.held, folded.tables, folded.keys
            self.last_position = folded.last_position
        return self

    @property
    def world(self) -> World:
        """The world with every task, terminal ones included (see :meth:`complete`)."""
        return self.complete().held

    @property
    def tasks(self) -> dict[str, TaskState]:
        """Every task, terminal ones included."""
        return self.world.tasks

    @property
    def live(self) -> dict[str, TaskState]:
        """Every task that is not terminal, in submission order."""
        tasks = self.held.tasks
        return {tid: tasks[tid] for tid in tasks if tid in self.held.live}

    @property
    def restart_limit(self) -> int:
        """The restart limit in force at :attr:`position`: the last one the log recorded
        by then (``RestartLimitChanged``), else 3, as the scheduler decided with it."""
        return restart_limit_of(self.held)

    @property
    def parked(self) -> list[str]:
        """The live tasks parked at :attr:`restart_limit` (rule 9, blocked reason
        ``restart_limit``), in submission order: only the live work is looked at."""
        limit = self.restart_limit
        return [tid for tid, task in self.live.items() if parked_now(task, limit)]

    def table(self, name: str) -> list[dict[str, Any]]:
        """The rows of one read-model table, in key order."""
        rows = self.complete().tables.get(name, {})
        return [rows[key] for key in sorted(rows, key=_sort_key)]

    @property
    def audit(self) -> list[dict[str, Any]]:
        """One row per event, in log order."""
        return self.table("audit")

    @property
    def pending_wakeups(self) -> list[dict[str, Any]]:
        """Pending Leader wakeups (empty where the log has none)."""
        return self.table("pending_wakeups")

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """The run ledger (empty where the log has no runs)."""
        return self.table("runs")

    def state_hash(self) -> str:
        """A stable hash of the whole state: the same log always gives the same hash."""
        digest = hashlib.sha256()
        self.complete()
        for task_id in sorted(self.world.tasks):
            digest.update(orjson.dumps(self.world.tasks[task_id].to_dict(), default=repr))
        for name in sorted(self.tables):
            digest.update(name.encode())
            for row in self.table(name):
                digest.update(orjson.dumps(row, option=orjson.OPT_SORT_KEYS, default=repr))
        return digest.hexdigest()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SchedulerState):
            return NotImplemented
        if self.tasks != other.tasks:  # each completed first
            return False
        return self.tables == other.tables

    __hash__ = None  # type: ignore[assignment]

    def summary(self) -> dict[str, Any]:
        """Counts a person reads first: tasks by status, events, position."""
        by_status = {status: n for status, n in sorted(self.held.counts.items()) if n}
        return {
            "position": self.position,
            "events": self.events,
            "tasks": sum(by_status.values()),
            "by_status": dict(sorted(by_status.items())),
            "live": len(self.held.live),
        }

    def _repr_html_(self, max_live: int = 50) -> str:
        """A notebook's view: tasks by status, then the live tasks (the first ``max_live``)."""
        summary = self.summary()
        counts = "".join(
            f"<tr><td>{escape(status)}</td><td>{count}</td></tr>"
            for status, count in summary["by_status"].items()
        )
        live = list(self.live.values())
        rows = "".join(
            "<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in _live_row(task)) + "</tr>"
            for task in live[:max_live]
        )
        more = (
            f"<tr><td colspan='6'>… {len(live) - max_live} more</td></tr>"
            if len(live) > max_live
            else ""
        )
        head = "".join(
            f"<th>{name}</th>"
            for name in ("task", "kind", "status", "phase", "restarts", "abort mark")
        )
        return (
            f"<div><p>as of position {self.position} ({self.events} events): "
            f"{summary['tasks']} tasks, {summary['live']} live</p>"
            f"<table><tr><th>status</th><th>tasks</th></tr>{counts}</table>"
            + (
                f"<table><caption>live tasks</caption><tr>{head}</tr>{rows}{more}</table>"
                if live
                else ""
            )
            + "</div>"
        )


def _live_row(task: TaskState) -> tuple[Any, ...]:
    phase = task.checkpoint.phase if task.checkpoint is not None else ""
    mark = (task.abort_reason or "requested") if task.abort_requested else ""
    return (task.id, task.kind, task.status, phase, task.restarts, mark)


def _sort_key(key: Any) -> Any:
    return tuple(str(k) for k in key) if isinstance(key, tuple) else (str(type(key)), key)


def fold(
    records: Iterable[Recorded],
    *,
    until: Until | None = None,
    projections: Sequence[Projection] | None = None,
    strict: bool = True,
    state: SchedulerState | None = None,
) -> SchedulerState:
    """Fold records into a state (or on into ``state``); ``strict=False`` keeps
    going past an event that cannot be applied, noting it in ``problems``."""
    stop = until or Until()
    projections = list(projections) if projections is not None else default_projections()
    if state is None:
        state = SchedulerState(held=World())
    world = state.held
    shared = Changes(upserts=state.tables)  # rows land straight in the state's tables
    for projection in projections:
        for spec in projection.tables:
            state.tables.setdefault(spec.name, {})
            state.keys[spec.name] = projection.keys(spec.name)
    # Projections that coalesce are applied once per stream every COALESCE_BATCH
    # events (their rows come out the same); the others once per event.
    per_event = [p for p in projections if not p.coalesces]
    coalescer = Coalescer(projections)
    coalesce = coalescer.add if coalescer.projections else None
    pending = 0
    last_position = state.last_position
    apply_stored = world.apply_stored
    # No stop (a whole log): no call per event to ask. Only a per-event projection
    # deletes rows between flushes, so only then are deletes looked at per event.
    reached = stop.reached if stop.position is not None else None
    # A time stop folds every event stamped at or before it, in log order: an event may
    # follow a later-stamped one of a writer it never read (docs/reliability.md).
    latest = stop.at
    for recorded in records:
        if reached is not None and reached(recorded):
            break
        event = recorded.event
        if latest is not None and event.at > latest:
            continue
        position = recorded.position
        # A task's stream is named by its id (TaskEvent.stream_id) without the call.
        stream_id = event.task_id if type(event).task_stream else event.stream_id()
        try:
            before, after = apply_stored(position, event, recorded.originator_version)
        except CorruptEvent as error:
            if strict:
                raise
            state.problems.append(Problem(position, str(error)))
            continue
        if per_event:
            for projection in per_event:
                projection.apply(shared, position, event, before, after, world)
            if shared.deletes:
                _drop_deleted(shared)
        if coalesce is not None:
            coalesce(stream_id, position, event, before)
            pending += 1
            if pending >= COALESCE_BATCH:
                coalescer.flush(world, lambda _: shared)
                _drop_deleted(shared)
                pending = 0
        state.position = position
        state.events += 1
        last_position[stream_id] = position
    coalescer.flush(world, lambda _: shared)
    _drop_deleted(shared)
    return state


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a log is folded.

    A fold allocates a state per task and makes no reference cycles, so the collector
    finds nothing, yet it scans every live object again each time the heap has grown
    by a quarter: about a tenth of the time of a million-event replay, a share that
    grows with the log. Reference counting still frees everything as usual.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _drop_deleted(changes: Changes) -> None:
    # In memory there is no table to delete from: a delete just forgets the row.
    changes.deletes.clear()


def replay(
    source: str | os.PathLike[str] | Store | Iterable[Recorded],
    until: int | float | str | datetime | Until | None = None,
    *,
    skip_invalid: bool = False,
    strict: bool = True,
    audit: bool = True,
    snapshots: bool = True,
    watch: Callable[[Iterator[Recorded], SchedulerState], Iterator[Recorded]] | None = None,
    archive: str | os.PathLike[str] | None = None,
) -> SchedulerState:
    """Fold a log into a :class:`SchedulerState`, as of ``until`` (a position or a time).

    ``source``: a SQLite path, a URL, an open store, a ``.jsonl`` export, or records.
    ``skip_invalid=True`` leaves out what cannot be read (an export's lines, a store's
    events), each noted in ``skipped`` with where it was; ``strict=False`` goes on past
    an event that cannot be applied (one after a skipped event of its stream), noted in
    ``problems``. ``audit=False`` leaves out the audit trail (a row per event: most of a
    big log's memory, about 1 KB an event); every other table, and every task, is the
    same. The cyclic garbage collector is paused while the log is folded.

    A store replayed to a position (or its end) starts from the nearest snapshot at or
    before it and folds the events after it: the state holds the live work, and folds
    the whole log when every task or a table is asked for (:meth:`~SchedulerState.complete`).
    ``snapshots=False`` folds from 0 (``verify`` does, with ``watch(records, state)``
    wrapping its records). ``archive``: the store's archive folder (:mod:`.across_archive`).
    """
    if archive is not None:
        from .across_archive import across_archive

        with across_archive(archive, source):
            kept = replay(source, until, skip_invalid=skip_invalid, strict=strict, audit=audit)
            return kept.complete()
    stop = Until.parse(until)
    a_store = isinstance(source, Store) or (
        isinstance(source, str | os.PathLike) and not is_jsonl(source)
    )
    if snapshots and a_store and stop.at is None and strict and not skip_invalid:
        return from_snapshot(source, stop, audit=audit)  # type: ignore[arg-type]
    projections = None if audit else [p for p in default_projections() if p.name != "audit"]
    if isinstance(source, (str, os.PathLike, Store)):
        records, reader, opened = read_log(source, skip_invalid=skip_invalid)
    else:
        records, reader, opened = iter(source), None, None
    try:
        state = SchedulerState(held=World())
        if watch is not None:
            records = watch(records, state)
        with _collector_paused():
            fold(records, until=stop, strict=strict, projections=projections, state=state)
    finally:
        if opened is not None:
            opened.close()
    if reader is not None:
        state.skipped = list(reader.skipped)
    return state


def from_snapshot(
    source: str | os.PathLike[str] | Store, stop: Until, *, audit: bool = True
) -> SchedulerState:
    """A store's state as of ``stop`` from its nearest snapshot and the events after it;
    the full fold stays a call away (:meth:`SchedulerState.complete`)."""
    store = source if isinstance(source, Store) else open_store(source, read_only=True)
    try:
        restored = restore(store, stop.position)
    finally:
        if store is not source:
            store.close()
    if restored.snapshot is None:
        # No snapshot: the full fold it is, with every table.
        state = replay(source, stop, audit=audit, snapshots=False)
        state.snapshot_problems = restored.problems
        return state
    world = restored.world
    world.loader = _stream_reader(source, restored.position)
    return SchedulerState(
        held=world,
        position=restored.position,
        events=world.folded,
        snapshot=restored.snapshot,
        snapshot_problems=restored.problems,
        _full=lambda: replay(source, stop, audit=audit, snapshots=False),
    )


def _stream_reader(source: str | os.PathLike[str] | Store, position: int) -> Any:
    """Read a dropped stream back, opening the store (read-only) for each read when
    the caller gave a path: a replayed state outlives the replay's own open."""

    def load(stream_id: str, task_stream: bool, below: int | None) -> Any:
        if isinstance(source, Store):
            return stream_loader(source, lambda: position)(stream_id, task_stream, below)
        with open_store(source, read_only=True) as store:
            return stream_loader(store, lambda: position)(stream_id, task_stream, below)

    return load
