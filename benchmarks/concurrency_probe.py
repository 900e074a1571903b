"""``python -m benchmarks.concurrency_probe [--durability full|normal] [--kind sync3|async3]
[--concurrency N] [--tasks N]``: where one worker's time goes (issue 27).

One :class:`~tasktrail.domain.app.worker.Worker` in this process runs the concurrency
benchmark's tasks on a fresh SQLite file, with the store's ``append`` (a command's
transaction, its fsync at ``full``) and the scheduler's lock (which every decision
holds, so commits are serialized) timed. Prints tasks/s beside the ideal, CPU per
task, the appends' share of the wall time, and how long the lock was held and
waited for. One run; the machine's load moves it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tasktrail.domain import Scheduler
from tasktrail.domain.app.worker import Worker

from . import concurrency_registry


class _TimedLock:
    """The scheduler's re-entrant lock, timed at its outermost take."""

    def __init__(self, lock: Any, totals: dict[str, float]) -> None:
        self.lock, self.totals, self.local = lock, totals, threading.local()

    def acquire(self, *args: Any, **kwargs: Any) -> bool:
        asked = time.perf_counter()
        taken: bool = self.lock.acquire(*args, **kwargs)
        depth = getattr(self.local, "depth", 0)
        if depth == 0:
            self.local.since = time.perf_counter()
            self.totals["lock_wait_s"] += self.local.since - asked
        self.local.depth = depth + 1
        return taken

    def release(self) -> None:
        self.local.depth -= 1
        if self.local.depth == 0:
            self.totals["lock_held_s"] += time.perf_counter() - self.local.since
        self.lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *_: Any) -> None:
        self.release()


def probe(path: Path, durability: str, kind: str, concurrency: int, tasks: int) -> dict[str, float]:
    """One run; the figures by name."""
    ended = [0]
    mark = concurrency_registry.mark
    concurrency_registry.mark = lambda what: ended.__setitem__(0, ended[0] + (what == "E"))  # type: ignore[assignment]
    try:
        return _run(path, durability, kind, concurrency, tasks, ended)
    finally:
        concurrency_registry.mark = mark  # type: ignore[assignment]


def _run(
    path: Path, durability: str, kind: str, concurrency: int, tasks: int, ended: list[int]
) -> dict[str, float]:
    s = Scheduler.open(
        str(path),
        registry=concurrency_registry.registry,
        worker="w",
        durability=durability,  # type: ignore[arg-type]
    )
    with s.batch():
        for _ in range(tasks):
            s.submit(kind)
    totals = {"appends": 0.0, "append_s": 0.0, "lock_wait_s": 0.0, "lock_held_s": 0.0}
    append = s.store.append

    def timed_append(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return append(*args, **kwargs)
        finally:
            totals["appends"] += 1
            totals["append_s"] += time.perf_counter() - started

    s.store.append = timed_append  # type: ignore[method-assign]
    s._lock = _TimedLock(s._lock, totals)  # type: ignore[assignment]
    worker = Worker(s, concurrency=concurrency)
    wall, cpu = time.perf_counter(), time.process_time()
    running = threading.Thread(target=worker.run)
    running.start()
    while ended[0] < tasks and time.perf_counter() - wall < 120:
        time.sleep(0.01)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    worker.stop()
    running.join()
    return {
        "tasks_per_s": tasks / wall,
        "ideal": concurrency / 0.3,
        "wall_s": wall,
        "cpu_ms_per_task": cpu / tasks * 1000,
        "ticks": worker.ticks,
        **totals,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.concurrency_probe", description=__doc__
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--durability", choices=["full", "normal"], default="full")
    parser.add_argument("--kind", choices=["sync3", "async3", "next3"], default="sync3")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--tasks", type=int, default=320)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tasktrail-probe-") as tmp:
        f = probe(Path(tmp) / "probe.db", args.durability, args.kind, args.concurrency, args.tasks)
    print(
        f"{args.durability} {args.kind} 1x{args.concurrency}, {args.tasks} tasks: "
        f"{f['tasks_per_s']:.1f} tasks/s (ideal {f['ideal']:.1f}, ratio "
        f"{f['tasks_per_s'] / f['ideal']:.2f}); CPU {f['cpu_ms_per_task']:.2f} ms/task, "
        f"{f['ticks']:.0f} ticks; "
        f"{f['appends']:.0f} appends, {f['append_s'] / f['appends'] * 1000:.2f} ms each, "
        f"{f['append_s'] / f['wall_s']:.0%} of the wall time; the scheduler's lock held "
        f"{f['lock_held_s'] / f['wall_s']:.0%} of it, waited for {f['lock_wait_s']:.1f} s in all"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
