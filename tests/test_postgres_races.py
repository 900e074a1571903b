"""Writers racing on one PostgreSQL store (issue 28 items 1 and 4): none is refused for
its time, and the snapshots they take equal the fold.

Each writer is a process (``benchmarks/fleet_writer.py``) with the system clock, started
behind a barrier, submitting, reserving and finishing its own tasks: their appends
queue for the store's table lock, so a writer's decision time is often earlier than
the last row's when its append gets the lock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.checks import verify_problems

from tasktrail.domain import ManualClock, Scheduler, open_store

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[1]
WRITERS = 4
COMMANDS = 150
START = 1_767_603_600_000


def race(
    location: str, writers: int, commands: int, snapshot_every: int | None = None
) -> list[dict[str, Any]]:
    """Run ``writers`` racing writers to ``commands`` commands each; their reports."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "benchmarks.fleet_writer", location]
    extra = ["--commands", str(commands)]
    if snapshot_every:
        extra += ["--snapshot-every", str(snapshot_every)]
    processes = [
        subprocess.Popen(
            [*command, f"w{n}", *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for n in range(writers)
    ]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    outputs = [process.communicate(timeout=300)[0] for process in processes]
    assert all(process.returncode == 0 for process in processes), outputs
    return [orjson.loads(output) for output in outputs]


def test_racing_writers_never_lose_a_race_to_the_clock(postgres_url: str) -> None:
    reports = race(postgres_url, WRITERS, COMMANDS)
    assert [r["errors"] for r in reports] == [{}] * WRITERS, reports
    assert sum(r["refused"].get("clock", 0) for r in reports) == 0, reports
    with open_store(postgres_url, read_only=True) as store:
        assert verify_problems(store) == []


def test_snapshots_taken_by_racing_writers_equal_the_fold(postgres_url: str) -> None:
    """Before: ``verify`` said "snapshot at position N: its indexes differ from the
    fold's" (a writer numbered its own task before another's that the log holds first)."""
    reports = race(postgres_url, WRITERS, COMMANDS, snapshot_every=20)
    assert [r["errors"] for r in reports] == [{}] * WRITERS, reports
    with open_store(postgres_url, read_only=True) as store:
        assert verify_problems(store) == []


def _another_writer_first(scheduler: Scheduler, other: Scheduler, task_id: str) -> None:
    """Make ``other`` submit ``task_id`` between ``scheduler``'s decision and its append."""
    append = scheduler.store.append

    def after_the_other(*args: Any, **kwargs: Any) -> list[int]:
        scheduler.store.append = append  # type: ignore[method-assign]
        other.submit("job", phase="p", id=task_id)
        return append(*args, **kwargs)

    scheduler.store.append = after_the_other  # type: ignore[method-assign]


def test_a_writer_folds_its_own_events_after_those_appended_before_them(
    postgres_url: str,
) -> None:
    a = Scheduler.open(postgres_url, worker="a", clock=ManualClock(START))
    b = Scheduler.open(postgres_url, worker="b", clock=ManualClock(START))
    _another_writer_first(a, b, "from-b")
    a.submit("job", phase="p", id="from-a")
    assert [r.event.task_id for r in a.store.read()] == ["from-b", "from-a"]
    a.snapshot()
    assert verify_problems(a.store) == []
    assert a.task("from-a").status == a.task("from-b").status == "pending"
    a.close()
    b.close()


def test_a_batch_folds_its_events_after_those_appended_before_them(postgres_url: str) -> None:
    a = Scheduler.open(postgres_url, worker="a", clock=ManualClock(START))
    b = Scheduler.open(postgres_url, worker="b", clock=ManualClock(START))
    _another_writer_first(a, b, "from-b")
    with a.batch():
        a.submit("job", phase="p", id="from-a")
        a.submit("job", phase="p", id="from-a-too")
    assert [r.event.task_id for r in a.store.read()] == ["from-b", "from-a", "from-a-too"]
    a.snapshot()
    assert verify_problems(a.store) == []
    a.close()
    b.close()
