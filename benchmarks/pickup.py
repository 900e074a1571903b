"""``python -m benchmarks.pickup [--rounds N] [--postgres URL]``: how soon an idle worker
picks up a submission (issue 42 item 7), on SQLite and PostgreSQL.

A ``tasktrail worker benchmarks.pickup:registry`` process idles on a fresh store; this
process submits one task of one trivial phase at a time, a random pause (50-150 ms)
apart so that the worker is idle each time and the submit falls anywhere in its wait.
The phase writes the wall time it started to a file (one ``os.write`` of an
``O_APPEND`` file); the pick-up is that time minus the time ``submit`` returned.
Printed: median and p95 in ms of the rounds, for each store.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tasktrail.domain import Registry, TaskDefinition

POSTGRES = os.environ.get("TASKTRAIL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
STARTS = "TASKTRAIL_PICKUP_STARTS"
"""The file the phase appends ``TASK WALL_TIME`` to."""


def _ping(inv: Any) -> None:
    line = f"{inv.task_id} {time.time()!r}\n".encode()
    fd = os.open(os.environ[STARTS], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    inv.finish("completed")


registry = Registry()
registry.register(TaskDefinition("ping", version=1, phases={"start": _ping}))


def _started(starts: Path, task_id: str, deadline: float) -> float:
    while time.monotonic() < deadline:
        if starts.exists():
            for line in starts.read_text().splitlines():
                tid, at = line.split()
                if tid == task_id:
                    return float(at)
        time.sleep(0.0005)
    raise TimeoutError(f"the worker did not start {task_id}")


def measure(location: str, rounds: int, folder: Path) -> list[float]:
    """Pick-up latencies (ms) of ``rounds`` submissions to an idle worker on ``location``."""
    from tasktrail.domain import Scheduler

    starts = folder / f"starts-{uuid.uuid4().hex}"
    env = {**os.environ, STARTS: str(starts)}
    here = str(Path(__file__).parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([here, env.get("PYTHONPATH", "")])
    with Scheduler.open(location):
        pass  # created before the worker opens it
    worker = subprocess.Popen(
        [
            *(sys.executable, "-m", "tasktrail.replay.cli", "worker"),
            *("benchmarks.pickup:registry", "--store", location, "--quiet"),
        ],
        env=env,
    )
    pickups: list[float] = []
    try:
        with Scheduler.open(location) as s:
            first = s.submit("ping", phase="start")  # the worker is up once it ran one
            _started(starts, first, time.monotonic() + 60)
            for _ in range(rounds):
                time.sleep(random.uniform(0.05, 0.15))
                task_id = s.submit("ping", phase="start")
                submitted = time.time()
                started = _started(starts, task_id, time.monotonic() + 10)
                pickups.append((started - submitted) * 1000)
    finally:
        worker.terminate()
        worker.wait(30)
    return pickups


def _schema_url(url: str) -> str:
    import psycopg

    schema = f"pickup_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}schema={schema}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pickup")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--postgres", default=POSTGRES, help="server URL ('' to skip)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        locations = [("sqlite", str(folder / "pickup.db"))]
        if args.postgres:
            locations.append(("postgres", _schema_url(args.postgres)))
        for name, location in locations:
            ms = sorted(measure(location, args.rounds, folder))
            p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
            print(
                f"{name:9} pick-up over {len(ms)} rounds: median {statistics.median(ms):.1f} ms, "
                f"p95 {p95:.1f} ms, min {ms[0]:.1f}, max {ms[-1]:.1f}"
            )


if __name__ == "__main__":
    main()
