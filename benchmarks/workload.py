"""The workload every benchmark shares: task lifecycles of four commands each.

One **cycle** is ``submit``, ``reserve``, ``checkpoint``, ``finish``: four
commands, four events (about 100 to 250 bytes each, 160 on average), the
shape of a short task's whole life.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition

START_MS = 1_767_603_600_000
COMMANDS_PER_CYCLE = 4


def registry() -> Registry:
    """One kind, ``job``, with two phases (commands drive it by hand)."""
    return Registry(
        [TaskDefinition("job", 1, {"fetch": lambda t: "write", "write": lambda t: None})]
    )


def open_scheduler(path: Path | str, durability: str = "full") -> tuple[Scheduler, ManualClock]:
    """A scheduler on ``path`` with a manual clock."""
    clock = ManualClock(START_MS)
    scheduler = Scheduler.open(
        str(path),
        clock=clock,
        registry=registry(),
        durability=durability,  # type: ignore[arg-type]
    )
    return scheduler, clock


def cycle(scheduler: Scheduler, clock: ManualClock, n: int) -> None:
    """One task's life: submit, reserve, checkpoint, finish (four commands, four events)."""
    task_id = scheduler.submit("job", id=f"task-{n:09d}")
    scheduler.reserve(task_id)
    scheduler.checkpoint(task_id, "write")
    scheduler.finish(task_id, "completed")
    clock.advance(1)


def batch_of(scheduler: Scheduler) -> Any:
    """``scheduler.batch()``, or no batching where the scheduler has none."""
    batch = getattr(scheduler, "batch", None)
    return batch() if batch is not None else nullcontext()


def build_store(path: Path | str, cycles: int, *, per_batch: int = 2_500) -> int:
    """Fill a new store with ``cycles`` cycles, in batches; returns the events written."""
    scheduler, clock = open_scheduler(path, "normal")
    try:
        done = 0
        while done < cycles:
            with batch_of(scheduler):
                for n in range(done, min(cycles, done + per_batch)):
                    cycle(scheduler, clock, n)
            done = min(cycles, done + per_batch)
        return scheduler.events_written
    finally:
        scheduler.close()


Row = tuple[str, int, str, bytes]


def stored_rows(path: Path | str, limit: int | None = None) -> list[Row]:
    """The rows of a store's event table, in log order (to write them again raw)."""
    with closing_sqlite(path) as conn:
        sql = "SELECT originator_id, originator_version, topic, state FROM stored_events "
        sql += "ORDER BY rowid" + (f" LIMIT {int(limit)}" if limit is not None else "")
        return [tuple(row) for row in conn.execute(sql)]  # type: ignore[misc]


@contextmanager
def closing_sqlite(path: Path | str) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection, closed afterwards."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()
