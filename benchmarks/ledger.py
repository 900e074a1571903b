"""6: the seeds' ledger (one JSON file, rewritten whole on every change) against the run
ledger (each change an event appended to the run's own stream), per write, as it grows."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

import orjson

from tasktrail.domain import InMemoryExecutor, Scheduler

from .report import Figure
from .workload import batch_of, open_scheduler

WRITES_PER_RUN = 2
CHUNKS = 5
"""A manual run is minted (``dispatching``) and then taken by the executor (``running``)."""


class SeedLedger:
    """The seed's way: every run in one dict, the whole file written again on each change."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.runs: dict[str, dict[str, Any]] = {}

    def write(self, run_id: str, row: dict[str, Any]) -> None:
        """Change one run and rewrite the file (to a temporary name, then renamed)."""
        self.runs[run_id] = row
        scratch = self.path.with_suffix(".tmp")
        scratch.write_bytes(orjson.dumps(self.runs))
        os.replace(scratch, self.path)


def _seed_row(n: int, status: str) -> dict[str, Any]:
    return {
        "run_id": f"task-{n:09d}|2026-01-05|1",
        "task_id": f"task-{n:09d}",
        "day": "2026-01-05",
        "attempt": 1,
        "trigger": "manual",
        "status": status,
        "client_job_id": "1f0c9a52-3b1e-4c1a-9a57-0d2b8f6e3c41",
        "tz": "UTC",
        "fired_at": 1_767_603_600_000,
        "job_id": f"job-{n}",
        "submit_attempts": 0,
    }


def _grow_runs(scheduler: Scheduler, start: int, stop: int) -> None:
    with batch_of(scheduler):
        for n in range(start, stop):
            task_id = scheduler.submit("job", id=f"task-{n:09d}")
            scheduler.mint_run(task_id)


def ledger_figures(workdir: Path, sizes: list[int], writes: int = 500) -> list[Figure]:
    """Cost per write of both ledgers holding 1k, 10k, 100k runs."""
    path = workdir / "ledger.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    scheduler, _ = open_scheduler(path, "normal")
    scheduler.configure_runs(executor=InMemoryExecutor())
    seed = SeedLedger(workdir / "seed-ledger.json")
    have = 0
    ours: dict[int, float] = {}
    theirs: dict[int, float] = {}
    try:
        for size in sizes:
            _grow_runs(scheduler, have, size)
            seed.runs = {f"r{n}": _seed_row(n, "running") for n in range(size)}
            seed.write("r0", _seed_row(0, "running"))
            have = size
            # Tasks to mint, submitted beforehand: only the runs' writes are timed.
            with batch_of(scheduler):
                fresh = [
                    scheduler.submit("job", id=f"task-{n:09d}") for n in range(have, have + writes)
                ]
            # In chunks, the median kept: a fraction of a second each, so one burst of
            # load on the machine does not decide the figure.
            chunk = max(1, writes // CHUNKS)
            costs = []
            for start in range(0, len(fresh), chunk):
                started = time.perf_counter()
                for task_id in fresh[start : start + chunk]:
                    scheduler.mint_run(task_id)
                seconds = time.perf_counter() - started
                costs.append(seconds / (len(fresh[start : start + chunk]) * WRITES_PER_RUN))
            ours[size] = statistics.median(costs) * 1e6
            have += writes
            done = 0
            started = time.perf_counter()
            while done < writes * WRITES_PER_RUN and (
                done < 6 or time.perf_counter() - started < 1.5
            ):
                n = size + done // 2
                seed.write(f"r{n}", _seed_row(n, "dispatching" if done % 2 == 0 else "running"))
                done += 1
            theirs[size] = (time.perf_counter() - started) / done * 1e6
    finally:
        scheduler.close()
    smallest, largest = sizes[0], sizes[-1]
    figures = []
    for size in sizes:
        last = size == largest
        growth = ours[size] / ours[smallest]
        figures.append(
            Figure(
                "6 run ledger",
                f"cost per write at {size:,} runs",
                ours[size],
                "us/write",
                limit=theirs[size],
                ratio=growth,
                goal="flat (<= 1.2x at the smallest)" if last else "",
                met=(growth <= 1.2) if last else None,
                note=(
                    "limit column: the seed-style JSON ledger, "
                    f"{theirs[size] / theirs[smallest]:.1f}x its cost at {smallest:,}; "
                    f"ratio: the run ledger's cost / its cost at {smallest:,}; "
                    "run ledger at durability normal, seed file not fsynced"
                ),
                extra={"seed_us_per_write": theirs[size], "run_ledger_us_per_write": ours[size]},
            )
        )
    return figures
