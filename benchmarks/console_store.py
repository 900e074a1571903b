"""The store ``benchmarks.console`` serves: a given number of tasks, most ended, as an
operator's store looks after a few days of service.

Tasks come in **trees** of five: a ``report`` task that owns four ``fetch`` tasks and
waits on them (``all``); each fetch is reserved, checkpointed, given a memo and
finished (one in nine ``failed`` with an error message, one in 50 aborted by an
operator with an actor and a reason), then the report resumes and finishes with a
result. The last 1% of trees are left live (pending fetches, a waiting report), so
the list has live work to show and a task page has a live tree to draw. Every event
is one the scheduler decided, many trees to one ``batch()`` (one transaction), so a
100,000-task store builds in about a minute.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from tasktrail.domain import ManualClock, Registry, Scheduler, TaskDefinition

START_MS = 1_767_603_600_000  # 2026-01-05T09:00:00Z
TREE = 5
"""Tasks a tree holds: the report and its four fetches."""
PER_BATCH = 100
"""Trees one transaction appends."""
GENERATOR_VERSION = 1
"""Bump when the store a size builds changes: a cached store is keyed by it."""


def registry() -> Registry:
    """``report`` (plan, join) and ``fetch`` (get, parse): the builder drives them by hand,
    ``benchmarks.console``'s worker runs them."""
    return Registry(
        [
            TaskDefinition("report", 1, {"plan": lambda inv: None, "join": lambda inv: None}),
            TaskDefinition("fetch", 1, {"get": lambda inv: None, "parse": lambda inv: None}),
        ]
    )


def build(path: Path, tasks: int, *, log: bool = False) -> Path:
    """Build (or reuse, if one of this size and version is there) a SQLite store of
    ``tasks`` tasks at ``path``; returns its path."""
    from tasktrail.domain.history.table import FORMAT  # a snapshot of an older one is no use

    done = path.with_name(path.name + f".v{GENERATOR_VERSION}-{tasks}-f{FORMAT}.done")
    if path.exists() and done.exists():
        return path
    for leftover in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        leftover.unlink(missing_ok=True)
    clock = ManualClock(START_MS)
    trees = max(1, tasks // TREE)
    live_from = trees - max(1, trees // 100)
    began = time.monotonic()
    with Scheduler.open(
        str(path), clock=clock, registry=registry(), worker="builder", durability="normal"
    ) as s:
        for first in range(0, trees, PER_BATCH):
            with s.batch():
                for number in range(first, min(first + PER_BATCH, trees)):
                    _tree(s, clock, number, live=number >= live_from)
            if log and first % 2_000 == 0:
                print(f"  {first * TREE:,} tasks, {time.monotonic() - began:.0f} s", flush=True)
    done.touch()
    return path


def _tree(s: Scheduler, clock: ManualClock, number: int, *, live: bool) -> None:
    clock.advance(1_000)
    root = s.submit("report", phase="plan", id=f"report-{number:06d}", memos={"day": number})
    s.reserve(root)
    fetches = [
        s.submit_owned(root, "fetch", phase="get", id=f"fetch-{number:06d}-{leg}")
        for leg in range(TREE - 1)
    ]
    s.wait(root, on=fetches, policy="all", phase="join")
    if live:
        return
    for leg, fetch in enumerate(fetches):
        clock.advance(50)
        serial = number * TREE + leg
        if serial % 50 == 7:
            s.abort(fetch, actor="ops@example", reason=f"stuck source {serial % 13}")
        s.reserve(fetch)
        if serial % 50 == 7:
            s.finish(fetch, "aborted")
            continue
        s.checkpoint(fetch, "parse")
        s.memo(fetch, "bytes", serial * 37 % 10_000)
        if serial % 9 == 4:
            s.finish(fetch, "failed", {"message": f"source returned {500 + serial % 4}"})
        else:
            s.finish(fetch, "completed", result={"rows": serial % 1_000})
    clock.advance(100)
    s.reserve(root)
    s.finish(root, "completed", result={"fetched": TREE - 1})


def working_copy(path: Path) -> Path:
    """A copy of a built store to run on (the worker's rounds add tasks to it), made anew
    each run: every run starts from the same store."""
    copy = path.with_name(path.stem + "-run" + path.suffix)
    for leftover in (copy, copy.with_name(copy.name + "-wal"), copy.with_name(copy.name + "-shm")):
        leftover.unlink(missing_ok=True)
    shutil.copyfile(path, copy)
    return copy
