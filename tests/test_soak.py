"""Soak (long profile): a sustained workload for a bounded time, memory sampled.

Two phases on one SQLite store, each for half of TASKTRAIL_SOAK_SECONDS (60
by default), with a projector catching up as it goes:

- churn: a fixed set of running tasks records memos and checkpoints; the log
  grows, the tasks do not, so memory must not grow (beyond noise);
- mixed: the crash tests' workload, its live tasks held under a cap; memory
  may grow only by a bounded amount per task that ended (the scheduler and
  the projector keep each task's final state), not per event.

Memory is what tracemalloc traces after a collection; the samples are printed.
"""

from __future__ import annotations

import gc
import os
import random
import resource
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.checks import fold, verify_problems, world_problems
from helpers.workload import Workload, workload_registry

from tasktrail.domain import ManualClock, Scheduler
from tasktrail.projections import Projector

SECONDS = float(os.environ.get("TASKTRAIL_SOAK_SECONDS", "60"))
SAMPLE_EVERY = 2.0
CHURN_TASKS = 50
MAX_LIVE = 150
CHURN_GROWTH_BOUND = 2 * 1024 * 1024
"""Bytes the churn phase may add in all: caches filling, not a leak per event."""
ENDED_TASK_BOUND = 8 * 1024
"""Bytes each ended task may keep (its final state in the scheduler and the projector)."""


@dataclass
class Sample:
    seconds: float
    events: int
    tasks: int
    live: int
    ended: int
    traced: int
    max_rss_kib: int

    def __str__(self) -> str:
        return (
            f"{self.seconds:6.1f}s {self.events:8d} events {self.tasks:7d} tasks "
            f"{self.live:4d} live {self.ended:7d} ended {self.traced / 1024:9.0f} KiB traced "
            f"{self.max_rss_kib:8d} KiB max rss"
        )


def _sample(started: float, s: Scheduler) -> Sample:
    gc.collect()
    return Sample(
        seconds=time.monotonic() - started,
        events=s.store.head(),
        tasks=len(s.world.tasks),
        live=len(s.world.live),
        # Counted, not len(tasks) - live: a snapshot compacts the world, dropping
        # the ended tasks nothing live refers to (every 20,000 events, which a run may pass).
        ended=s.world.counts.get("terminal", 0),
        traced=tracemalloc.get_traced_memory()[0],
        max_rss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    )


def _run(seconds: float, step: object, started: float, s: Scheduler) -> list[Sample]:
    samples = [_sample(started, s)]
    deadline = time.monotonic() + seconds
    next_sample = time.monotonic() + SAMPLE_EVERY
    for _ in range(10_000_000):  # bounded; the deadline ends it long before
        step()  # type: ignore[operator]
        if time.monotonic() >= next_sample:
            samples.append(_sample(started, s))
            print(samples[-1])
            next_sample += SAMPLE_EVERY
            if time.monotonic() >= deadline:
                break
    return samples


@pytest.mark.slow
def test_memory_grows_only_with_the_tasks_that_ended(tmp_path: Path) -> None:
    rng = random.Random(8)
    clock = ManualClock(1_000_000)
    s = Scheduler.open(tmp_path / "soak.db", clock=clock, registry=workload_registry(rng))
    projector = Projector(s.store, tmp_path / "views.db")
    tracemalloc.start()
    started = time.monotonic()
    try:
        # Churn: the same running tasks, more and more events.
        churning = [s.submit("manual", phase="step") for _ in range(CHURN_TASKS)]
        for task_id in churning:
            s.reserve(task_id)
        counter = iter(range(10**9))

        def churn() -> None:
            n = next(counter)
            task_id = churning[n % CHURN_TASKS]
            if n % 3:
                s.memo(task_id, f"m{n % 4}", {"n": n})
            else:
                s.checkpoint(task_id, "step" if n % 2 else "step2")
            if n % 500 == 0:
                projector.catch_up()

        print("\nchurn: a fixed set of running tasks")
        warm = _run(min(5.0, SECONDS / 6), churn, started, s)[-1]
        churned = _run(SECONDS / 2, churn, started, s)
        churn_growth = churned[-1].traced - warm.traced
        churn_events = churned[-1].events - warm.events

        # Mixed: tasks come and go, the live ones held under a cap.
        workload = Workload(s, clock, rng, project=projector.catch_up, max_live=MAX_LIVE)
        print("mixed: tasks submitted, run and ended")
        mixed = _run(SECONDS / 2, workload.step, started, s)
    finally:
        tracemalloc.stop()
    first, last = mixed[0], mixed[-1]
    ended = last.ended - first.ended
    per_ended = (last.traced - first.traced) / max(ended, 1)
    print(
        f"churn: {churn_events} events, {churn_growth / 1024:.0f} KiB; "
        f"mixed: {last.events - first.events} events, {ended} tasks ended, "
        f"{per_ended:.0f} bytes per ended task, live at most {max(x.live for x in mixed)}"
    )
    assert churn_events > 1_000  # the phase did run
    assert churn_growth < CHURN_GROWTH_BOUND
    assert ended > 500
    assert per_ended < ENDED_TASK_BOUND
    assert max(x.live for x in mixed) <= MAX_LIVE + CHURN_TASKS + 10
    assert world_problems(fold(s.store).world) == []
    violations = verify_problems(s.store)
    assert not violations, violations
    projector.close()
    s.close()
