"""``python -m benchmarks.concurrency_gaps [--phase-ms MS] [--concurrency N] [--tasks N]``:
where a task's time outside its phases goes (issue 43).

One :class:`~tasktrail.domain.app.worker.Worker` in this process runs tasks of three
``async`` phases that each wait ``--phase-ms`` (the concurrency benchmark's ``next3``)
on a fresh SQLite file, each phase's start and end and the task's recorded end timed.
Prints tasks/s against the ideal, CPU a task, and the mean, median and p90 of: how much
longer than asked a task's three waits took together, each phase boundary (a
checkpoint through the group commit), the task's end, and a slot's turn (from one
task's recorded end to the next task's first phase, the k-th end paired with the start
that followed it). One run; the machine's load moves it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tasktrail.domain import Registry, Scheduler, TaskDefinition, Worker

now = time.perf_counter


def registry(
    marks: dict[str, dict[str, float]], wait_s: float, finished: Callable[[], None] = lambda: None
) -> Registry:
    """``next3``: three async phases, each marked at its start and end; ``finished`` is
    called as each task's end is recorded."""

    async def one(inv: Any) -> str:
        marks[inv.task_id] = {"s1": now()}
        await asyncio.sleep(wait_s)
        marks[inv.task_id]["e1"] = now()
        return "two"

    async def two(inv: Any) -> str:
        marks[inv.task_id]["s2"] = now()
        await asyncio.sleep(wait_s)
        marks[inv.task_id]["e2"] = now()
        return "three"

    async def three(inv: Any) -> None:
        marks[inv.task_id]["s3"] = now()
        await asyncio.sleep(wait_s)
        marks[inv.task_id]["e3"] = now()
        await inv.finish_async("completed")
        marks[inv.task_id]["f"] = now()
        finished()

    return Registry([TaskDefinition("next3", 1, {"one": one, "two": two, "three": three})])


def gaps(wait_s: float, concurrency: int, tasks: int, workdir: Path) -> dict[str, Any]:
    """Run the tasks; the figures :func:`main` prints."""
    marks: dict[str, dict[str, float]] = {}
    ended, all_ended = [0], threading.Event()

    def finished() -> None:  # on the worker's one loop: no race
        ended[0] += 1
        if ended[0] >= tasks:
            all_ended.set()

    s = Scheduler.open(
        str(workdir / "gaps.db"), registry=registry(marks, wait_s, finished), worker="w"
    )
    with s.batch():
        for _ in range(tasks):
            s.submit("next3")
    worker = Worker(s, concurrency=concurrency)
    cpu = time.process_time()
    running = threading.Thread(target=worker.run)
    running.start()
    # Waited on, not polled: a poll over every task's marks took the worker's GIL (a
    # quarter of its samples at 5,120 tasks) and counted in its CPU.
    all_ended.wait(600)
    cpu = time.process_time() - cpu
    worker.stop()
    running.join()
    done = [m for m in marks.values() if "f" in m]
    span = max(m["f"] for m in done) - min(m["s1"] for m in done)
    ends, starts = sorted(m["f"] for m in done), sorted(m["s1"] for m in done)
    return {
        "tasks_per_s": len(done) / span,
        "ideal": concurrency / (3 * wait_s),
        "cpu_ms_per_task": cpu / len(done) * 1000,
        # How much longer than asked each task's three waits took, together (asyncio's
        # timers wake on epoll's millisecond, and when the loop's turn comes).
        "waits' lateness": [
            m["e1"] - m["s1"] + m["e2"] - m["s2"] + m["e3"] - m["s3"] - 3 * wait_s for m in done
        ],
        "boundary 1-2": [m["s2"] - m["e1"] for m in done],
        "boundary 2-3": [m["s3"] - m["e2"] for m in done],
        "end": [m["f"] - m["e3"] for m in done],
        "slot turn": [starts[concurrency + k] - ends[k] for k in range(len(done) - concurrency)],
    }


def _spread(seconds: list[float]) -> str:
    if not seconds:
        return "-"
    ordered = sorted(seconds)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return (
        f"mean {statistics.mean(ordered) * 1000:.2f} ms, median "
        f"{statistics.median(ordered) * 1000:.2f} ms, p90 {p90 * 1000:.2f} ms"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.concurrency_gaps",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--phase-ms", type=float, default=200.0, help="each phase's wait")
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--tasks", type=int, default=1280)
    args = parser.parse_args(argv)
    if args.tasks <= args.concurrency:
        parser.error("--tasks must be more than --concurrency (a slot's turn needs a next task)")
    with tempfile.TemporaryDirectory(prefix="tasktrail-gaps-") as tmp:
        f = gaps(args.phase_ms / 1000, args.concurrency, args.tasks, Path(tmp))
    print(
        f"{f['tasks_per_s']:.1f} tasks/s (ideal {f['ideal']:.1f}, ratio "
        f"{f['tasks_per_s'] / f['ideal']:.3f}); CPU {f['cpu_ms_per_task']:.2f} ms a task"
    )
    # The means add up to a task's life past its waits (a slot's throughput); the
    # medians and p90s say how a typical one and a slow one fare.
    for what in ("waits' lateness", "boundary 1-2", "boundary 2-3", "end", "slot turn"):
        print(f"{what}: {_spread(f[what])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
