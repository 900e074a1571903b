"""``python -m benchmarks.fleet [--quick] [--json PATH] [--postgres URL]``: a fleet on one store.

Three measurements, each in rounds, on SQLite and on PostgreSQL:

1. **Throughput**: tasks completed per second by 1, 2 and 4 ``tasktrail worker``
   processes sharing one store (trees of a task and three owned leaves, waits of
   policy ``all``), with the conflicts the workers met per completed task.
2. **Recovery**: the time from a SIGKILL of a worker mid-phase to the moment
   another worker recorded the recovery of its task (lease 2 s; the goal is
   lease + one heartbeat, a third of the lease).
3. **Where one store stops**: the appends per second one store takes from 1 to 16
   writer processes, each submitting tasks one command (one transaction) at a time.

Figures are medians over the rounds with their min-max spread. Run from the
repository root; the PostgreSQL rows need a server (default
``postgresql://postgres@127.0.0.1:5432/test``), each round in a schema of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tasktrail.domain import Scheduler, open_store
from tasktrail.domain.tasks.events import TaskEnded, TaskRecovered

from .fleet_registry import TASKS_PER_TREE
from .report import machine, machine_line

ROOT = Path(__file__).resolve().parent.parent
POSTGRES = os.environ.get("TASKTRAIL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
WRITER = """
import sys, time
from tasktrail.domain import Registry, Scheduler, TaskDefinition
registry = Registry([TaskDefinition("job", 1, {"go": lambda inv: inv.finish()})])
s = Scheduler.open(sys.argv[1], registry=registry, worker=sys.argv[2])
start, stop, n = float(sys.argv[3]), float(sys.argv[4]), 0
while time.time() < start:
    time.sleep(0.001)
while time.time() < stop:
    s.submit("job")
    n += 1
print(n)
s.close()
"""


class Stores:
    """Fresh stores for each round: a SQLite file, or a PostgreSQL schema."""

    def __init__(self, workdir: Path, postgres: str | None) -> None:
        self.workdir = workdir
        self.postgres = postgres
        self.schemas: list[str] = []

    def new(self, kind: str) -> str:
        name = f"fleet_{uuid.uuid4().hex[:10]}"
        if kind == "sqlite":
            return str(self.workdir / f"{name}.db")
        import psycopg

        assert self.postgres is not None
        with psycopg.connect(self.postgres, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        self.schemas.append(name)
        return f"{self.postgres}?schema={name}"

    def drop(self) -> None:
        if not self.schemas:
            return
        import psycopg

        assert self.postgres is not None
        with psycopg.connect(self.postgres, autocommit=True) as conn:
            for name in self.schemas:
                conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _worker(location: str, name: str, stats: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "tasktrail.replay.cli", "worker"]
    command += ["benchmarks.fleet_registry:registry", "--store", location, "--worker", name]
    command += ["--lease", "2000", "--poll", "20", "--quiet", "--stats", str(stats)]
    return subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.DEVNULL)


class _EndedCounter:
    """Counts ``TaskEnded`` events as they arrive, on one connection, reading only what
    is new: the watcher must not load the store it measures."""

    def __init__(self, location: str) -> None:
        self.store = open_store(location)
        self.position = 0
        self.ended = 0

    def __call__(self) -> int:
        for recorded in self.store.read(after=self.position):
            self.position = recorded.position
            self.ended += isinstance(recorded.event, TaskEnded)
        return self.ended


def _submit_trees(location: str, trees: int) -> None:
    from .fleet_registry import registry

    s = Scheduler.open(location, registry=registry, worker="submitter")
    with s.batch():
        for _ in range(trees):
            s.submit("tree")
    s.close()


def _wait_for_leases(location: str, workers: int) -> None:
    """Until ``workers`` workers hold a lease: started, imported, their store open."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        s = Scheduler.open(location, worker="observer")
        try:
            if len(s.leases.alive(s.now()) - {"observer"}) >= workers:
                return
        finally:
            s.close()
        time.sleep(0.05)
    raise TimeoutError(f"{workers} workers did not start within 60 s")


def throughput(stores: Stores, kind: str, workers: int, trees: int) -> dict[str, float]:
    """One round: ``trees`` trees run by ``workers`` processes; tasks/s and conflicts/task.

    The clock starts once every worker is up and idle, when the trees are submitted:
    what is timed is the fleet working, not Python starting."""
    location = stores.new(kind)
    Scheduler.open(location, worker="setup").close()
    stats = stores.workdir / f"stats-{uuid.uuid4().hex[:8]}.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [_worker(location, f"w{n}", stats, env) for n in range(workers)]
    _wait_for_leases(location, workers)
    started = time.monotonic()
    _submit_trees(location, trees)
    total = trees * TASKS_PER_TREE
    ended = _EndedCounter(location)
    try:
        while ended() < total:
            if time.monotonic() - started > 300:
                raise TimeoutError(f"{workers} workers on {kind}: not done in 300 s")
            time.sleep(0.1)
        elapsed = time.monotonic() - started
    finally:
        ended.store.close()
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(30)
    totals = [json.loads(line) for line in stats.read_text().splitlines()]
    conflicts = sum(t["conflicts"] for t in totals)
    return {"tasks_per_s": total / elapsed, "conflicts_per_task": conflicts / total}


def _holds(location: str, worker: str) -> bool:
    """Whether ``worker`` holds a running task now (folded from the log)."""
    from tasktrail.replay import replay

    live = replay(location, audit=False).live.values()
    return any(task.status == "running" and task.worker == worker for task in live)


def recovery(stores: Stores, kind: str) -> float:
    """One round: ms from a SIGKILL mid-phase to the recovery another worker recorded."""
    location = stores.new(kind)
    _submit_trees(location, 40)
    stats = stores.workdir / f"stats-{uuid.uuid4().hex[:8]}.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TASKTRAIL_BENCH_PHASE_MS": "200"}
    victim, survivor = _worker(location, "victim", stats, env), _worker(location, "ok", stats, env)
    try:
        # Phases of 200 ms: kill as soon as the victim holds a task, so it dies mid-phase.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _holds(location, "victim"):
            time.sleep(0.01)
        victim.send_signal(signal.SIGKILL)
        killed_at = time.time() * 1000
        victim.wait(10)
        if not _holds(location, "victim"):
            raise RuntimeError("the victim held no task when killed: nothing to recover")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open_store(location) as store:
                recovered = [r.event.at for r in store.read() if isinstance(r.event, TaskRecovered)]
            if recovered:
                return min(recovered) - killed_at
            time.sleep(0.05)
        raise TimeoutError("no recovery within 30 s")
    finally:
        survivor.send_signal(signal.SIGTERM)
        survivor.wait(30)


def appends(stores: Stores, kind: str, writers: int, seconds: float) -> float:
    """One round: commands per second ``writers`` processes append to one store."""
    location = stores.new(kind)
    Scheduler.open(location, worker="setup").close()  # tables made before the race
    start = time.time() + 2.0  # every writer imported and open before the clock starts
    stop = start + seconds
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, location, f"writer{n}", str(start), str(stop)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        for n in range(writers)
    ]
    counts = [int(p.communicate(timeout=seconds + 120)[0] or 0) for p in processes]
    return sum(counts) / seconds


def spread(values: list[float]) -> dict[str, float]:
    """Median, min and max of a round's figures."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer trees, rounds and writers")
    parser.add_argument("--json", default=None, help="write the figures as JSON to this file")
    parser.add_argument("--postgres", default=POSTGRES, help="server URL ('' to skip)")
    args = parser.parse_args(argv)
    rounds, trees = (2, 60) if args.quick else (3, 150)
    writer_counts = (1, 4, 16) if args.quick else (1, 2, 4, 8, 16)
    kinds = ["sqlite"] + (["postgresql"] if args.postgres else [])
    results: dict[str, Any] = {"machine": machine(), "throughput": {}, "recovery": {}}
    results["appends"] = {}
    with tempfile.TemporaryDirectory(prefix="tasktrail-fleet-") as tmp:
        stores = Stores(Path(tmp), args.postgres or None)
        try:
            for kind in kinds:
                for workers in (1, 2, 4):
                    runs = [throughput(stores, kind, workers, trees) for _ in range(rounds)]
                    results["throughput"][f"{kind}/{workers}"] = {
                        "tasks_per_s": spread([r["tasks_per_s"] for r in runs]),
                        "conflicts_per_task": spread([r["conflicts_per_task"] for r in runs]),
                    }
                    print(kind, workers, "workers", results["throughput"][f"{kind}/{workers}"])
                results["recovery"][kind] = spread([recovery(stores, kind) for _ in range(rounds)])
                print(kind, "recovery ms", results["recovery"][kind])
                for writers in writer_counts:
                    rates = [appends(stores, kind, writers, 5.0) for _ in range(rounds)]
                    results["appends"][f"{kind}/{writers}"] = spread(rates)
                    print(kind, writers, "writers", results["appends"][f"{kind}/{writers}"])
        finally:
            stores.drop()
    print(format_fleet(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


def format_fleet(results: dict[str, Any]) -> str:
    """The figures as markdown tables."""
    lines = [f"Machine: {machine_line(results['machine'])}", ""]
    lines += [
        "| store | workers | tasks/s (median, min-max) | conflicts per task |",
        "|---|---|---|---|",
    ]
    for key, row in results["throughput"].items():
        kind, workers = key.split("/")
        t, c = row["tasks_per_s"], row["conflicts_per_task"]
        lines.append(
            f"| {kind} | {workers} | {t['median']:.0f} ({t['min']:.0f}-{t['max']:.0f}) "
            f"| {c['median']:.3f} ({c['min']:.3f}-{c['max']:.3f}) |"
        )
    lines += ["", "| store | kill to recovery, ms (median, min-max) | goal: lease + heartbeat |"]
    lines += ["|---|---|---|"]
    for kind, r in results["recovery"].items():
        verdict = "met" if r["max"] <= 2000 + 2000 / 3 else "MISSED"
        lines.append(
            f"| {kind} | {r['median']:.0f} ({r['min']:.0f}-{r['max']:.0f}) | <= 2667 {verdict} |"
        )
    lines += ["", "| store | writer processes | commands/s (median, min-max) |", "|---|---|---|"]
    for key, r in results["appends"].items():
        kind, writers = key.split("/")
        lines.append(f"| {kind} | {writers} | {r['median']:.0f} ({r['min']:.0f}-{r['max']:.0f}) |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
