"""Checks run on a store after a crash, a race or a refused command.

Each returns what it found wrong (an empty list when nothing), so a test can
assert on the list and print it whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tasktrail.domain import Store, World, open_store
from tasktrail.domain.world import Draft

Row = tuple[str, int, str]
"""An event as the log keys it: stream id, version in the stream, topic."""


@dataclass
class Folded:
    """A store read from position 0: the world it folds to and where each event is."""

    world: World
    rows: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    """(stream, version) -> (topic, position)."""
    head: int = 0


def fold(location: str | Store) -> Folded:
    """Fold a whole store with a fresh world, checking that no stream skips a version."""
    store = location if isinstance(location, Store) else open_store(location)
    try:
        folded = Folded(World())
        for recorded in store.read():
            event = recorded.event
            stream = event.stream_id()
            have = folded.world.version_of(stream, type(event).task_stream)
            assert recorded.originator_version == have + 1, (
                f"stream {stream} jumps from {have} to {recorded.originator_version} "
                f"at position {recorded.position}"
            )
            folded.world.apply(event)
            folded.rows[(stream, recorded.originator_version)] = (
                type(event).topic,
                recorded.position,
            )
            folded.head = recorded.position
        return folded
    finally:
        if not isinstance(location, Store):
            store.close()


def world_problems(world: World) -> list[str]:
    """What no command, whole, can leave behind (a half-recorded one could)."""
    problems = []
    draft = Draft(world)
    for task_id, task in world.tasks.items():
        children = draft.live_children(task_id)
        if (task.status == "running") != (task.mode is not None):
            problems.append(f"{task_id}: {task.status} with mode {task.mode}")
        if task.status == "completing" and not children:
            problems.append(f"{task_id}: completing with no live owned task (rule 5)")
        if task.status == "terminal" and children:
            problems.append(f"{task_id}: terminal while owning live {children} (rule 5)")
        if task.cancelling():
            unmarked = [d.id for d in draft.live_descendants(task_id) if not d.request_marked]
            if unmarked:
                problems.append(f"{task_id}: cancelling, live descendants unmarked {unmarked}")
        if task.status == "waiting" and not all(a in world.tasks for a in task.on):
            problems.append(f"{task_id}: waits on a task that does not exist")
        if task.status == "sleeping" and not (task.until is not None and math.isfinite(task.until)):
            problems.append(f"{task_id}: sleeps until {task.until!r}")
        if task.live != (task_id in world.live):
            problems.append(f"{task_id}: live index disagrees with status {task.status}")
    return problems + index_problems(world)


def index_problems(world: World) -> list[str]:
    """Where the indexes per-tick work reads disagree with every task's state."""
    from tasktrail.domain.runs.ledger import ledger_of, live_schedules
    from tasktrail.domain.tasks.live_index import CANCELLING, LIVE_ORDER
    from tasktrail.domain.turns.cleanup import (
        cleanup_owed,
        cleanup_state,
        completed,
        roles_owing_cleanup,
    )

    problems = []
    tasks = world.tasks
    live = {t for t, task in tasks.items() if task.live}
    order = world.indexes.get(LIVE_ORDER, {})
    if set(order) != live:
        problems.append(f"live_order holds {sorted(set(order) ^ live)} wrongly")
    submitted = [t for t in tasks if t in live]  # a world's tasks: submission order
    if sorted(order, key=order.__getitem__) != submitted:
        problems.append("live_order is not submission order")
    cancelling = {t for t in live if tasks[t].cancelling()}
    if world.indexes.get(CANCELLING, set()) != cancelling:
        problems.append(f"cancelling index is not {sorted(cancelling)}")
    schedules = {t: at for t, at in ledger_of(world).schedules.items() if t in live}
    if live_schedules(world) != schedules:
        problems.append("live_schedules is not the live tasks' schedules")
    owed = {
        t
        for t, task in tasks.items()
        if task.status == "terminal"
        and completed(task)
        and roles_owing_cleanup(task, cleanup_state(world, t))
    }
    if cleanup_owed(world) != owed:
        problems.append(f"cleanup_owed is not {sorted(owed)}")
    return problems


def verify_problems(location: str | Store) -> list[str] | None:
    """``tasktrail.replay.verify``'s violations, or ``None`` where it is not there."""
    try:
        from tasktrail.replay import verify
    except ImportError:
        return None
    report = verify(location)
    return [str(v) for v in report.violations]


def stored_rows(location: str) -> list[tuple[Any, ...]]:
    """Every stored event row of a SQLite store, read with sqlite3 directly."""
    uri = f"file:{Path(location).resolve()}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        return conn.execute(
            "SELECT rowid, originator_id, originator_version, topic, state "
            "FROM stored_events ORDER BY rowid"
        ).fetchall()


def file_digest(paths: Iterable[Path]) -> dict[str, str]:
    """The sha256 of each file that exists (to show a failed open changed nothing)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if Path(p).exists()}


@dataclass
class AckLog:
    """What a crash writer acknowledged before it was killed."""

    appended: list[tuple[str, int, str, int]] = field(default_factory=list)
    failed: list[list[Row]] = field(default_factory=list)
    pending: list[Row] | None = None
    """The last append's intent with no outcome: in flight when the writer died."""
    commands: list[dict[str, Any]] = field(default_factory=list)
    torn_lines: int = 0


def read_acks(path: Path) -> AckLog:
    """Parse an ack file; a torn last line (the kill landed in the write) is counted."""
    log = AckLog()
    if not path.exists():
        return log
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        lines.pop()  # written in part when the writer died
        log.torn_lines += 1
    for line in lines:
        record = orjson.loads(line)
        if "intent" in record:
            log.pending = [tuple(r) for r in record["intent"]]  # type: ignore[misc]
        elif "appended" in record:
            log.appended.extend(tuple(r) for r in record["appended"])  # type: ignore[misc]
            log.pending = None
        elif "failed" in record:
            log.failed.append([tuple(r) for r in record["failed"]])  # type: ignore[misc]
            log.pending = None
        else:
            log.commands.append(record)
    return log


@contextlib.contextmanager
def stale(scheduler: Any) -> Iterator[None]:
    """Make ``scheduler`` decide on the view it has: every command folds what other
    writers appended first, so a stale decision needs a race; this stands in for one."""
    real = scheduler.refresh
    scheduler.refresh = lambda: 0  # type: ignore[method-assign]
    try:
        yield
    finally:
        scheduler.refresh = real  # type: ignore[method-assign]


def folded_rows(projector: Any, table: str) -> list[dict[str, Any]]:
    """A read-model table's rows with the columns the fold writes, without the ISO-8601
    text columns SQLite generates beside the ms times (a replay's rows do not carry them)."""
    for projection in projector.projections:
        for spec in projection.tables:
            if spec.name == table:
                columns = ", ".join(f"[{c}]" for c in spec.columns)
                cursor = projector.db.execute(f"SELECT {columns} FROM [{table}]")
                return [dict(zip(spec.columns, row, strict=True)) for row in cursor]
    raise KeyError(table)


def race_first_append(
    store: Store, picks: Callable[[Sequence[Any]], bool], move: Callable[[], None]
) -> list[int]:
    """Hook ``store.append``: another writer's ``move`` runs just before the first append
    whose events ``picks``, as in a fleet's race; returns a list that grows by one at
    each picked append (the decision's tries)."""
    append = store.append
    tries: list[int] = []

    def raced(events: Sequence[Any], versions: Any, **kwargs: Any) -> list[int]:
        if picks(events):
            if not tries:
                move()
            tries.append(1)
        return append(events, versions, **kwargs)

    store.append = raced  # type: ignore[method-assign]
    return tries
